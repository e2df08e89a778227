#!/usr/bin/env bash
# test/helpers.bash: the one helpers file of the BATS suites (test/*.bats,
# contrib/cri-o/test/*.bats, contrib/containerd/test/*.bats), of hack/demo.sh
# and of test/e2e/runtime.sh (through which the Go suites and
# tools/nri-bench start a runtime). Load with `load helpers` (test/) or
# `load "$REPO_ROOT/test/helpers"`, or source it.
#
# RUNTIME selects the runtime: crio (patched CRI-O, bin/crio; the default)
# or containerd (patched containerd, bin/containerd). start_runtime writes
# that runtime's config with its config script (contrib/cri-o/crio-test-config.sh,
# contrib/containerd/containerd-test-config.sh) from ONE description of the
# required NRI plugins, a drop-in in CRI-O syntax
# ([crio.nri.required_plugins."NAME"] tables, [[...exempt]] tables,
# match_labels inline tables; [crio.nri.default_validator] where a test
# needs NRI's default validator), every path private to $TESTDIR, NRI on $TESTDIR's socket with a 1s plugin
# request timeout; it imports the test and pause images and waits for
# `crictl info`. stop_runtime tears it all down.

REPO_ROOT=${REPO_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
RUNTIME=${RUNTIME:-crio}
# RUNTIME_BINDIR (default bin/) is where the runtime binaries are;
# CRIO_BINDIR / CONTAINERD_BINDIR override it for one runtime (make parity
# with one runtime's build elsewhere).
RUNTIME_BINDIR=${RUNTIME_BINDIR:-$REPO_ROOT/bin}
case $RUNTIME in
crio) RUNTIME_BINDIR=${CRIO_BINDIR:-$RUNTIME_BINDIR} ;;
containerd) RUNTIME_BINDIR=${CONTAINERD_BINDIR:-$RUNTIME_BINDIR} ;;
esac
NRI_FAULTY_BINARY=${NRI_FAULTY_BINARY:-$REPO_ROOT/bin/nri-faulty}
# The image every container config names, and the runtimes' pause images.
TEST_IMAGE_NAME=localhost/busybox:latest
CRIO_PAUSE_IMAGE=registry.k8s.io/pause:3.10.1
CONTAINERD_PAUSE_IMAGE=registry.k8s.io/pause:3.10.2
# crictl is installed with go install (make install-deps).
command -v crictl >/dev/null || export PATH=$PATH:$(go env GOPATH 2>/dev/null)/bin

# --- Generic -----------------------------------------------------------------

# setup_tmpdir makes a short private directory in $TESTDIR (short because
# unix socket paths must stay under 108 bytes); cleanup_tmpdir removes it.
setup_tmpdir() {
	TESTDIR=$(mktemp -d /tmp/nrig.XXXXXX)
	export TESTDIR
}

cleanup_tmpdir() {
	if [[ -n ${TESTDIR:-} && -d $TESTDIR ]]; then
		rm -rf "$TESTDIR"
	fi
}

# ci_skip REASON: skip the test because a prerequisite is missing; under
# CI=true fail it instead, so that a CI run cannot pass by skipping. The
# require_* functions use it; runtime_lacks (not applicable) still skips.
ci_skip() {
	if [[ ${CI:-} == true ]]; then
		echo "CI=true, so this test may not skip: $*" >&2
		return 1
	fi
	skip "$@"
}

# require_root skips the test unless it runs as root.
require_root() {
	[[ $(id -u) -eq 0 ]] || ci_skip "needs root"
}

# require_cmd skips the test unless every named command is in PATH.
require_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null || { ci_skip "$c not installed (run make install-deps)"; return 1; }
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

# --- Prerequisites and the suites' hooks --------------------------------------

# The default hooks of the BATS suites that load this file (a suite that
# needs more defines its own and calls these): the test image once per
# file; per test, the prerequisites and a $TESTDIR; then the plugin and the
# runtime stopped and $TESTDIR removed.
if [[ -n ${BATS_TEST_FILENAME:-} ]]; then
	setup_file() { setup_test_image_file; }
	setup() {
		require_suite
		setup_tmpdir
	}
	teardown() {
		stop_notify_listener
		stop_plugins
		stop_runtime
		cleanup_tmpdir
	}
