#!/usr/bin/env bash
# test/e2e/runtime.sh: start and stop a runtime for the Go suites (the e2e
# restart-loop spec, cmd/nrigate-bench) with the very helpers the BATS
# suites use, so that each runtime's config exists once (test/helpers.bash).
#
#   RUNTIME=crio|containerd|nrigate TEST_IMAGE=busybox.tar runtime.sh start DIR POLICY_TOML_FILE
#       starts the runtime with every path under DIR (a short path: unix
#       sockets), prints KEY=VALUE lines (CRI_SOCK, NRI_SOCK, DAEMON_PID)
#       and keeps them in DIR/runtime.env; the daemon logs to DIR/daemon.log.
#   runtime.sh stop DIR
#       removes pods and containers, stops the daemon and removes what it left.
set -uo pipefail
REPO_ROOT=${REPO_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
export REPO_ROOT
cmd=${1:?usage: runtime.sh start DIR POLICY_FILE | stop DIR}
TESTDIR=${2:?DIR}
export TESTDIR
# shellcheck source=../helpers.bash
source "$REPO_ROOT/test/helpers.bash"
skip() {
	echo "runtime.sh: $*" >&2
	exit 3
}

case $cmd in
start)
	require_runtime || exit 3
	: "${TEST_IMAGE:?TEST_IMAGE (the busybox OCI archive) must be set}"
	start_runtime "$(cat "${3:-/dev/null}")" || { tail -30 "$TESTDIR/daemon.log" >&2; exit 1; }
	{
		echo "RUNTIME=$RUNTIME"
		echo "CRI_SOCK=$CRI_SOCK"
		echo "NRI_SOCK=$NRI_SOCK"
		echo "DAEMON_PID=$DAEMON_PID"
		echo "CRICTL_CONFIG=$CRICTL_CONFIG"
		echo "CNI_BRIDGE=${CNI_BRIDGE:-}"
	} | tee "$TESTDIR/runtime.env"
	;;
stop)
	[[ -f $TESTDIR/runtime.env ]] || exit 0
	set -a
	# shellcheck disable=SC1091
	source "$TESTDIR/runtime.env"
	set +a
	if [[ $RUNTIME == nrigate && -n $DAEMON_PID ]]; then
		# Not our child: stop_nrigate's wait returns at once; poll instead.
		crictl_cmd rmp -fa >/dev/null 2>&1 || true
		kill -TERM "$DAEMON_PID" 2>/dev/null
		for _ in $(seq 200); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.05; done
		DAEMON_PID=
	fi
	stop_runtime
	;;
*)
	echo "runtime.sh: unknown command $cmd" >&2
	exit 2
	;;
esac
