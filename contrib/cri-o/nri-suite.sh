#!/usr/bin/env bash
# contrib/cri-o/nri-suite.sh: CRI-O's own NRI suite (test/nri of v1.36.3,
# bin/crio-nri.test from build.sh nritest) against patched bin/crio, twice:
#   1. no policy configured
#   2. a policy requiring an absent plugin (fail, every gated event) whose
#      scope (namespaces = ["nrigate-production"]) excludes the suite's pods
# Each run must give the result of unpatched CRI-O here: EXPECT_PASS passed
# (default 10), EXPECT_SKIP skipped (default 2: the memset tests need a
# second NUMA node), nothing failed.
set -uo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$REPO/contrib/cri-o
BIN=${CRIO_BINDIR:-$REPO/bin}
EXPECT_PASS=${EXPECT_PASS:-10}
EXPECT_SKIP=${EXPECT_SKIP:-2}
CI_IMAGE=quay.io/crio/fedora-crio-ci:latest
PAUSE_IMAGE=registry.k8s.io/pause:3.10.1
WORK=$(mktemp -d /tmp/crio-nri-suite.XXXXXX)
CRIO_PID=
bridge=

cleanup() {
	if [[ -n $CRIO_PID ]]; then
		kill "$CRIO_PID" 2>/dev/null
		wait "$CRIO_PID" 2>/dev/null
		CRIO_PID=
	fi
	[[ -n $bridge ]] && ip link del "$bridge" 2>/dev/null
	return 0
}
trap 'cleanup; rm -rf "$WORK"' EXIT

[[ -x $BIN/crio-nri.test && -x $BIN/crio ]] || { echo "$BIN/crio or crio-nri.test missing (make crio-nri-suite)" >&2; exit 1; }
# The suite's quay.io/crio/fedora-crio-ci:latest: the suites' busybox test
# image has every command it runs.
"$REPO/hack/make-test-image.sh" "$WORK/ci-image.tar" >/dev/null || exit 1

# run NAME [POLICY_FILE]: one instance, the suite, its counts checked.
run() {
	local name=$1 dir=$WORK/$1 out pass fail skip start
	shift
	eval "$(NRI_REQUEST_TIMEOUT=2s "$HERE/crio-test-config.sh" "$dir" "$@")"
	bridge=$CRIO_CNI_BRIDGE
	"$HERE/crio-import-image.sh" "$dir" "$WORK/ci-image.tar" "$CI_IMAGE" "$PAUSE_IMAGE" >"$dir/import.log" 2>&1 ||
		{ cat "$dir/import.log"; return 1; }
	"$BIN/crio" --config "$CRIO_CONFIG" --config-dir "$CRIO_CONFIG_DIR" >"$dir/crio.log" 2>&1 &
	CRIO_PID=$!
	local i
	for i in $(seq 100); do
		crictl --timeout 2s -r "unix://$CRI_SOCK" info >/dev/null 2>&1 && break
		kill -0 "$CRIO_PID" 2>/dev/null || { echo "crio exited:"; tail -5 "$dir/crio.log"; return 1; }
		sleep 0.2
	done
	if [[ $# -gt 0 ]]; then
		# The policy is in force: its absent plugin is reported not ready.
		crictl --timeout 5s -r "unix://$CRI_SOCK" info 2>/dev/null |
			jq -e '.status.conditions[] | select(.type == "NRIPluginsReady" and .status == false)' >/dev/null ||
			{ echo "$name: NRIPluginsReady=false missing from crictl info: the policy is not in force" >&2; return 1; }
	fi
	start=$SECONDS
	out=$dir/suite.log
	(cd "$dir" && "$BIN/crio-nri.test" --crio-socket "unix://$CRI_SOCK" --nri-socket "unix://$NRI_SOCK" \
		--cgroup-manager cgroupfs -test.v -test.count=1) >"$out" 2>&1
	pass=$(grep -c '^--- PASS' "$out")
	fail=$(grep -c '^--- FAIL' "$out")
	skip=$(grep -c '^--- SKIP' "$out")
	echo "CRI-O NRI suite ($name): $pass passed, $fail failed, $skip skipped in $((SECONDS - start))s"
	grep -E '^--- (PASS|FAIL|SKIP)' "$out" | sed 's/^/    /'
	cleanup
	if ((pass != EXPECT_PASS || skip != EXPECT_SKIP || fail != 0)); then
		echo "expected $EXPECT_PASS passed, $EXPECT_SKIP skipped, 0 failed; suite log:" >&2
		tail -40 "$out" >&2
		echo "crio log tail:" >&2
		tail -20 "$dir/crio.log" >&2
		return 1
	fi
}

cat >"$WORK/out-of-scope.conf" <<'TOML'
# A required plugin that never registers, for pods of one namespace only:
# the suite's pods are out of its scope and must see plain NRI.
[crio.nri.policy.plugins."nrigate-absent"]
fail_policy = "fail"
events = ["RunPodSandbox", "CreateContainer", "UpdateContainer"]
registration_wait = "5s"
namespaces = ["nrigate-production"]
TOML

rc=0
run no-policy || rc=1
run out-of-scope-policy "$WORK/out-of-scope.conf" || rc=1
if ((rc == 0)); then
	echo "CRI-O NRI suite: both runs $EXPECT_PASS passed, $EXPECT_SKIP skipped, 0 failed (as unpatched CRI-O v1.36.3)"
fi
exit $rc