fi

# setup_test_image_file: the setup_file of the suites: hack/make-test-image.sh's
# busybox archive, built once per file into $TEST_IMAGE when busybox-static
# and jq are there (require_suite says why otherwise).
setup_test_image_file() {
	export TEST_IMAGE=$BATS_FILE_TMPDIR/busybox.tar
	if [[ -x /bin/busybox ]] && command -v jq >/dev/null; then
		"$REPO_ROOT/hack/make-test-image.sh" "$TEST_IMAGE" >/dev/null
	fi
}

# require_suite: what every test that runs $RUNTIME with real containers and
# nri-faulty needs; skips (fails under CI=true) with the reason.
require_suite() {
	require_root || return
	require_cmd crictl runc jq ip || return
	[[ -f ${TEST_IMAGE:-} ]] || { ci_skip "test image not built (needs busybox-static and jq)"; return 1; }
	[[ -x $NRI_FAULTY_BINARY ]] || { ci_skip "$NRI_FAULTY_BINARY not built (run make build)"; return 1; }
	[[ -d /usr/lib/cni ]] || { ci_skip "containernetworking-plugins not installed (run make install-deps)"; return 1; }
	local b bins
	case $RUNTIME in
	crio)
		require_cmd conmon || return
		bins="crio pinns crio-copyimg"
		;;
	containerd) bins="containerd containerd-shim-runc-v2 ctr" ;;
	*) { ci_skip "RUNTIME=$RUNTIME unknown (crio or containerd)"; return 1; } ;;
	esac
	for b in $bins; do
		[[ -x $RUNTIME_BINDIR/$b ]] || { ci_skip "RUNTIME=$RUNTIME: $RUNTIME_BINDIR/$b not built (run make $RUNTIME)"; return 1; }
	done
}

# runtime_lacks WHAT WHY: skip a test that needs something $RUNTIME does not
# have; make parity records the skip as "not applicable".
runtime_lacks() {
	skip "not applicable on RUNTIME=$RUNTIME: $1 ($2)"
}

# unquote_log [FILE]: FILE (or stdin) with logrus' \" quoting undone, so
# that a runtime's log line can be matched against the error text it quotes.
unquote_log() {
	sed 's/\\"/"/g' "$@"
}

# --- The systemd notify socket ------------------------------------------------

# start_notify_listener: bin/sdnotify on $TESTDIR/notify.sock, the
# NOTIFY_SOCKET systemd would give the runtime; every message goes to
# $TESTDIR/notify.log as "SECONDS MESSAGE". Sets NOTIFY_SOCK and NOTIFY_PID.
start_notify_listener() {
	[[ -x $REPO_ROOT/bin/sdnotify ]] || ci_skip "$REPO_ROOT/bin/sdnotify not built (run make build)"
	NOTIFY_SOCK=$TESTDIR/notify.sock
	"$REPO_ROOT/bin/sdnotify" "$NOTIFY_SOCK" >"$TESTDIR/notify.log" 2>&1 &
	NOTIFY_PID=$!
	wait_for 10 test -S "$NOTIFY_SOCK"
}

# stop_notify_listener: end start_notify_listener's bin/sdnotify, if any.
stop_notify_listener() {
	[[ -n ${NOTIFY_PID:-} ]] || return 0
	kill "$NOTIFY_PID" 2>/dev/null || true
	wait "$NOTIFY_PID" 2>/dev/null || true
	NOTIFY_PID=
}

# notified MESSAGE: the runtime sent MESSAGE (e.g. READY=1) to the listener.
notified() {
	grep -q " $1\$" "$TESTDIR/notify.log"
}

# --- Starting and stopping the runtime -----------------------------------------

# start_runtime [POLICY_TOML]: runtime_config, then runtime_start.
start_runtime() {
	runtime_config "${1:-}" && runtime_start
}

