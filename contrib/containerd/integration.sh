#!/usr/bin/env bash
# contrib/containerd/integration.sh SRC [GO_TEST_ARGS...]
#
# Runs containerd's own NRI integration tests (integration/nri_test.go of
# the patched tree SRC, the series' cases of required plugins included)
# against bin/containerd, the way containerd's CI runs them
# (script/test/utils.sh starts a containerd with NRI on
# /var/run/nri-test.sock, then `go test ./integration -test.run ...`
# connects to it), with every other path private:
#
#   - the integration package is compiled with `go test -c` from vendor/;
#   - contrib/containerd/containerd-test-config.sh writes the private config,
#     with socket_path /var/run/nri-test.sock (a constant of nri_test.go) and
#     the failpoint runtime runc-fp (its shim built from the tree), in two
#     phases: first without required NRI plugins, where the NRI tests but
#     the required-plugin ones run (TestNri*, as containerd's CI runs them,
#     no required plugins: plain NRI keeps its coverage), then, containerd
#     restarted, with the required NRI plugins of containerd's CI config for
#     its required-plugin tests (script/test/utils.sh of the series with
#     NRI_REQUIRED_PLUGINS_TEST=1): plugin "nri-required-test" required for
#     RunPodSandbox and CreateContainer in the namespaces
#     nri-required-test-*, where the TestNriRequiredPlugin* tests run with
#     NRI_REQUIRED_PLUGINS_TEST=1 as in containerd's CI step, so that they
#     fail, not skip, on a containerd without the plugin;
#   - the images the tests use (integration/images: BusyBox, Pause) cannot be
#     pulled here (no network): hack/make-test-image.sh's busybox is imported
#     under the test image's name and -image-list points the tests at it;
#   - containerd runs as a copy of bin/containerd named for this run
#     (ctrd-it-PID, a process name nothing else on the machine has) under a
#     keepalive loop, as script/test/utils.sh runs it in containerd's CI:
#     RestartContainerd (-containerd-bin) kills it by that name (pkill -x)
#     and waits for the loop to start it again, so that containerd's restart
#     tests and the series' crash tests kill this containerd only.
#
# A lock on /var/run/nri-test.sock.lock keeps two runs from sharing the
# socket. The test binary's output goes through go tool test2json, so the
# caller can count tests (hack/test-summary.sh).
#
# Environment: BIN (bin/), IT_RUN (the tests of the first phase, default
# '^TestNri'), IT_SKIP (tests to skip in it, default the required-plugin
# ones), IT_RUN_REQUIRED (the tests of the second phase, default
# '^TestNriRequiredPlugin'; empty: no second phase), RESTART_WAIT_PERIOD (seconds the
# loop waits before it starts a killed containerd again, default 3: more than
# the 1s period at which RestartContainerd checks that it is gone), KEEP=1
# keeps the private directory.
set -euo pipefail

src=${1:?usage: $0 SRC [GO_TEST_ARGS...]}
shift
REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$REPO/contrib/containerd
BIN=${BIN:-${CONTAINERD_BINDIR:-$REPO/bin}}
GO=${GO:-go}
IT_RUN=${IT_RUN:-^TestNri}
IT_SKIP=${IT_SKIP-^TestNriRequiredPlugin}
IT_RUN_REQUIRED=${IT_RUN_REQUIRED-^TestNriRequiredPlugin}
RESTART_WAIT_PERIOD=${RESTART_WAIT_PERIOD:-3}
NRI_TEST_SOCK=/var/run/nri-test.sock

for c in runc jq ip flock crictl pkill pidof; do
	command -v "$c" >/dev/null || { echo "$0: $c is needed" >&2; exit 1; }
done
[[ -d /usr/lib/cni ]] || { echo "$0: containernetworking-plugins (/usr/lib/cni) are needed" >&2; exit 1; }

out=$REPO/build/containerd
mkdir -p "$out"
echo "go test -c -mod=vendor ./integration (containerd's integration package with the series)" >&2
(cd "$src" && GOFLAGS=-buildvcs=false $GO test -c -mod=vendor -o "$out/integration.test" ./integration) >&2
# The shim of the failpoint runtime runc-fp (as containerd's CI builds it).
mkdir -p "$out/failpoint"
(cd "$src" && GOFLAGS=-buildvcs=false $GO build -mod=vendor -o "$out/failpoint/" ./integration/failpoint/cmd/containerd-shim-runc-fp-v1) >&2

