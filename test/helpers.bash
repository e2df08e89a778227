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

# require_binary skips the test when the nrigate binary was not built.
require_binary() {
	[[ -x $NRIGATE_BINARY ]] || ci_skip "$NRIGATE_BINARY not built (run make build)"
}

# require_root skips the test unless it runs as root.
require_root() {
	[[ $(id -u) -eq 0 ]] || ci_skip "needs root"
}

# require_cmd skips the test unless every named command is in PATH.
require_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null || ci_skip "$c not installed (run make install-deps)"
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
	[[ -f $TEST_IMAGE ]] || ci_skip "test image not built (needs busybox-static and jq)"
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
	wait_runtime_up 20
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
	# The label is kubelet's: CRI-O names the container to NRI by it.
	jq -n --arg n "$name" --argjson cmd "$cmd" '{
		metadata: {name: $n}, labels: {"io.kubernetes.container.name": $n},
		image: {image: "localhost/busybox:latest"},
		command: $cmd, log_path: ($n + ".log"),
		linux: {security_context: {namespace_options: {pid: 1}}}
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

# guard_ready: the plugin guard is ready in the daemon's NRI status. In
# make parity's upstream-validator column there is no policy to report
# plugins: there it is the plugin's own "synchronized" log line.
guard_ready() {
	if [[ ${PARITY_MODE:-} == validator ]]; then
		grep -q "ready (synchronized" "$TESTDIR/faulty.log" 2>/dev/null
		return
	fi
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
		linux: {security_context: {namespace_options: {network: 0, pid: 1}}}
	}' >"$TESTDIR/$name-pod.json"
	echo "$TESTDIR/$name-pod.json"
}

# --- Runtime switch (test/policy.bats, hack/demo.sh, make parity) ----------
#
# RUNTIME selects the daemon the policy suites drive: nrigate (the in-tree
# runtime, default), crio (patched CRI-O, bin/crio) or containerd (patched
# containerd, bin/containerd). start_runtime writes that runtime's config
# from ONE description of the policy, the drop-in TOML in CRI-O syntax
# ([crio.nri.policy...] tables) the suites write, with every path private
# to $TESTDIR, starts it with NRI on $TESTDIR/nri.sock and a 1s plugin
# request timeout, imports the test image (and a pause image for CRI-O and
# containerd) and waits for `crictl info`. stop_runtime tears it all down.
# RUNTIME_BINDIR (default bin/) is where the runtime binaries are.

RUNTIME=${RUNTIME:-nrigate}
RUNTIME_BINDIR=${RUNTIME_BINDIR:-$REPO_ROOT/bin}
# CRIO_BINDIR / CONTAINERD_BINDIR override it for one runtime (make parity
# with one runtime's build elsewhere).
case $RUNTIME in
crio) RUNTIME_BINDIR=${CRIO_BINDIR:-$RUNTIME_BINDIR} ;;
containerd) RUNTIME_BINDIR=${CONTAINERD_BINDIR:-$RUNTIME_BINDIR} ;;
esac
# The image every container config names, and the runtimes' pause images.
TEST_IMAGE_NAME=localhost/busybox:latest
CRIO_PAUSE_IMAGE=registry.k8s.io/pause:3.10.1
CONTAINERD_PAUSE_IMAGE=registry.k8s.io/pause:3.10.2

