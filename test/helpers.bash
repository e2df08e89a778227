#!/usr/bin/env bash
# Generic helpers shared by the BATS suites. Load with `load helpers`.
# Suites that need more (a running daemon, crictl) add their helpers below
# or in their own files; keep these generic.

# Repository root and the binaries `make build` produced.
REPO_ROOT=${REPO_ROOT:-$(cd "$BATS_TEST_DIRNAME/.." && pwd)}
NRIGATE_BINARY=${NRIGATE_BINARY:-$REPO_ROOT/bin/nrigate}
FIXTURES=${FIXTURES:-$REPO_ROOT/test/fixtures}

# setup_tmpdir makes a short private directory in $TESTDIR (short because
# unix socket paths must stay under 108 bytes) and removes it on teardown
# through cleanup_tmpdir.
setup_tmpdir() {
	TESTDIR=$(mktemp -d /tmp/nrig.XXXXXX)
	export TESTDIR
}

cleanup_tmpdir() {
	if [[ -n ${TESTDIR:-} && -d $TESTDIR ]]; then
		rm -rf "$TESTDIR"
	fi
}

# require_binary skips the test when the nrigate binary was not built.
require_binary() {
	[[ -x $NRIGATE_BINARY ]] || skip "$NRIGATE_BINARY not built (run make build)"
}

# require_root skips the test unless it runs as root.
require_root() {
	[[ $(id -u) -eq 0 ]] || skip "needs root"
}

# require_cmd skips the test unless every named command is in PATH.
require_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null || skip "$c not installed (run make install-deps)"
	done
}

# wait_for TIMEOUT_SECONDS CMD...: retry CMD every 50 ms until it succeeds;
# fail after the timeout.
wait_for() {
	local timeout=$1
	shift
	local deadline=$((SECONDS + timeout))
	until "$@"; do
		if ((SECONDS >= deadline)); then
			echo "timed out after ${timeout}s waiting for: $*" >&2
			return 1
		fi
		sleep 0.05
	done
}

# assert_contains HAYSTACK NEEDLE: fail, showing both, unless HAYSTACK
# contains NEEDLE.
assert_contains() {
	if [[ $1 != *"$2"* ]]; then
		printf 'expected to find:\n  %s\nin:\n%s\n' "$2" "$1" >&2
		return 1
	fi
}

# assert_not_contains HAYSTACK NEEDLE
assert_not_contains() {
	if [[ $1 == *"$2"* ]]; then
		printf 'did not expect:\n  %s\nin:\n%s\n' "$2" "$1" >&2
		return 1
	fi
}

