#!/usr/bin/env bash
# contrib/cri-o/crio-test-config.sh DIR [POLICY_TOML_FILE]: a minimal crio.conf
# for one private CRI-O instance, every state path under DIR:
#
#   DIR/crio.conf                 main config (storage, runtime, CNI, NRI)
#   DIR/crio.conf.d/              drop-ins; POLICY_TOML_FILE (the required
#                                 NRI plugins, or any drop-in), if given, is
#                                 copied to DIR/crio.conf.d/10-policy.conf
#   DIR/cni/10-crio-test.conflist bridge + host-local + loopback (Debian's
#                                 /usr/lib/cni), a bridge and subnet of its own
#   DIR/signature-policy.json     insecureAcceptAnything
#
# Prints shell assignments of the sockets and paths, e.g.
#   eval "$(contrib/cri-o/crio-test-config.sh /tmp/c)"
#   bin/crio --config "$CRIO_CONFIG" --config-dir "$CRIO_CONFIG_DIR" &
#
# Environment: CRIO_BINDIR (pinns; default bin/), CRI_SOCK (default
# DIR/crio.sock), NRI_SOCK (default DIR/nri.sock), NRI_REQUEST_TIMEOUT
# (default 2s), PAUSE_IMAGE (default registry.k8s.io/pause:3.10.1),
# CRIO_LOG_LEVEL (default info), CRIO_METRICS_PORT (enables metrics),
# ENABLE_NRI (default true; false turns NRI off, as the benchmark's mode (a)),
# CRIO_CNI_PLUGIN_DIRS (the CNI plugin directories, searched in order, default
# /usr/lib/cni: a test puts a directory of its own first to wrap a plugin),
# CRIO_INFRA=1 (pods with an infra container run: runc through
# contrib/cri-o/runc-infra.sh, and pause_command = "", so that the pause image
# of crio-pause-image.sh, which the caller imports, is run).
set -euo pipefail

[[ $# -ge 1 && -n $1 ]] || { echo "usage: $0 DIR [POLICY_TOML_FILE]" >&2; exit 2; }
REPO=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1"
DIR=$(cd "$1" && pwd)
BINDIR=${CRIO_BINDIR:-$REPO/bin}
CRI_SOCK=${CRI_SOCK:-$DIR/crio.sock}
NRI_SOCK=${NRI_SOCK:-$DIR/nri.sock}
PAUSE_IMAGE=${PAUSE_IMAGE:-registry.k8s.io/pause:3.10.1}
RUNC=$(command -v runc || echo /usr/sbin/runc)
runtime_path=$RUNC
pause_command=
if [[ ${CRIO_INFRA:-} == 1 ]]; then
	runtime_path=$REPO/contrib/cri-o/runc-infra.sh
	pause_command='pause_command = ""'
fi
plugin_dirs=$(printf '"%s", ' ${CRIO_CNI_PLUGIN_DIRS:-/usr/lib/cni})
CONMON=$(command -v conmon || echo /usr/bin/conmon)
if [[ $# -ge 2 && -n $2 && ! -r $2 ]]; then
	echo "$0: policy file $2 is not readable" >&2
	exit 2
fi

mkdir -p "$DIR/crio.conf.d" "$DIR/cni" "$DIR/runc" "$DIR/nri-plugins" "$DIR/nri-conf" "$DIR/state"
echo '{"default":[{"type":"insecureAcceptAnything"}]}' >"$DIR/signature-policy.json"

bridge=crio$(printf %s "$DIR" | md5sum | cut -c1-10)
# The bridge exists before the first pod, with an address of its own. A
# Linux bridge without one takes the lowest address of its ports and
# changes it when a port with a lower one joins; the bridge plugin's CHECK,
# which CRI-O runs right after each ADD, then fails a pod created beside
# others with "Bridge interface ... Mac doesn't match" (plugins 1.1.1; the
# e2e load spec, 8 clients, hit it). Whoever removes the bridge
# (CRIO_CNI_BRIDGE) removes this one.
if ! ip link show "$bridge" >/dev/null 2>&1; then
	ip link add name "$bridge" type bridge
	ip link set dev "$bridge" address "02:$(printf %s "$DIR" | md5sum | sed 's/../&:/g' | cut -c1-14)"
fi
h=$((16#$(printf %s "$DIR" | md5sum | cut -c1-4)))
subnet="10.$((150 + h % 50)).$(((h / 50) % 256)).0/24"
cat >"$DIR/cni/10-crio-test.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "crio-test", "plugins": [
  {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$subnet"}]], "dataDir": "$DIR/state/cni-ipam"}},
  {"type": "loopback"}]}
JSON

s=$DIR/state
metrics=
if [[ -n ${CRIO_METRICS_PORT:-} ]]; then
	metrics="[crio.metrics]
enable_metrics = true
metrics_host = \"127.0.0.1\"
metrics_port = ${CRIO_METRICS_PORT}"
fi
cat >"$DIR/crio.conf" <<TOML
[crio]
root = "$s/root"
runroot = "$s/run"
storage_driver = "overlay"
log_dir = "$s/logs"
version_file = "$s/version"
version_file_persist = "$s/version-persist"
clean_shutdown_file = "$s/clean.shutdown"

[crio.api]
listen = "$CRI_SOCK"

[crio.runtime]
log_level = "${CRIO_LOG_LEVEL:-info}"
cgroup_manager = "cgroupfs"
default_runtime = "runc"
drop_infra_ctr = true
pinns_path = "$BINDIR/pinns"
namespaces_dir = "$s/ns"
container_exits_dir = "$s/exits"
container_attach_socket_dir = "$s/attach"

[crio.runtime.runtimes.runc]
runtime_path = "$runtime_path"
runtime_type = "oci"
runtime_root = "$DIR/runc"
monitor_path = "$CONMON"
monitor_cgroup = "pod"

[crio.image]
signature_policy = "$DIR/signature-policy.json"
signature_policy_dir = "$DIR/policies"
namespaced_auth_dir = "$DIR/auth"
pause_image = "$PAUSE_IMAGE"
$pause_command

[crio.network]
network_dir = "$DIR/cni"
plugin_dirs = [${plugin_dirs%, }]

[crio.nri]
enable_nri = ${ENABLE_NRI:-true}
nri_listen = "$NRI_SOCK"
nri_plugin_dir = "$DIR/nri-plugins"
nri_plugin_config_dir = "$DIR/nri-conf"
nri_plugin_request_timeout = "${NRI_REQUEST_TIMEOUT:-2s}"
$metrics
TOML

if [[ $# -ge 2 && -n $2 ]]; then
	cp "$2" "$DIR/crio.conf.d/10-policy.conf"
fi

cat <<EOV
CRIO_CONFIG=$DIR/crio.conf
CRIO_CONFIG_DIR=$DIR/crio.conf.d
CRI_SOCK=$CRI_SOCK
NRI_SOCK=$NRI_SOCK
CRIO_ROOT=$s/root
CRIO_RUNROOT=$s/run
CRIO_SIGNATURE_POLICY=$DIR/signature-policy.json
CRIO_CNI_BRIDGE=$bridge
EOV