# runtime_config [POLICY_TOML]: write $RUNTIME's config for $TESTDIR with its
# config script (the policy becomes its drop-in; under make parity's
# PARITY_MODE=validator, NRI's default validator instead). Sets CRI_SOCK,
# NRI_SOCK, CRICTL_CONFIG and the script's variables (CRIO_CONFIG,
# CRIO_CONFIG_DIR, CRIO_ROOT... or CONTAINERD_CONFIG). ENABLE_NRI=false
# and use_metrics reach the scripts.
runtime_config() {
	local policy=${1:-}
	if [[ ${PARITY_MODE:-} == validator ]]; then
		# make parity's upstream column: the same scenarios with the policy
		# replaced by NRI's default validator alone.
		policy=$(policy_to_validator <<<"$policy")
	fi
	printf '%s\n' "$policy" >"$TESTDIR/policy.toml"
	case $RUNTIME in
	crio) crio_config "$TESTDIR/policy.toml" ;;
	containerd) containerd_config "$TESTDIR/policy.toml" ;;
	*) echo "RUNTIME=$RUNTIME unknown" >&2; return 1 ;;
	esac || return
	# The crictl timeout is longer than any registration_wait the suites use,
	# so refusals arrive as refusals.
	CRICTL_CONFIG=$TESTDIR/crictl.yaml
	cat >"$CRICTL_CONFIG" <<-YAML
		runtime-endpoint: unix://$CRI_SOCK
		image-endpoint: unix://$CRI_SOCK
		timeout: 30
	YAML
	export CRI_SOCK NRI_SOCK CRICTL_CONFIG
}

# crio_config POLICY_FILE: contrib/cri-o/crio-test-config.sh $TESTDIR, told
# to use $TESTDIR's sockets (whatever the caller's environment holds) and
# NRI's plugin request timeout NRI_REQUEST_TIMEOUT: the suites expect 1s,
# the default; a test that kills the runtime while a plugin holds a request
# sets 60s, so that the request is still held then.
crio_config() {
	local vars
	# Not eval "$(...)": eval of an empty output succeeds and hides a failed script.
	vars=$(CRIO_BINDIR=$RUNTIME_BINDIR CRI_SOCK=$TESTDIR/crio.sock NRI_SOCK=$TESTDIR/nri.sock \
		NRI_REQUEST_TIMEOUT=${NRI_REQUEST_TIMEOUT:-1s} PAUSE_IMAGE=$CRIO_PAUSE_IMAGE \
		CRIO_METRICS_PORT=${METRICS_PORT:-} "$REPO_ROOT/contrib/cri-o/crio-test-config.sh" "$TESTDIR" "$1" \
		2>"$TESTDIR/config-script.log") ||
		{ cat "$TESTDIR/config-script.log" >&2; return 1; }
	eval "$vars"
	CNI_BRIDGE=$CRIO_CNI_BRIDGE
}

# containerd_config POLICY_FILE: contrib/containerd/containerd-test-config.sh
# $TESTDIR/containerd (the policy written for CRI-O gets containerd's NRI
# plugin table headers), told to use $TESTDIR's NRI socket (so that it is
# where it is for CRI-O) and the request timeout NRI_REQUEST_TIMEOUT (as
# crio_config).
containerd_config() {
	local out
	out=$(NRI_SOCK=$TESTDIR/nri.sock NRI_PLUGIN_REQUEST_TIMEOUT=${NRI_REQUEST_TIMEOUT:-1s} PAUSE_IMAGE=$CONTAINERD_PAUSE_IMAGE \
		METRICS_ADDRESS=${METRICS_PORT:+127.0.0.1:$METRICS_PORT} \
		"$REPO_ROOT/contrib/containerd/containerd-test-config.sh" "$TESTDIR/containerd" "$1" 2>"$TESTDIR/config-script.log") ||
		{ cat "$TESTDIR/config-script.log" >&2; return 1; }
	CONTAINERD_CONFIG=$(sed -n 's/^CONFIG=//p' <<<"$out")
	CRI_SOCK=$(sed -n 's/^CRI_SOCK=//p' <<<"$out")
	NRI_SOCK=$(sed -n 's/^NRI_SOCK=//p' <<<"$out")
	CNI_BRIDGE=$(sed -n 's/^CNI_BRIDGE=//p' <<<"$out")
	[[ -f $CONTAINERD_CONFIG && -n $CRI_SOCK ]] ||
		{ echo "containerd-test-config.sh printed no CONFIG/CRI_SOCK: $out" >&2; return 1; }
}