# toml_value FILE KEY: the value of KEY (first match, as written) in a
# file printed by `nrigate config`, within the table given as $3 if set.
toml_value() {
	local file=$1 key=$2 table=${3:-}
	awk -v key="$key" -v table="$table" '
		/^\[/ { cur = substr($0, 2, length($0) - 2); next }
		table != "" && cur != table { next }
		index($0, key " = ") == 1 { print substr($0, length(key) + 4); exit }
	' "$file"
}

# --- CRI daemon helpers (test/cri.bats) ---------------------------------

# build_test_image ARCHIVE: the busybox OCI archive of hack/make-test-image.sh.
build_test_image() {
	"$REPO_ROOT/hack/make-test-image.sh" "$1" >/dev/null
}

# setup_test_image_file: the setup_file of the daemon suites. Puts crictl
# (installed with go install) on PATH and builds the test image once per
# file into $TEST_IMAGE, when busybox-static and jq are there to build it;
# the suites' setup skips with a reason otherwise.
setup_test_image_file() {
	export PATH=$PATH:$(go env GOPATH 2>/dev/null)/bin
	export TEST_IMAGE=$BATS_FILE_TMPDIR/busybox.tar
	if [[ -x /bin/busybox ]] && command -v jq >/dev/null; then
		build_test_image "$TEST_IMAGE"
	fi
}

# require_daemon_suite: the preconditions of every test that runs the
# daemon with real containers; skips with the reason when one is missing.
require_daemon_suite() {
	require_binary
	require_root
	require_cmd crictl runc conmon jq ip
	[[ -f $TEST_IMAGE ]] || skip "test image not built (needs busybox-static and jq)"
}

# start_nrigate [TOML]: write a main config and a drop-in (extra TOML from
# $1) pointing every socket and directory into $TESTDIR, start the daemon
# and wait until `crictl info` answers. Sets DAEMON_PID, CRI_SOCK and
# CRICTL_CONFIG; logs go to $TESTDIR/daemon.log.
start_nrigate() {
	CRI_SOCK=$TESTDIR/cri.sock
	mkdir -p "$TESTDIR/crio.conf.d"
	cat >"$TESTDIR/crio.conf" <<-TOML
		[crio]
		root = "$TESTDIR/root"
		runroot = "$TESTDIR/run"
		[crio.api]
		listen = "$CRI_SOCK"
		[crio.nri]
		enable_nri = false
	TOML
	cat >"$TESTDIR/crio.conf.d/10-test.conf" <<-TOML
		[crio.runtime]
		log_level = "debug"
		[crio.runtime.runtimes.runc]
		runtime_root = "$TESTDIR/runc"
		${1:-}
	TOML
	CRICTL_CONFIG=$TESTDIR/crictl.yaml
	cat >"$CRICTL_CONFIG" <<-YAML
		runtime-endpoint: unix://$CRI_SOCK
		image-endpoint: unix://$CRI_SOCK
		timeout: 30
	YAML
	export CRI_SOCK CRICTL_CONFIG
	"$NRIGATE_BINARY" -c "$TESTDIR/crio.conf" -d "$TESTDIR/crio.conf.d" 2>"$TESTDIR/daemon.log" &
	DAEMON_PID=$!
	wait_for 20 crictl_q info
}

# crictl runs crictl against the test daemon.
crictl_cmd() {
	command crictl --config "$CRICTL_CONFIG" "$@"
}

# crictl_q is crictl_cmd without output (for wait_for).
crictl_q() {
	crictl_cmd "$@" >/dev/null 2>&1
}

# stop_nrigate SIGNAL: stop the daemon (containers keep running) and wait.
stop_nrigate() {
	if [[ -n ${DAEMON_PID:-} ]]; then
		kill -"${1:-TERM}" "$DAEMON_PID" 2>/dev/null || true
		wait "$DAEMON_PID" 2>/dev/null || true
		DAEMON_PID=
	fi
}

# cleanup_nrigate removes everything a test left: pods and containers
# through the daemon while it runs, then, with the daemon gone, any runc
# container, mount and pod network namespace under $TESTDIR.
cleanup_nrigate() {
	[[ -n ${TESTDIR:-} && -d $TESTDIR ]] || return 0
	if [[ -n ${DAEMON_PID:-} ]]; then
		crictl_cmd rmp -fa >/dev/null 2>&1 || true
		stop_nrigate TERM
	fi
	local id
	if [[ -d $TESTDIR/runc ]]; then
		for id in $(runc --root "$TESTDIR/runc" list -q 2>/dev/null); do
			runc --root "$TESTDIR/runc" kill "$id" KILL 2>/dev/null || true
			runc --root "$TESTDIR/runc" delete --force "$id" 2>/dev/null || true
		done
	fi
	for f in "$TESTDIR"/run/nrigate/records/pod-*.json; do
		[[ -e $f ]] || continue
		id=${f##*/pod-}
		id=${id%.json}
		ip netns delete "nrigate-${id:0:12}" 2>/dev/null || true
	done
	# Unmount deepest first: container root filesystems, then the driver home.
	awk -v d="$TESTDIR/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
}

# pod_config NAME [HOSTNET]: write a pod sandbox config to $TESTDIR/NAME-pod.json.
pod_config() {
	local name=$1 net=POD
	[[ ${2:-} == hostnet ]] && net=NODE
	jq -n --arg n "$name" --arg logs "$TESTDIR/logs/$name" --arg net "$net" '{
		metadata: {name: $n, namespace: "nrigate-test", uid: ($n + "-uid"), attempt: 0},
		hostname: ($n + "-host"), log_directory: $logs,
		linux: {security_context: {namespace_options: {network: (if $net == "NODE" then 2 else 0 end)}}}
	}' >"$TESTDIR/$name-pod.json"
	echo "$TESTDIR/$name-pod.json"
}

# ctr_config NAME CMD...: write a busybox container config running CMD.
ctr_config() {
	local name=$1
	shift
	# One --arg at a time, so that arguments like -c reach jq as data.
	local cmd='[]' a
	for a in "$@"; do
		cmd=$(jq -c --arg a "$a" '. + [$a]' <<<"$cmd")
	done
	jq -n --arg n "$name" --argjson cmd "$cmd" '{
		metadata: {name: $n}, image: {image: "localhost/busybox:latest"},
		command: $cmd, log_path: ($n + ".log"), linux: {}
	}' >"$TESTDIR/$name-ctr.json"
	echo "$TESTDIR/$name-ctr.json"
}

