#!/usr/bin/env bash
# Run a test suite and print a one-line summary of how many tests ran,
# passed, failed and skipped, so that a green `make test` also says what it
# did not run.
#
# Usage:
#   hack/test-summary.sh go NAME LOG -- go test ARGS...
#       Runs `go test -json ARGS...`, shows package results, failing and
#       skipped tests as they come (and the full output of each failed test
#       at the end), keeps the JSON in LOG, and prints
#       "NAME: N tests, P passed, F failed, S skipped" (subtests count).
#       A ginkgo suite that writes its JSON report into $GINKGO_REPORT_DIR
#       (the suites' ReportAfterSuite) counts as its specs, not as the one
#       Go test that runs them; specs a focus filtered out count as skipped.
#   hack/test-summary.sh bats NAME LOG -- bats ARGS...
#       Runs `bats --tap ARGS...`, shows the TAP stream, keeps it in LOG and
#       prints the same line.
# The exit status is the suite's. With SUMMARY_FILE set, the line is also
# appended to that file (make test prints them all at the end).
set -uo pipefail

kind=${1:?usage: $0 go|bats NAME LOG -- CMD...}
name=${2:?suite name}
log=${3:?log file}
shift 3
[[ ${1:-} == -- ]] && shift
mkdir -p "$(dirname "$log")"

summary() {
	local line
	line=$(printf '%s: %d tests, %d passed, %d failed, %d skipped' "$name" "$1" "$2" "$3" "$4")
	echo "$line"
	if [[ -n ${SUMMARY_FILE:-} ]]; then
		echo "$line" >>"$SUMMARY_FILE"
	fi
}

# ginkgo_specs replaces, for each ginkgo report in $GINKGO_REPORT_DIR, the
# Go test that ran the suite with the suite's It specs, and lists the
# skipped ones with the reason (Skip's message, or not selected).
ginkgo_specs() {
	local reports=("$GINKGO_REPORT_DIR"/*.json)
	[[ -e ${reports[0]} ]] || return 0
	local counts
	counts=$(jq -rs '[.[][]] as $suites
		| [$suites[].SpecReports[] | select(.LeafNodeType == "It")] as $its
		| [($suites | map(select(.SuiteSucceeded)) | length),
		   ($suites | map(select(.SuiteSucceeded | not)) | length),
		   ($its | length),
		   ($its | map(select(.State == "passed")) | length),
		   ($its | map(select(.State | IN("passed", "skipped", "pending") | not)) | length),
		   ($its | map(select(.State | IN("skipped", "pending"))) | length)]
		| map(tostring) | join(" ")' "${reports[@]}")
	local suites_ok suites_failed specs spec_pass spec_fail spec_skip
	read -r suites_ok suites_failed specs spec_pass spec_fail spec_skip <<<"$counts"
	ran=$((ran - suites_ok - suites_failed + specs))
	pass=$((pass - suites_ok + spec_pass))
	fail=$((fail - suites_failed + spec_fail))
	skip=$((skip + spec_skip))
	if ((spec_skip > 0)); then
		echo "=== skipped ginkgo specs and why ==="
		jq -rs '[.[][] | .SuiteDescription as $s | .SpecReports[]
			| select(.LeafNodeType == "It" and (.State | IN("skipped", "pending")))
			| {s: $s, why: (if .State == "pending" then "pending"
				elif (.Failure.Message // "") == "" then "not selected (focus or skip filter)"
				else .Failure.Message end)}]
			| group_by(.s, .why)[] | "\(.[0].s): \(length) specs: \(.[0].why)"' "${reports[@]}"
	fi
}

case $kind in
go)
	# Absolute: each test binary runs in its package's directory.
	GINKGO_REPORT_DIR="$(cd "$(dirname "$log")" && pwd)/$(basename "$log").ginkgo"
	export GINKGO_REPORT_DIR
	rm -rf "$GINKGO_REPORT_DIR" && mkdir -p "$GINKGO_REPORT_DIR"
	"$@" -json >"$log.tmp" 2>&1 &
	pid=$!
	# Live view: package lines and the --- FAIL / --- SKIP lines of tests.
	tail -n +1 --pid=$pid -f "$log.tmp" 2>/dev/null |
		jq --unbuffered -rRj 'fromjson? // {Action: "output", Output: (. + "\n")}
			| select(.Action == "output")
			| select(.Test == null or (.Output | test("^\\s*--- (FAIL|SKIP)")))
			| .Output' || true
	wait $pid
	status=$?
	mv "$log.tmp" "$log"
	failed=$(jq -rR 'fromjson? | select(.Action == "fail" and .Test != null) | "\(.Package) \(.Test)"' "$log")
	if [[ -n $failed ]]; then
		echo "=== output of the failed tests ==="
		jq -rRj --arg failed "$failed" '($failed | split("\n")) as $f
			| fromjson? | select(.Action == "output" and .Test != null)
			| select(("\(.Package) \(.Test)") as $k | $f | index($k))
			| .Output' "$log"
	fi
	skipped=$(jq -rR 'fromjson? | select(.Action == "skip" and .Test != null) | "\(.Package) \(.Test)"' "$log")
	if [[ -n $skipped ]]; then
		echo "=== skipped tests and why ==="
		jq -rRj --arg skipped "$skipped" '($skipped | split("\n")) as $s
			| fromjson? | select(.Action == "output" and .Test != null)
			| select(("\(.Package) \(.Test)") as $k | $s | index($k))
			| select(.Output | test("^=== (RUN|PAUSE|CONT)") | not)
			| .Output' "$log"
	fi
	read -r ran pass fail skip < <(jq -rRs '[split("\n")[] | fromjson? | select(.Test != null and (.Action == "pass" or .Action == "fail" or .Action == "skip"))]
		| "\(length) \(map(select(.Action == "pass")) | length) \(map(select(.Action == "fail")) | length) \(map(select(.Action == "skip")) | length)"' "$log")
	ginkgo_specs
	;;
bats)
	"$@" 2>&1 | tee "$log"
	status=${PIPESTATUS[0]}
	pass=$(grep -cE '^ok [0-9]+' "$log" | head -1)
	skip=$(grep -cE '^ok [0-9]+ .* # skip' "$log" | head -1)
	fail=$(grep -cE '^not ok [0-9]+' "$log" | head -1)
	pass=$((pass - skip))
	ran=$((pass + fail + skip))
	;;
*)
	echo "$0: unknown kind $kind (go or bats)" >&2
	exit 2
	;;
esac
summary "$ran" "$pass" "$fail" "$skip"
# A suite that fails to build reports no test at all: its status says so.
exit "$status"