# runtime_start: start $RUNTIME on the config runtime_config wrote (again
# after a stop_daemon or stop_runtime: a restart on the same state), wait
# until it answers crictl info, and import the test and pause images into
# its store the first time. Sets DAEMON_PID; the daemon appends to
# $TESTDIR/daemon.log.
runtime_start() {
	local imported=$TESTDIR/images-imported
	case $RUNTIME in
	crio)
		# CRI-O's copyimg writes the store of a stopped CRI-O.
		if [[ ! -f $imported ]]; then
			crio_import_images && touch "$imported" || return
		fi
		"$RUNTIME_BINDIR/crio" --config "$CRIO_CONFIG" --config-dir "$CRIO_CONFIG_DIR" >>"$TESTDIR/daemon.log" 2>&1 &
		;;
	containerd)
		PATH=$RUNTIME_BINDIR:$PATH "$RUNTIME_BINDIR/containerd" --config "$CONTAINERD_CONFIG" >>"$TESTDIR/daemon.log" 2>&1 &
		;;
	esac
	DAEMON_PID=$!
	wait_runtime_up 20 || return
	if [[ $RUNTIME == containerd && ! -f $imported ]]; then
		containerd_import_images && touch "$imported"
	fi
}

# crio_import_images: the test and pause images, with
# contrib/cri-o/crio-import-image.sh. Under CRIO_INFRA=1 (pods with an infra
# container, crio-test-config.sh) the pause image is crio-pause-image.sh's,
# which waits for SIGTERM; otherwise the test image.
crio_import_images() {
	local pause=$TEST_IMAGE
	if [[ ${CRIO_INFRA:-} == 1 ]]; then
		pause=$TESTDIR/pause-image
		"$REPO_ROOT/contrib/cri-o/crio-pause-image.sh" "$TEST_IMAGE" "$pause" >>"$TESTDIR/import.log" 2>&1 ||
			{ echo "crio-pause-image.sh failed:" >&2; cat "$TESTDIR/import.log" >&2; return 1; }
	fi
	CRIO_BINDIR=$RUNTIME_BINDIR "$REPO_ROOT/contrib/cri-o/crio-import-image.sh" "$TESTDIR" "$TEST_IMAGE" \
		"$TEST_IMAGE_NAME" >>"$TESTDIR/import.log" 2>&1 &&
		CRIO_BINDIR=$RUNTIME_BINDIR "$REPO_ROOT/contrib/cri-o/crio-import-image.sh" "$TESTDIR" "$pause" \
			"$CRIO_PAUSE_IMAGE" >>"$TESTDIR/import.log" 2>&1 ||
		{ echo "image import failed:" >&2; cat "$TESTDIR/import.log" >&2; return 1; }
}

# wait_runtime_up TIMEOUT: wait until the daemon answers crictl info; fail
# at once (with its log's tail) if it exits, e.g. on a bad configuration.
wait_runtime_up() {
	wait_for "$1" runtime_answers_or_exited || return
	kill -0 "$DAEMON_PID" 2>/dev/null && return
	echo "daemon exited:" >&2
	tail -5 "$TESTDIR/daemon.log" >&2
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=
	return 1
}

# runtime_answers_or_exited (for wait_for): the daemon answers crictl info,
# or it is gone and never will.
runtime_answers_or_exited() {
	crictl_q info || ! kill -0 "$DAEMON_PID" 2>/dev/null
}

# containerd_import_images: the test and pause images of
# contrib/containerd/containerd-test-images.sh (made from $TEST_IMAGE once
# per file), one ctr import.
containerd_import_images() {
	local a=${BATS_FILE_TMPDIR:-$TESTDIR}/containerd-images.tar
	if [[ ! -f $a ]]; then
		TEST_IMAGE_ARCHIVE=$TEST_IMAGE \
			"$REPO_ROOT/contrib/containerd/containerd-test-images.sh" "$a" "$TEST_IMAGE_NAME" "$CONTAINERD_PAUSE_IMAGE" \
			>>"$TESTDIR/import.log" 2>&1 ||
			{ echo "containerd-test-images.sh failed:" >&2; cat "$TESTDIR/import.log" >&2; return 1; }
	fi
	"$RUNTIME_BINDIR/ctr" --address "$CRI_SOCK" -n k8s.io images import --no-unpack=false "$a" >>"$TESTDIR/import.log" 2>&1 ||
		{ echo "ctr import failed:" >&2; cat "$TESTDIR/import.log" >&2; return 1; }
}

