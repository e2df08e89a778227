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

case $kind in
go)
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