# require_runtime: skip (with the reason) unless $RUNTIME's binaries and
# helpers are there; sets nothing.
require_runtime() {
	case $RUNTIME in
	nrigate) require_binary && require_cmd conmon runc || return ;;
	crio)
		require_cmd conmon runc || return
		[[ -x $RUNTIME_BINDIR/crio && -x $RUNTIME_BINDIR/pinns ]] ||
			{ ci_skip "RUNTIME=crio: $RUNTIME_BINDIR/crio and pinns not built (run make crio)"; return 1; }
		[[ -x $RUNTIME_BINDIR/crio-copyimg ]] ||
			{ ci_skip "RUNTIME=crio: $RUNTIME_BINDIR/crio-copyimg (the image import tool) not built (run make crio)"; return 1; }
		[[ -d /usr/lib/cni ]] || { ci_skip "RUNTIME=crio: containernetworking-plugins not installed"; return 1; }
		;;
	containerd)
		require_cmd runc || return
		local b
		for b in containerd containerd-shim-runc-v2 ctr; do
			[[ -x $RUNTIME_BINDIR/$b ]] || { ci_skip "RUNTIME=containerd: $RUNTIME_BINDIR/$b not built (run make containerd)"; return 1; }
		done
		[[ -d /usr/lib/cni ]] || { ci_skip "RUNTIME=containerd: containernetworking-plugins not installed"; return 1; }
		;;
	*) { ci_skip "RUNTIME=$RUNTIME unknown (nrigate, crio or containerd)"; return 1; } ;;
	esac
}

# use_metrics: the next start_runtime serves $RUNTIME's metrics on a free
# port of 127.0.0.1. Sets METRICS_PORT, METRICS_URL and the names each
# runtime gives the policy's two series: METRIC_DECISIONS (by event,
# outcome and plugin) and METRIC_PLUGIN_READY (by plugin, 1 or 0).
use_metrics() {
	require_cmd curl ss shuf
	METRICS_PORT=$(free_port) || { echo "no free port in 19100-19299" >&2; return 1; }
	case $RUNTIME in
	nrigate)
		METRICS_URL=http://127.0.0.1:$METRICS_PORT/metrics
		METRIC_DECISIONS=nrigate_nri_policy_decisions_total
		METRIC_PLUGIN_READY=nrigate_nri_plugin_ready
		;;
	crio)
		METRICS_URL=http://127.0.0.1:$METRICS_PORT/metrics
		METRIC_DECISIONS=container_runtime_crio_nri_policy_decisions_total
		METRIC_PLUGIN_READY=container_runtime_crio_nri_plugin_ready
		;;
	containerd)
		METRICS_URL=http://127.0.0.1:$METRICS_PORT/v1/metrics
		METRIC_DECISIONS=containerd_nri_policy_decisions_total
		METRIC_PLUGIN_READY=containerd_nri_policy_plugin_ready
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

# runtime_lacks WHAT WHY: skip a test that needs something $RUNTIME does not
# have; make parity records the skip as "not applicable".
runtime_lacks() {
	skip "not applicable on RUNTIME=$RUNTIME: $1 ($2)"
}

# test_image_layout: the OCI layout of $TEST_IMAGE, unpacked once per file.
test_image_layout() {
	local d=${BATS_FILE_TMPDIR:-$TESTDIR}/busybox-layout
	if [[ ! -f $d/index.json ]]; then
		mkdir -p "$d"
		tar -xf "$TEST_IMAGE" -C "$d"
	fi
	echo "$d"
}

# write_crictl_config: crictl.yaml for $CRI_SOCK. The timeout is longer
# than any registration_wait the suites use, so refusals arrive as refusals.
write_crictl_config() {
	CRICTL_CONFIG=$TESTDIR/crictl.yaml
	cat >"$CRICTL_CONFIG" <<-YAML
		runtime-endpoint: unix://$CRI_SOCK
		image-endpoint: unix://$CRI_SOCK
		timeout: 30
	YAML
	export CRI_SOCK CRICTL_CONFIG
}

