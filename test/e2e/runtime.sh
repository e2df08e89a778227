#!/usr/bin/env bash
# test/e2e/runtime.sh: start and stop a runtime for the Go suites (test/e2e)
# and tools/nri-bench (both through test/critest) with the very helpers the
# BATS suites use, so that each runtime's config exists once (test/helpers.bash).
#
#   RUNTIME=crio|containerd TEST_IMAGE=busybox.tar runtime.sh start DIR POLICY_TOML_FILE
#       starts the runtime with every path under DIR (a short path: unix
#       sockets), prints KEY=VALUE lines (CRI_SOCK, NRI_SOCK, DAEMON_PID,
#       METRICS_URL...) and keeps them in DIR/runtime.env; the daemon logs to
#       DIR/daemon.log. ENABLE_NRI=false turns NRI off; RUNTIME_METRICS=1
#       serves the runtime's metrics. Exit code 3: a prerequisite is missing.
#   runtime.sh stop DIR
#       removes pods and containers, stops the daemon and removes what it left.
set -uo pipefail
cmd=${1:?usage: runtime.sh start DIR POLICY_FILE | stop DIR}
TESTDIR=${2:?DIR}
export TESTDIR
# shellcheck source=../helpers.bash
source "$(dirname "${BASH_SOURCE[0]}")/../helpers.bash"
# require_suite skips in the suites; here a missing prerequisite is exit 3.
skip() {
	echo "runtime.sh: $*" >&2
	exit 3
}

case $cmd in
start)
	: "${TEST_IMAGE:?TEST_IMAGE (the busybox OCI archive) must be set}"
	require_suite || exit 3
	if [[ -n ${RUNTIME_METRICS:-} ]]; then
		use_metrics || exit 3
	fi
	start_runtime "$(cat "${3:-/dev/null}")" || { tail -30 "$TESTDIR/daemon.log" >&2; exit 1; }
	{
		echo "RUNTIME=$RUNTIME"
		echo "CRI_SOCK=$CRI_SOCK"
		echo "NRI_SOCK=$NRI_SOCK"
		echo "DAEMON_PID=$DAEMON_PID"
		echo "CRICTL_CONFIG=$CRICTL_CONFIG"
		echo "CNI_BRIDGE=${CNI_BRIDGE:-}"
		echo "METRICS_URL=${METRICS_URL:-}"
	} | tee "$TESTDIR/runtime.env"
	;;
stop)
	[[ -f $TESTDIR/runtime.env ]] || exit 0
	set -a
	# shellcheck disable=SC1091
	source "$TESTDIR/runtime.env"
	set +a
	stop_runtime
	;;
*)
	echo "runtime.sh: unknown command $cmd" >&2
	exit 2
	;;
esac