# stop_daemon SIGNAL: send the daemon SIGNAL and wait until it is gone
# (KILL: a crash; the containers, conmon and shims stay). DAEMON_PID need
# not be this shell's child (test/e2e/runtime.sh stop), so poll.
stop_daemon() {
	[[ -n ${DAEMON_PID:-} ]] || return 0
	kill -"$1" "$DAEMON_PID" 2>/dev/null || true
	local i
	for i in $(seq 100); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.05; done
	kill -KILL "$DAEMON_PID" 2>/dev/null || true
	wait "$DAEMON_PID" 2>/dev/null || true
	DAEMON_PID=
}

# request_in_background CMD...: CMD, a request the test means the runtime to
# crash in, in the background with its output discarded; REQUEST_PID.
request_in_background() {
	"$@" >/dev/null 2>&1 &
	REQUEST_PID=$!
}

# crash_runtime: the runtime SIGKILLed (nothing of its own shutdown runs)
# while it holds the request_in_background, which must still be running;
# the request reaped, its exit status in REQUEST_STATUS (non-zero: the
# error a crash gives its client).
crash_runtime() {
	kill -0 "$REQUEST_PID" || { echo "crash_runtime: the request ended before the crash" >&2; return 1; }
	stop_daemon KILL
	REQUEST_STATUS=0
	wait "$REQUEST_PID" || REQUEST_STATUS=$?
}

# stop_runtime: remove pods and containers through crictl while the daemon
# runs, stop it, then end whatever process, mount, runc container and
# bridge of this test it left behind.
stop_runtime() {
	[[ -n ${TESTDIR:-} && -d $TESTDIR ]] || return 0
	if [[ -n ${DAEMON_PID:-} ]]; then
		# Stop running containers without a grace period first: sleep as
		# PID 1 ignores SIGTERM, and CRI-O's forced pod removal waits ~28s.
		local c
		for c in $(crictl_cmd ps -q 2>/dev/null); do
			crictl_cmd stop -t 0 "$c" >/dev/null 2>&1 || true
		done
		crictl_cmd rmp -fa >/dev/null 2>&1 || true
		stop_daemon TERM
	fi
	local id pid runc_root
	for runc_root in "$TESTDIR/runc" "$TESTDIR/containerd/runc"; do
		[[ -d $runc_root ]] || continue
		for id in $(runc --root "$runc_root" list -q 2>/dev/null); do
			runc --root "$runc_root" kill "$id" KILL 2>/dev/null || true
			runc --root "$runc_root" delete --force "$id" 2>/dev/null || true
		done
	done
	# conmon and containerd shims outlive their daemon: end those whose
	# command line names this test's directory (they are ours).
	for pid in $(grep -lsF "$TESTDIR/" /proc/[0-9]*/cmdline | cut -d/ -f3); do
		[[ $pid != "$$" && $pid != "$BASHPID" ]] && kill -KILL "$pid" 2>/dev/null || true
	done
	awk -v d="$TESTDIR/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
	[[ -n ${CNI_BRIDGE:-} ]] && ip link delete "$CNI_BRIDGE" 2>/dev/null || true
	CNI_BRIDGE=
}

# runtime_reload: ask the runtime to reload its configuration (SIGHUP).
# RELOAD_OK_LOG and RELOAD_KEPT_LOG are the lines its log shows after a
# good policy reload and after a bad one that kept the old policy.
runtime_reload() {
	kill -HUP "$DAEMON_PID"
}
# (CRI-O's; containerd has no reload.)
RELOAD_OK_LOG=${RELOAD_OK_LOG:-Set config crio.nri.required_plugins to}
RELOAD_KEPT_LOG=${RELOAD_KEPT_LOG:-Unable to reload the required NRI plugins, keeping the ones in force}