# start_runtime [POLICY_TOML]: see above. Sets DAEMON_PID, CRI_SOCK,
# NRI_SOCK, CRICTL_CONFIG; the daemon logs to $TESTDIR/daemon.log.
start_runtime() {
	if [[ -n ${METRICS_PORT:-} && $RUNTIME == nrigate ]]; then
		set -- "${1:-}
[crio.metrics]
enable_metrics = true
metrics_host = \"127.0.0.1\"
metrics_port = $METRICS_PORT"
	fi
	NRI_SOCK=$TESTDIR/nri.sock
	mkdir -p "$TESTDIR/nri-plugins" "$TESTDIR/nri-conf" "$TESTDIR/crio.conf.d"
	export NRI_SOCK
	printf '%s\n' "${1:-}" >"$TESTDIR/policy.toml"
	case $RUNTIME in
	nrigate)
		if [[ ${PARITY_MODE:-} == validator ]]; then
			# make parity's upstream column: the same scenarios with the
			# policy replaced by NRI's default validator alone.
			set -- "$(policy_to_validator <<<"${1:-}")"
			printf '%s\n' "$1" >"$TESTDIR/validator.toml"
		fi
		start_nrigate_nri "${1:-}" || return
		crictl_cmd pull "oci-archive:$TEST_IMAGE" >/dev/null
		;;
	crio) start_crio "$TESTDIR/policy.toml" ;;
	containerd) start_containerd "$TESTDIR/policy.toml" ;;
	*) echo "RUNTIME=$RUNTIME unknown" >&2; return 1 ;;
	esac
}