# --- NRI policy helpers (test/policy.bats) --------------------------------

NRI_FAULTY_BINARY=${NRI_FAULTY_BINARY:-$REPO_ROOT/bin/nri-faulty}

# start_nrigate_nri [TOML]: start the daemon with NRI enabled on
# $TESTDIR/nri.sock, a 1s plugin request timeout and extra TOML from $1
# (policy tables). Sets NRI_SOCK.
start_nrigate_nri() {
	NRI_SOCK=$TESTDIR/nri.sock
	mkdir -p "$TESTDIR/nri-plugins" "$TESTDIR/nri-conf"
	export NRI_SOCK
	start_nrigate "[crio.nri]
enable_nri = true
nri_listen = \"$NRI_SOCK\"
nri_plugin_dir = \"$TESTDIR/nri-plugins\"
nri_plugin_config_dir = \"$TESTDIR/nri-conf\"
nri_plugin_request_timeout = \"1s\"
${1:-}"
}

# start_faulty [ARGS...]: start bin/nri-faulty as plugin 10-guard on the
# test NRI socket (ARGS override, e.g. --mode error). Sets FAULTY_PID.
start_faulty() {
	"$NRI_FAULTY_BINARY" --name guard --idx 10 --socket "$NRI_SOCK" \
		--log-file "$TESTDIR/faulty.log" "$@" &
	FAULTY_PID=$!
}

# stop_faulty: kill the plugin started by start_faulty and wait for it.
stop_faulty() {
	if [[ -n ${FAULTY_PID:-} ]]; then
		kill -KILL "$FAULTY_PID" 2>/dev/null || true
		wait "$FAULTY_PID" 2>/dev/null || true
		FAULTY_PID=
	fi
}

# nri_condition TYPE: the status (true/false) of a CRI condition.
nri_condition() {
	crictl_cmd info | jq -r --arg t "$1" '.status.conditions[] | select(.type == $t) | .status'
}

# nri_condition_is TYPE VALUE (for wait_for).
nri_condition_is() {
	[ "$(nri_condition "$1")" = "$2" ]
}

# guard_ready: the plugin guard is ready in the daemon's NRI status.
guard_ready() {
	crictl_cmd info | jq -e '.nri.plugins[] | select(.key == "guard" and .state == "ready")' >/dev/null 2>&1
}

# nri_pod_config NAME [NAMESPACE [LABELS_JSON [ANNOTATIONS_JSON]]]: write a
# pod config with the given namespace, labels and annotations.
nri_pod_config() {
	local name=$1 ns=${2:-default} labels=${3:-'{}'} annotations=${4:-'{}'}
	jq -n --arg n "$name" --arg ns "$ns" --arg logs "$TESTDIR/logs/$name" \
		--argjson l "$labels" --argjson a "$annotations" '{
		metadata: {name: $n, namespace: $ns, uid: ($n + "-uid"), attempt: 0},
		hostname: ($n + "-host"), log_directory: $logs, labels: $l, annotations: $a,
		linux: {security_context: {namespace_options: {network: 0}}}
	}' >"$TESTDIR/$name-pod.json"
	echo "$TESTDIR/$name-pod.json"
}