# CREATE_LOGGED: the line the runtime logs (at info level) when a
# CreateContainer request reaches it, before any NRI call: a test that must
# know a create is in flight waits for it.
case $RUNTIME in
crio) CREATE_LOGGED="Creating container: " ;;
containerd) CREATE_LOGGED="CreateContainer within sandbox" ;;
esac

# NRI_WAIT_LOGGED: the line NRI logs (at info level) when a request starts
# to wait for a required plugin that is not ready: a test that must know a
# request waits waits for it.
NRI_WAIT_LOGGED="waits for required NRI plugin"

# policy_to_validator: the required plugins' TOML on stdin as upstream NRI's
# default validator would express it in CRI-O's config: every plugin with
# fail_policy "fail" (the default) becomes a globally required plugin
# (nri_validator_required_plugins), and an exemption's annotation becomes
# the validator's toleration annotation, which upstream honours in every
# namespace; scope, events, registration_wait, readiness, ignore and the
# exemptions' namespaces and selectors have no upstream equivalent and are
# dropped. Other tables pass through.
policy_to_validator() {
	awk '
		/^\[/ {
			flush()
			inpol = ($0 ~ /^\[\[?crio\.nri\.required_plugins/)
			inexempt = ($0 ~ /^\[\[crio\.nri\.required_plugins.*\.exempt\]\]/)
			name = ""
			if (!inexempt && $0 ~ /^\[crio\.nri\.required_plugins\./) {
				name = $0
				sub(/^\[crio\.nri\.required_plugins\./, "", name)
				sub(/\][[:space:]]*(#.*)?$/, "", name)
				gsub(/"/, "", name)
				fp = "fail"
			}
			if (!inpol) print
			next
		}
		inpol && name != "" && /^[[:space:]]*fail_policy[[:space:]]*=/ { fp = $0; sub(/^[^=]*=[[:space:]]*/, "", fp); gsub(/"/, "", fp) }
		inexempt && /^[[:space:]]*annotation[[:space:]]*=/ { tol = $0; sub(/^[^=]*=[[:space:]]*/, "", tol) }
		!inpol { print }
		function flush() { if (name != "" && fp == "fail") req = req (req == "" ? "" : ", ") "\"" name "\""; name = "" }
		END {
			flush()
			print "[crio.nri.default_validator]"
			print "nri_enable_default_validator = true"
			print "nri_validator_required_plugins = [" req "]"
			if (tol != "" && tol != "\"\"") print "nri_validator_tolerate_missing_plugins_annotation = " tol
		}
	'
}

# --- CRI-O's state (contrib/cri-o/test) -----------------------------------------

# storage_containers: the containers in CRI-O's store (ids, one a line;
# pods have one each too), from both of containers/storage's lists.
storage_containers() {
	local f
	for f in "$CRIO_ROOT"/overlay-containers/{containers,volatile-containers}.json; do
		[[ -f $f ]] && jq -r '.[].id' "$f"
	done | sort
}

# pinned_namespaces: the namespaces CRI-O pinned for pods (one a line).
pinned_namespaces() {
	find "$TESTDIR/state/ns" -mindepth 2 -type f 2>/dev/null | sort
}

# ipam_allocations: the addresses host-local allocated to pods.
ipam_allocations() {
	find "$TESTDIR/state/cni-ipam" -type f ! -name 'last_reserved_ip.*' ! -name lock 2>/dev/null | sort
}

# --- crictl ------------------------------------------------------------------

# crictl_cmd runs crictl against the test runtime.
crictl_cmd() {
	command crictl --config "$CRICTL_CONFIG" "$@"
}

# crictl_q is crictl_cmd without output (for wait_for).
crictl_q() {
	crictl_cmd "$@" >/dev/null 2>&1
}

# nri_pod_config NAME [NAMESPACE [LABELS_JSON [ANNOTATIONS_JSON]]]: write a
# pod config (pod network, own PID namespace: no infra container needed)
# with the given namespace, labels and annotations; prints its path.
nri_pod_config() {
	local name=$1 ns=${2:-default} labels=${3:-'{}'} annotations=${4:-'{}'}
	jq -n --arg n "$name" --arg ns "$ns" --arg logs "$TESTDIR/logs/$name" \
		--argjson l "$labels" --argjson a "$annotations" '{
		metadata: {name: $n, namespace: $ns, uid: ($n + "-uid"), attempt: 0},
		hostname: ($n + "-host"), log_directory: $logs, labels: $l, annotations: $a,
		linux: {security_context: {namespace_options: {network: 0, pid: 1}}}
	}' >"$TESTDIR/$name-pod.json"
	echo "$TESTDIR/$name-pod.json"
}

# ctr_config NAME CMD...: write a busybox container config running CMD;
# prints its path.
ctr_config() {
	local name=$1
	shift
	# One --arg at a time, so that arguments like -c reach jq as data.
	local cmd='[]' a
	for a in "$@"; do
		cmd=$(jq -c --arg a "$a" '. + [$a]' <<<"$cmd")
	done
	# The label is kubelet's: CRI-O names the container to NRI by it.
	jq -n --arg n "$name" --argjson cmd "$cmd" --arg img "$TEST_IMAGE_NAME" '{
		metadata: {name: $n}, labels: {"io.kubernetes.container.name": $n},
		image: {image: $img}, command: $cmd, log_path: ($n + ".log"),
		linux: {security_context: {namespace_options: {pid: 1}}}
	}' >"$TESTDIR/$name-ctr.json"
	echo "$TESTDIR/$name-ctr.json"
}

# injected_env CONTAINER_ID: start the container and print the variable the
# plugin injects (NRI_FAULTY_ACTED, the plugin's name) as the container sees it.
injected_env() {
	crictl_cmd start "$1" >/dev/null || return
	crictl_cmd exec -s "$1" sh -c 'echo "$NRI_FAULTY_ACTED"'
}

# --- The nri-faulty plugin ---------------------------------------------------

# start_plugin PIDVAR LOG NRI_FAULTY_ARGS...: start bin/nri-faulty on
# $NRI_SOCK, logging to LOG, its pid in the variable named PIDVAR, and
# return once it logged that it is synchronized with the runtime (a ready
# line LOG did not hold before: it may hold an earlier instance's). The
# one way the suites and the demo start the plugin; stop_plugins stops
# every one.
start_plugin() {
	local var=$1 log=$2 before
	shift 2
	before=$(synced_count "$log")
	"$NRI_FAULTY_BINARY" --socket "$NRI_SOCK" --log-file "$log" "$@" >/dev/null &
	printf -v "$var" '%s' "$!"
	[[ " ${PLUGIN_VARS:-} " == *" $var "* ]] || PLUGIN_VARS+=" $var"
	wait_for 10 synced_more_than "$log" "$before"
}

# synced_count LOG: how many times the plugin logging to LOG was synchronized.
synced_count() {
	local n
	n=$(grep -cs "ready (synchronized" "$1")
	echo "${n:-0}"
}

# synced_more_than LOG N (for wait_for).
synced_more_than() {
	(($(synced_count "$1") > $2))
}

# stop_plugin PIDVAR: kill the plugin whose pid is in PIDVAR and wait for it.
stop_plugin() {
	local pid=${!1:-}
	[[ -n $pid ]] || return 0
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	printf -v "$1" '%s' ""
}

# stop_plugins: stop every plugin start_plugin started.
stop_plugins() {
	local var
	for var in ${PLUGIN_VARS:-}; do
		stop_plugin "$var"
	done
}

# start_faulty [ARGS...]: nri-faulty as plugin 10-guard (ARGS add to or
# override, e.g. --mode error), logging to $TESTDIR/faulty.log; FAULTY_PID.
start_faulty() {
	start_plugin FAULTY_PID "$TESTDIR/faulty.log" --name guard --idx 10 "$@"
}

# stop_faulty: stop the plugin start_faulty started.
stop_faulty() {
	stop_plugin FAULTY_PID
}

# --- CRI Status --------------------------------------------------------------

# nri_condition TYPE: the status (true/false) of a CRI condition.
nri_condition() {
	crictl_cmd info | jq -r --arg t "$1" '.status.conditions[] | select(.type == $t) | .status'
}

# nri_condition_is TYPE VALUE (for wait_for).
nri_condition_is() {
	[ "$(nri_condition "$1")" = "$2" ]
}

# guard_ready: the runtime reports plugin guard ready in the nri entry of
# crictl info. In make parity's upstream-validator column there is no policy
# to report plugins: there start_faulty's wait for the plugin's own
# synchronization is all there is.
guard_ready() {
	[[ ${PARITY_MODE:-} == validator ]] && return 0
	crictl_cmd info | jq -e '.nri.plugins[] | select(.key == "guard" and .state == "ready")' >/dev/null 2>&1
}

# --- Metrics -----------------------------------------------------------------

# use_metrics: the next runtime_config serves $RUNTIME's metrics on a free
# port of 127.0.0.1. Sets METRICS_PORT, METRICS_URL and the names each
# runtime gives the two series of required NRI plugins: METRIC_DECISIONS
# (by event, outcome and plugin) and METRIC_PLUGIN_READY (by plugin, 1 or 0).
use_metrics() {
	require_cmd curl ss shuf || return
	METRICS_PORT=$(free_port) || { echo "no free port in 19100-19299" >&2; return 1; }
	case $RUNTIME in
	crio)
		METRICS_URL=http://127.0.0.1:$METRICS_PORT/metrics
		METRIC_DECISIONS=container_runtime_crio_nri_required_plugin_decisions_total
		METRIC_PLUGIN_READY=container_runtime_crio_nri_required_plugin_ready
		;;
	containerd)
		METRICS_URL=http://127.0.0.1:$METRICS_PORT/v1/metrics
		METRIC_DECISIONS=containerd_nri_required_plugin_decisions_total
		METRIC_PLUGIN_READY=containerd_nri_required_plugin_ready
		;;
	esac
}

# free_port: a TCP port in 19100-19299 that nothing listens on.
free_port() {
	local p
	for p in $(shuf -i 19100-19299); do
		[ -z "$(ss -Hltn "sport = :$p")" ] && { echo "$p"; return 0; }
	done
	return 1
}

# metric_value LINE_PREFIX: the value of the series whose line starts with
# LINE_PREFIX in $METRICS_URL, or nothing.
metric_value() {
	curl -sf "$METRICS_URL" | awk -v p="$1" 'index($0, p " ") == 1 { print $2 }'
}

# metric_is LINE_PREFIX VALUE (for wait_for).
metric_is() {
	[ "$(metric_value "$1")" = "$2" ]
}

# --- Parity records (make parity) --------------------------------------------
#
# With PARITY_RECORDS set to a file, every gated request the policy suite
# makes appends one JSON line: runtime, mode, test, step, outcome
# (created | refused | failed), the refusal text and the seconds it took.
# hack/parity.sh turns these into docs/parity.md.

# crictl_desc TEXT: the gRPC message of crictl's error (its last line that
# has one; crictl also logs the error once more through klog), unquoted.
crictl_desc() {
	local e
	e=$(grep 'desc = ' <<<"$1" | tail -1)
	[[ -n $e ]] || e=$(tail -1 <<<"$1")
	[[ $e == *"desc = "* ]] && e=${e#*desc = }
	e=${e//\\\"/\"}
	e=${e%\"}
	printf '%s' "$e"
}

# record_step STEP STATUS STDERR START_EPOCHREALTIME
record_step() {
	[[ -n ${PARITY_RECORDS:-} ]] || return 0
	local step=$1 st=$2 err=$3 start=$4 outcome=created
	local secs
	secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
	if ((st != 0)); then
		outcome=failed
		[[ $err == *"code = "* ]] && outcome="failed ($(sed -n 's/.*code = \([A-Za-z]*\).*/\1/p' <<<"$err" | head -1))"
		[[ $err == *"code = FailedPrecondition"* ]] && outcome=refused
	fi
	jq -cn --arg rt "$RUNTIME" --arg mode "${PARITY_MODE:-policy}" --arg t "${BATS_TEST_DESCRIPTION:-}" \
		--arg step "$step" --arg o "$outcome" --arg msg "$( ((st == 0)) || crictl_desc "$err")" --argjson s "$secs" \
		'{runtime: $rt, mode: $mode, test: $t, step: $step, outcome: $o, message: $msg, seconds: $s}' \
		>>"$PARITY_RECORDS"
}