exec 9>"$NRI_TEST_SOCK.lock"
flock -w 600 9 || { echo "$0: $NRI_TEST_SOCK is in use by another run" >&2; exit 1; }

# Short: containerd limits the shim socket_dir to 42 characters.
dir=$(mktemp -d /tmp/ctdit.XXXXXX)
# The process name RestartContainerd kills (at most 15 characters: the
# kernel's comm, which pkill -x and pidof match).
ctrd_name=ctrd-it-$$
keeper=
# containerd_pids: the pids of this run's containerd (its binary is ours).
containerd_pids() {
	local p
	for p in /proc/[0-9]*; do
		[[ $(readlink "$p/exe" 2>/dev/null) == "$dir/$ctrd_name" ]] && echo "${p#/proc/}"
	done
}
cleanup() {
	set +e
	if [[ -n $keeper ]]; then
		touch "$dir/stopped"
		kill "$keeper" 2>/dev/null
		wait "$keeper" 2>/dev/null
		local pids
		pids=$(containerd_pids)
		[[ -n $pids ]] && kill -TERM $pids 2>/dev/null
		for _ in $(seq 100); do [[ -z $(containerd_pids) ]] && break; sleep 0.05; done
		pids=$(containerd_pids)
		[[ -n $pids ]] && kill -KILL $pids 2>/dev/null
	fi
	local id p root
	# The runc-fp shim has runc's default root: only this run's containers
	# there (their bundles are in its directory).
	for root in "$dir/runc" /run/containerd/runc/k8s.io; do
		for id in $(runc --root "$root" list -f json 2>/dev/null | jq -r --arg d "$dir/" '.[]? | select(.bundle | startswith($d)) | .id'); do
			runc --root "$root" kill "$id" KILL 2>/dev/null
			runc --root "$root" delete --force "$id" 2>/dev/null
		done
	done
	# The shims of this run name its directory on their command line.
	for p in $(grep -lsF "$dir/" /proc/[0-9]*/cmdline | cut -d/ -f3); do
		[[ $p != "$$" && $p != "$BASHPID" ]] && kill -KILL "$p" 2>/dev/null
	done
	awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null
	done
	[[ -n ${CNI_BRIDGE:-} ]] && ip link delete "$CNI_BRIDGE" 2>/dev/null
	rm -f "$NRI_TEST_SOCK"
	if [[ ${KEEP:-} == 1 ]]; then echo "kept $dir" >&2; else rm -rf "$dir"; fi
}
trap cleanup EXIT

# The required NRI plugins of containerd's CI config (script/test/utils.sh
# of the series, NRI_REQUIRED_PLUGINS_TEST=1), in the CRI-O syntax the config
# script translates. The first phase's config has none.
cat >"$dir/policy.toml" <<-'TOML'
	[crio.nri.required_plugins."nri-required-test"]
	fail_policy = "fail"
	events = ["RunPodSandbox", "CreateContainer"]
	namespaces = ["nri-required-test-*"]
TOML
config() {
	NRI_SOCK=$NRI_TEST_SOCK NRI_PLUGIN_REQUEST_TIMEOUT=2s LOG_LEVEL=debug FAILPOINT_RUNTIME=true \
		"$HERE/containerd-test-config.sh" "$dir/containerd" "$@"
}
eval "$(config)"
mv "$CONFIG" "$dir/config-no-required-plugins.toml"
eval "$(config "$dir/policy.toml")"
mv "$CONFIG" "$dir/config-required-plugins.toml"
# The config the keepalive loop starts containerd with, each time.
ln -sf "$dir/config-no-required-plugins.toml" "$dir/config.toml"
rm -f "$NRI_TEST_SOCK"

