#!/usr/bin/env bash
# contrib/cri-o/run.sh: make run. Patched CRI-O (bin/crio) in the foreground
# on its standard socket /var/run/crio/crio.sock, NRI on /var/run/nri/nri.sock,
# with the sample required plugin contrib/demo/crio.conf.d/10-nri-faulty.conf
# (nri-faulty required, fail, registration_wait 3s, namespace "system"
# exempt). Every state path, the CNI conflist and the images live in
# build/cri-o/run (never /etc/cni, never /var/lib/containers).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$REPO/contrib/cri-o
BIN=${CRIO_BINDIR:-$REPO/bin}
DIR=${CRIO_RUN_DIR:-$REPO/build/cri-o/run}
POLICY=$REPO/contrib/demo/crio.conf.d/10-nri-faulty.conf
SOCK=/var/run/crio/crio.sock

for b in crio pinns crio-copyimg nri-faulty; do
	[[ -x $BIN/$b ]] || { echo "$BIN/$b missing: run make build crio" >&2; exit 1; }
done
if [[ -S $SOCK ]] && crictl --timeout 2s -r "unix://$SOCK" version >/dev/null 2>&1; then
	echo "a runtime already serves $SOCK: stop it first" >&2
	exit 1
fi
rm -rf "$DIR"
mkdir -p "$DIR" /var/run/crio /var/run/nri
eval "$(CRI_SOCK=$SOCK NRI_SOCK=/var/run/nri/nri.sock "$HERE/crio-test-config.sh" "$DIR" "$POLICY")"
"$REPO/hack/make-test-image.sh" "$DIR/busybox.tar" >/dev/null
"$HERE/crio-import-image.sh" "$DIR" "$DIR/busybox.tar" localhost/busybox:latest registry.k8s.io/pause:3.10.1 >"$DIR/import.log"

pod() { # NAME NAMESPACE
	cat >"$DIR/$1-pod.json" <<JSON
{"metadata": {"name": "$1", "namespace": "$2", "uid": "$1-uid", "attempt": 0},
 "log_directory": "$DIR/pod-logs/$1",
 "linux": {"security_context": {"namespace_options": {"network": 2, "pid": 1}}}}
JSON
}
pod demo default
pod infra system
cat >"$DIR/ctr.json" <<JSON
{"metadata": {"name": "app"}, "image": {"image": "localhost/busybox:latest"},
 "command": ["sleep", "3600"], "log_path": "app.log",
 "linux": {"security_context": {"namespace_options": {"pid": 1}}}}
JSON
trap 'ip link del "$CRIO_CNI_BRIDGE" 2>/dev/null || true' EXIT

c="crictl -r unix://$SOCK"
cat <<TXT
Patched CRI-O v1.36.3 starts in the foreground on $SOCK with the sample required plugin:
$(sed -n '/^\[/,$p' "$POLICY" | sed 's/^/    /')
State, CNI conflist and images: $DIR. In another shell, as root:

  # NRIPluginsReady is false: nri-faulty is not running
  $c info | jq .status.conditions
  # a container in namespace default waits 3s for the plugin, then is refused (FailedPrecondition, naming the plugin);
  # crictl's default 2s timeout is shorter than registration_wait, hence --timeout 10s
  POD=\$($c runp $DIR/demo-pod.json)
  $c --timeout 10s create \$POD $DIR/ctr.json $DIR/demo-pod.json
  # the exempt namespace "system" is not gated
  INFRA=\$($c runp $DIR/infra-pod.json); $c create \$INFRA $DIR/ctr.json $DIR/infra-pod.json
  # start the required plugin (NRI socket /var/run/nri/nri.sock): NRIPluginsReady turns true
  $BIN/nri-faulty --name nri-faulty &
  $c info | jq '.status.conditions, .nri.plugins'
  # now the container is created, with the plugin's injected variable
  CTR=\$($c --timeout 10s create \$POD $DIR/ctr.json $DIR/demo-pod.json); $c start \$CTR
  $c exec -s \$CTR env | grep NRI_FAULTY_ACTED
  # clean up
  $c rmp -f \$POD \$INFRA; kill %1

TXT
"$BIN/crio" --config "$CRIO_CONFIG" --config-dir "$CRIO_CONFIG_DIR"