# policy_to_validator: the policy TOML on stdin as upstream NRI's default
# validator would express it: every plugin with fail_policy = "fail" becomes
# a globally required plugin (nri_validator_required_plugins), the
# toleration annotation carries over; scope, events, registration_wait,
# readiness and ignore have no upstream equivalent and are dropped. Other
# tables pass through.
policy_to_validator() {
	awk '
		/^\[/ {
			flush()
			inpol = ($0 ~ /^\[crio\.nri\.policy/)
			name = ""
			if ($0 ~ /^\[crio\.nri\.policy\.plugins\./) {
				name = $0
				sub(/^\[crio\.nri\.policy\.plugins\./, "", name)
				sub(/\][[:space:]]*(#.*)?$/, "", name)
				gsub(/"/, "", name)
				fp = "fail"
			}
			if (!inpol) print
			next
		}
		inpol && name != "" && /^[[:space:]]*fail_policy[[:space:]]*=/ { fp = $0; sub(/^[^=]*=[[:space:]]*/, "", fp); gsub(/"/, "", fp) }
		inpol && /^[[:space:]]*tolerate_missing_plugins_annotation[[:space:]]*=/ { tol = $0; sub(/^[^=]*=[[:space:]]*/, "", tol) }
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

# stop_runtime: remove pods and containers through the runtime, stop it
# and remove whatever it left (processes, mounts, namespaces, the bridge).
stop_runtime() {
	case $RUNTIME in
	nrigate) cleanup_nrigate ;;
	*) cleanup_real_runtime ;;
	esac
}

# runtime_reload: ask the runtime to reload its configuration (SIGHUP).
# RELOAD_OK_LOG and RELOAD_KEPT_LOG are the lines its log shows after a
# good policy reload and after a bad one that kept the old policy.
runtime_reload() {
	kill -HUP "$DAEMON_PID"
}
RELOAD_OK_LOG=${RELOAD_OK_LOG:-NRI policy reloaded}
RELOAD_KEPT_LOG=${RELOAD_KEPT_LOG:-keeping the old NRI policy}

# start_crio POLICY_TOML_FILE: CRI-O with the config of
# contrib/cri-o/crio-test-config.sh $TESTDIR (every path private to the
# test; the policy becomes the drop-in crio.conf.d/10-policy.conf), told
# through its environment to use the suites' sockets, the 1s request
# timeout and the pause image name; the test and pause images are imported
# with contrib/cri-o/crio-import-image.sh before the start (copyimg writes
# CRI-O's store directly).
start_crio() {
	CRI_SOCK=$TESTDIR/cri.sock
	local vars
	# Not eval "$(...)": eval of an empty output succeeds and hides a failed script.
	vars=$(CRIO_BINDIR=$RUNTIME_BINDIR CRI_SOCK=$CRI_SOCK NRI_SOCK=$NRI_SOCK NRI_REQUEST_TIMEOUT=1s \
		PAUSE_IMAGE=$CRIO_PAUSE_IMAGE CRIO_METRICS_PORT=${METRICS_PORT:-} "$REPO_ROOT/contrib/cri-o/crio-test-config.sh" "$TESTDIR" "$1" \
		2>"$TESTDIR/config-script.log") ||
		{ cat "$TESTDIR/config-script.log" >&2; return 1; }
	eval "$vars"
	CNI_BRIDGE=$CRIO_CNI_BRIDGE
	CRIO_BINDIR=$RUNTIME_BINDIR "$REPO_ROOT/contrib/cri-o/crio-import-image.sh" "$TESTDIR" "$(test_image_layout)" \
		"$TEST_IMAGE_NAME" "$CRIO_PAUSE_IMAGE" >>"$TESTDIR/import.log" 2>&1 ||
		{ echo "image import failed:" >&2; cat "$TESTDIR/import.log" >&2; return 1; }
	write_crictl_config
	"$RUNTIME_BINDIR/crio" --config "$CRIO_CONFIG" --config-dir "$CRIO_CONFIG_DIR" \
		>"$TESTDIR/daemon.log" 2>&1 &
	DAEMON_PID=$!
	wait_runtime_up 20
}

# wait_runtime_up TIMEOUT: wait until the daemon answers crictl info; fail
# at once (with its log's tail) if it exits, e.g. on a bad configuration.
wait_runtime_up() {
	local deadline=$((SECONDS + $1))
	until crictl_q info; do
		if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
			echo "daemon exited:" >&2
			tail -5 "$TESTDIR/daemon.log" >&2
			wait "$DAEMON_PID" 2>/dev/null
			DAEMON_PID=
			return 1
		fi
		if ((SECONDS >= deadline)); then
			echo "timed out after ${1}s waiting for crictl info" >&2
			return 1
		fi
		sleep 0.05
	done
}

# containerd_config POLICY_TOML_FILE: the config of
# contrib/containerd/containerd-test-config.sh $TESTDIR/containerd
# POLICY_TOML_FILE (the policy written for CRI-O gets containerd's NRI
# plugin table headers), told through its environment overrides to use the
# suites' NRI socket and plugin directories, the 1s request timeout,
# $TESTDIR/runc and a bridge that stop_runtime removes; CONTAINERD_CONFIG
# and CRI_SOCK come from its output.
containerd_config() {
	local s=$TESTDIR/containerd out
	CNI_BRIDGE=nrg$(printf %s "$TESTDIR" | md5sum | cut -c1-10)
	out=$(NRI_SOCK=$NRI_SOCK NRI_PLUGIN_DIR=$TESTDIR/nri-plugins NRI_PLUGIN_CONFIG_DIR=$TESTDIR/nri-conf \
		NRI_PLUGIN_REQUEST_TIMEOUT=1s RUNC_ROOT=$TESTDIR/runc CNI_CONF_DIR=$TESTDIR/cni CNI_BRIDGE=$CNI_BRIDGE \
		PAUSE_IMAGE=$CONTAINERD_PAUSE_IMAGE METRICS_ADDRESS=${METRICS_PORT:+127.0.0.1:$METRICS_PORT} \
		"$REPO_ROOT/contrib/containerd/containerd-test-config.sh" "$s" "$1" 2>"$TESTDIR/config-script.log") ||
		{ cat "$TESTDIR/config-script.log" >&2; return 1; }
	CONTAINERD_CONFIG=$(sed -n 's/^CONFIG=//p' <<<"$out")
	CRI_SOCK=$(sed -n 's/^CRI_SOCK=//p' <<<"$out")
	[[ -f $CONTAINERD_CONFIG && -n $CRI_SOCK ]] ||
		{ echo "containerd-test-config.sh printed no CONFIG/CRI_SOCK: $out" >&2; return 1; }
}

# toml_table_value FILE TABLE KEY: KEY's string value in [TABLE] of FILE
# (either quote style in the header).
toml_table_value() {
	awk -v t="$2" -v k="$3" '
		/^[[:space:]]*\[/ { h = $0; gsub(/[[:space:]]|\[|\]/, "", h); gsub(/\047/, "\"", h); cur = h; next }
		cur == t && $1 == k { v = $0; sub(/^[^=]*=[[:space:]]*/, "", v); gsub(/["\047]/, "", v); print v; exit }
	' "$1"
}

# start_containerd POLICY_TOML_FILE: containerd with its private config,
# then the test and pause images imported with ctr.
start_containerd() {
	containerd_config "$1" || return
	write_crictl_config
	PATH=$RUNTIME_BINDIR:$PATH "$RUNTIME_BINDIR/containerd" --config "$CONTAINERD_CONFIG" \
		>"$TESTDIR/daemon.log" 2>&1 &
	DAEMON_PID=$!
	wait_runtime_up 20 || return
	containerd_import_images
}

# containerd_images_archive: contrib/containerd/containerd-test-images.sh's
# OCI archive of the test image and a pause image (the busybox layer with a
# command that exits on TERM), made from $TEST_IMAGE once per file.
containerd_images_archive() {
	local d=${BATS_FILE_TMPDIR:-$TESTDIR}/containerd-images.tar
	if [[ ! -f $d ]]; then
		TEST_IMAGE_ARCHIVE=$TEST_IMAGE \
			"$REPO_ROOT/contrib/containerd/containerd-test-images.sh" "$d" "$TEST_IMAGE_NAME" "$CONTAINERD_PAUSE_IMAGE" \
			>>"$TESTDIR/import.log" 2>&1 ||
			{ echo "containerd-test-images.sh failed:" >&2; cat "$TESTDIR/import.log" >&2; return 1; }
	fi
	echo "$d"
}

# containerd_import_images: the test and pause images, one ctr import.
containerd_import_images() {
	local d
	d=$(containerd_images_archive) || return
	"$RUNTIME_BINDIR/ctr" --address "$CRI_SOCK" -n k8s.io images import --no-unpack=false "$d" >>"$TESTDIR/import.log" 2>&1 ||
		{ echo "ctr import failed:" >&2; cat "$TESTDIR/import.log" >&2; return 1; }
}

# cleanup_real_runtime: the teardown of CRI-O and containerd: pods through
# crictl while the daemon runs, then the daemon, then any process, mount,
# runc container and bridge of this test left behind.
cleanup_real_runtime() {
	[[ -n ${TESTDIR:-} && -d $TESTDIR ]] || return 0
	if [[ -n ${DAEMON_PID:-} ]]; then
		# Stop running containers without a grace period first: sleep as
		# PID 1 ignores SIGTERM, and CRI-O's forced pod removal waits ~28s.
		local c
		for c in $(crictl_cmd ps -q 2>/dev/null); do
			crictl_cmd stop -t 0 "$c" >/dev/null 2>&1 || true
		done
		crictl_cmd rmp -fa >/dev/null 2>&1 || true
		kill -TERM "$DAEMON_PID" 2>/dev/null || true
		local i
		for i in $(seq 100); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.05; done
		kill -KILL "$DAEMON_PID" 2>/dev/null || true
		wait "$DAEMON_PID" 2>/dev/null || true
		DAEMON_PID=
	fi
	local id pid
	if [[ -d $TESTDIR/runc ]]; then
		for id in $(runc --root "$TESTDIR/runc" list -q 2>/dev/null); do
			runc --root "$TESTDIR/runc" kill "$id" KILL 2>/dev/null || true
			runc --root "$TESTDIR/runc" delete --force "$id" 2>/dev/null || true
		done
	fi
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