cp "$BIN/containerd" "$dir/$ctrd_name"
# keepalive: containerd, started again RESTART_WAIT_PERIOD seconds after it
# exits, until cleanup stops the loop.
keepalive() {
	local rc
	while [[ ! -e $dir/stopped ]]; do
		rc=0
		PATH=$BIN:$out/failpoint:$PATH "$dir/$ctrd_name" --config "$dir/config.toml" >>"$dir/containerd.log" 2>&1 || rc=$?
		echo "keepalive: containerd exited with $rc, starting it again in ${RESTART_WAIT_PERIOD}s" >>"$dir/containerd.log"
		sleep "$RESTART_WAIT_PERIOD"
	done
}
keepalive &
keeper=$!
# wait_up: until the CRI plugin serves (it starts after containerd's socket)
# and the NRI socket is there; fails if containerd exited meanwhile.
wait_up() {
	local exits
	exits=$(grep -c "^keepalive: containerd exited" "$dir/containerd.log" 2>/dev/null || true)
	for _ in $(seq 300); do
		[[ -S $CRI_SOCK ]] && crictl --runtime-endpoint "unix://$CRI_SOCK" --timeout 2s info >/dev/null 2>&1 && break
		[[ $(grep -c "^keepalive: containerd exited" "$dir/containerd.log" 2>/dev/null) == "${exits:-0}" ]] ||
			{ echo "$0: containerd exited:" >&2; tail -20 "$dir/containerd.log" >&2; return 1; }
		sleep 0.1
	done
	crictl --runtime-endpoint "unix://$CRI_SOCK" --timeout 2s info >/dev/null ||
		{ echo "$0: containerd's CRI plugin is not up after 30s:" >&2; tail -20 "$dir/containerd.log" >&2; return 1; }
	for _ in $(seq 100); do [[ -S $NRI_TEST_SOCK ]] && break; sleep 0.1; done
}
wait_up || exit 1

busybox=localhost/busybox:latest
"$REPO/hack/make-test-image.sh" "$dir/busybox.tar" "$busybox" >/dev/null
TEST_IMAGE_ARCHIVE=$dir/busybox.tar "$HERE/containerd-test-images.sh" "$dir/images.tar" "$busybox" >/dev/null
"$BIN/ctr" --address "$CRI_SOCK" -n k8s.io images import --no-unpack=false "$dir/images.tar" >/dev/null
cat >"$dir/image-list.toml" <<-TOML
	BusyBox = "$busybox"
	Pause = "registry.k8s.io/pause:3.10.2"
TOML

# run_tests PHASE RUN SKIP [GO_TEST_ARGS...]: the integration tests RUN but
# SKIP against the running containerd.
run_tests() {
	local phase=$1 run=$2 skip=$3 rc
	shift 3
	echo "integration.test -test.run '$run' -test.skip '$skip' against $BIN/containerd, $phase ($(readlink "$dir/config.toml"))" >&2
	set +e
	(cd "$src/integration" && $GO tool test2json -t "$out/integration.test" -test.v -test.count=1 \
		-test.run "$run" -test.skip "$skip" \
		-cri-endpoint "unix://$CRI_SOCK" -image-list "$dir/image-list.toml" -containerd-bin "$ctrd_name" "$@")
	rc=$?
	set -e
	if ((rc != 0)); then
		echo "$0: the integration tests ($phase) failed; containerd's log ends with:" >&2
		tail -40 "$dir/containerd.log" >&2
	fi
	return "$rc"
}

rc=0
run_tests "no required NRI plugins" "$IT_RUN" "$IT_SKIP" "$@" || rc=1
if [[ -n $IT_RUN_REQUIRED ]]; then
	# containerd again, with the required plugins.
	ln -sf "$dir/config-required-plugins.toml" "$dir/config.toml"
	pkill -x "$ctrd_name"
	for _ in $(seq 100); do [[ -z $(containerd_pids) ]] && break; sleep 0.1; done
	rm -f "$CRI_SOCK"
	wait_up || exit 1
	# As containerd's CI step: the tests fail, not skip, if this containerd
	# does not require their plugin.
	export NRI_REQUIRED_PLUGINS_TEST=1
	run_tests "required NRI plugins" "$IT_RUN_REQUIRED" "" "$@" || rc=1
fi
exit "$rc"
