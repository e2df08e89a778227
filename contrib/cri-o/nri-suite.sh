#!/usr/bin/env bash
# contrib/cri-o/nri-suite.sh: CRI-O's own NRI suite (test/nri of v1.36.3 with
# the series' new cases, bin/crio-nri.test from build.sh nritest) against
# patched bin/crio, three times:
#   1. no required plugins: the case which makes a plugin required by a
#      reload (RequiredPluginAddedByReloadDuringRunPodSandbox, with
#      --crio-config-dir) runs here
#   2. an absent plugin required (fail, every gated event) for the pods of
#      a namespace (namespaces = ["nrigate-production"]) which excludes the
#      suite's pods
#   3. the required plugin test/nri.bats starts CRI-O with for the
#      required-plugin cases (start_crio_with_required_plugin): the test
#      plugin required for the namespaces "required-plugin-*" (the 7
#      RequiredPlugin* tests run in them), with pods that have an infra
#      container runnable here (crio-test-config.sh's CRIO_INFRA=1)
# Runs 1 and 2 must give the result of unpatched CRI-O here plus the new
# RunPodSandboxRelayFailure, CreateContainerRelayFailure,
# PluginSyncDuringStopOfContainer, PluginSyncDuringContainerCreation,
# PluginSyncDuringContainerUpdate, PluginSyncDuringUpdateOfStoppingContainer
# and ContainerCreationFailureAfterRelay cases: 17 passed, the 7
# RequiredPlugin* cases and the 2 memset cases (a second NUMA node)
# skipped, nothing failed; run 1 also passes the reload
# case (18 passed, 9 skipped), which skips where a plugin is required
# already (run 2: 17 passed, 10 skipped). Run 3 passes the 7
# RequiredPlugin* cases: 24 passed, 3 skipped. Four cases kill CRI-O
# (--crio-restarts): as test/nri.bats does, CRI-O is started again on the
# same state whenever it exits while the suite runs.
# To repeat some cases (a flaky one under load, say): NRI_SUITE_INSTANCES
# names the instances to run (no-required-plugins,
# out-of-scope-required-plugin, required-plugin; all three by default) and
# NRI_TEST_FLAGS adds flags to the suite (-test.run=... -test.count=...);
# with NRI_TEST_FLAGS only "nothing failed" is checked.
# Each instance's suite output and CRI-O log are kept in
# $TESTLOGS/crio-nri-suite/NAME.{suite,crio}.log (TESTLOGS: make's,
# bin/test-logs by default); when an instance fails, the full output of each
# failing test is printed.
set -uo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$REPO/contrib/cri-o
BIN=${CRIO_BINDIR:-$REPO/bin}
EXPECT_PASS=${EXPECT_PASS:-18}
EXPECT_SKIP=${EXPECT_SKIP:-9}
EXPECT_PASS_OUT_OF_SCOPE=${EXPECT_PASS_OUT_OF_SCOPE:-17}
EXPECT_SKIP_OUT_OF_SCOPE=${EXPECT_SKIP_OUT_OF_SCOPE:-10}
EXPECT_PASS_REQUIRED=${EXPECT_PASS_REQUIRED:-24}
EXPECT_SKIP_REQUIRED=${EXPECT_SKIP_REQUIRED:-3}
CI_IMAGE=quay.io/crio/fedora-crio-ci:latest
PAUSE_IMAGE=registry.k8s.io/pause:3.10.1
INSTANCES=${NRI_SUITE_INSTANCES:-no-required-plugins out-of-scope-required-plugin required-plugin}
read -ra TEST_FLAGS <<<"${NRI_TEST_FLAGS:-}"
WORK=$(mktemp -d /tmp/crio-nri-suite.XXXXXX)
LOGS=${TESTLOGS:-$REPO/bin/test-logs}/crio-nri-suite
[[ $LOGS == /* ]] || LOGS=$REPO/$LOGS
rm -rf "$LOGS" && mkdir -p "$LOGS" || exit 1
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

# launch_crio DIR: CRI-O on the configuration of DIR, in the background.
launch_crio() {
	"$BIN/crio" --config "$CRIO_CONFIG" --config-dir "$CRIO_CONFIG_DIR" >>"$1/crio.log" 2>&1 &
	CRIO_PID=$!
}

# start_crio DIR: launch_crio, until CRI-O answers.
start_crio() {
	local dir=$1 i
	launch_crio "$dir"
	for i in $(seq 100); do
		crictl --timeout 2s -r "unix://$CRI_SOCK" info >/dev/null 2>&1 && return 0
		kill -0 "$CRIO_PID" 2>/dev/null || { echo "crio exited:"; tail -5 "$dir/crio.log"; return 1; }
		sleep 0.2
	done
	echo "crio did not answer in 20s"
	return 1
}

# keep_logs NAME DIR: the suite's output and CRI-O's log of an instance, in
# $LOGS.
keep_logs() {
	cp "$2/suite.log" "$LOGS/$1.suite.log" 2>/dev/null
	cp "$2/crio.log" "$LOGS/$1.crio.log" 2>/dev/null
	return 0
}

# failed_tests_output LOG: the whole output of each test that failed in the
# go test -v output LOG, from its "=== RUN" line to its "--- FAIL" line
# (a subtest's within its parent's).
failed_tests_output() {
	local t
	for t in $(sed -n 's/^--- FAIL: \([^ ]*\) .*/\1/p' "$1"); do
		echo "=== output of $t ==="
		awk -v t="$t" '$0 == "=== RUN   " t { on = 1 } on { print } on && index($0, "--- FAIL: " t " ") == 1 { exit }' "$1"
	done
}

# run NAME PASS SKIP [REQUIRED_PLUGINS_FILE]: one instance, the suite, its
# counts checked. CRIO_INFRA=1 (crio-test-config.sh) runs pods with an infra
# container, with crio-pause-image.sh's pause image.
run() {
	local name=$1 want_pass=$2 want_skip=$3 dir=$WORK/$1 out pass fail skip start suite exited restarts=0 pause
	shift 3
	eval "$(NRI_REQUEST_TIMEOUT=${REQUEST_TIMEOUT:-2s} "$HERE/crio-test-config.sh" "$dir" "$@")"
	bridge=$CRIO_CNI_BRIDGE
	pause=$WORK/ci-image.tar
	if [[ ${CRIO_INFRA:-} == 1 ]]; then
		pause=$dir/pause-image
		"$HERE/crio-pause-image.sh" "$WORK/ci-image.tar" "$pause" >"$dir/import.log" 2>&1 ||
			{ cat "$dir/import.log"; return 1; }
	fi
	{ "$HERE/crio-import-image.sh" "$dir" "$WORK/ci-image.tar" "$CI_IMAGE" &&
		"$HERE/crio-import-image.sh" "$dir" "$pause" "$PAUSE_IMAGE"; } >>"$dir/import.log" 2>&1 ||
		{ cat "$dir/import.log"; return 1; }
	start_crio "$dir" || return 1
	if [[ $# -gt 0 ]]; then
		# The required plugins are in force: the absent plugin is reported
		# not ready.
		crictl --timeout 5s -r "unix://$CRI_SOCK" info 2>/dev/null |
			jq -e '.status.conditions[] | select(.type == "NRIPluginsReady" and .status == false)' >/dev/null ||
			{ echo "$name: NRIPluginsReady=false missing from crictl info: the required plugins are not in force" >&2; return 1; }
	fi
	start=$SECONDS
	out=$dir/suite.log
	(cd "$dir" && "$BIN/crio-nri.test" --crio-socket "unix://$CRI_SOCK" --nri-socket "unix://$NRI_SOCK" \
		--cgroup-manager cgroupfs --crio-restarts --crio-config-dir "$CRIO_CONFIG_DIR" -test.v -test.count=1 "${TEST_FLAGS[@]}") >"$out" 2>&1 &
	suite=$!
	# CRI-O is started again whenever a test killed it, until the suite
	# ends; the test waits until it answers.
	while true; do
		wait -n -p exited "$CRIO_PID" "$suite"
		[[ $exited != "$suite" ]] || break
		restarts=$((restarts + 1))
		if ((restarts > 10)); then
			echo "$name: CRI-O exited more than 10 times; crio log tail:" >&2
			tail -20 "$dir/crio.log" >&2
			kill "$suite"
			wait "$suite"
			keep_logs "$name" "$dir"
			return 1
		fi
		launch_crio "$dir"
	done
	pass=$(grep -c '^--- PASS' "$out")
	fail=$(grep -c '^--- FAIL' "$out")
	skip=$(grep -c '^--- SKIP' "$out")
	line="CRI-O test/nri ($name): $((pass + fail + skip)) tests, $pass passed, $fail failed, $skip skipped"
	echo "$line in $((SECONDS - start))s (CRI-O killed and started again $restarts times)"
	# make test repeats every suite's line at the end (hack/test-summary.sh).
	[[ -z ${SUMMARY_FILE:-} ]] || echo "$line" >>"$SUMMARY_FILE"
	grep -E '^--- (PASS|FAIL|SKIP)' "$out" | sed 's/^/    /'
	cleanup
	keep_logs "$name" "$dir"
	local want="$want_pass passed, $want_skip skipped, 0 failed"
	if ((${#TEST_FLAGS[@]} > 0)); then
		want_pass=$pass want_skip=$skip want="0 failed"
	fi
	if ((pass != want_pass || skip != want_skip || fail != 0)); then
		echo "$name: expected $want (logs: $LOGS/$name.{suite,crio}.log)" >&2
		if ((fail > 0)); then
			failed_tests_output "$out" >&2
		else
			tail -40 "$out" >&2
		fi
		echo "crio log tail:" >&2
		tail -20 "$dir/crio.log" >&2
		return 1
	fi
}

cat >"$WORK/out-of-scope.conf" <<'TOML'
# A required plugin that never registers, for pods of one namespace only:
# the suite's pods are out of its scope and must see plain NRI.
[crio.nri.required_plugins."nrigate-absent"]
fail_policy = "fail"
events = ["RunPodSandbox", "CreateContainer", "UpdateContainer"]
registration_wait = "5s"
namespaces = ["nrigate-production"]
TOML

# The required plugin of test/nri.bats' start_crio_with_required_plugin.
cat >"$WORK/required-plugin.conf" <<'TOML'
[crio.nri.required_plugins."test-plugin"]
fail_policy = "fail"
events = ["RunPodSandbox", "CreateContainer", "UpdateContainer"]
registration_wait = "2s"
namespaces = ["required-plugin-*"]
TOML

# selected NAME: the instance NAME is to run.
selected() {
	[[ " $INSTANCES " == *" $1 "* ]]
}

rc=0
if selected no-required-plugins; then
	# RequiredPluginAddedByReloadDuringRunPodSandbox holds a relay across a
	# reload and the queries after it, which a loaded machine stretches
	# past 2s (test/nri.bats runs it with the same drop-in's timeout); no
	# case of this instance waits for a plugin request to time out.
	REQUEST_TIMEOUT=2m run no-required-plugins "$EXPECT_PASS" "$EXPECT_SKIP" || rc=1
fi
if selected out-of-scope-required-plugin; then
	run out-of-scope-required-plugin "$EXPECT_PASS_OUT_OF_SCOPE" "$EXPECT_SKIP_OUT_OF_SCOPE" "$WORK/out-of-scope.conf" || rc=1
fi
if selected required-plugin; then
	CRIO_INFRA=1 run required-plugin "$EXPECT_PASS_REQUIRED" "$EXPECT_SKIP_REQUIRED" "$WORK/required-plugin.conf" || rc=1
fi
if ((rc == 0 && ${#TEST_FLAGS[@]} == 0)); then
	echo "CRI-O NRI suite: no required plugins $EXPECT_PASS passed, $EXPECT_SKIP skipped; an out-of-scope required plugin $EXPECT_PASS_OUT_OF_SCOPE passed, $EXPECT_SKIP_OUT_OF_SCOPE skipped; required plugin $EXPECT_PASS_REQUIRED passed, $EXPECT_SKIP_REQUIRED skipped; 0 failed"
fi
exit $rc
