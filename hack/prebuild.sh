#!/usr/bin/env bash
# Start, in the background and at the lowest CPU priority, the builds that
# make test needs late and that depend on nothing it builds: golangci-lint at
# the versions NRI, CRI-O and containerd pin, then the Kubernetes binaries,
# then node-problem-detector (test/k8s/build-npd.sh, ~6.5 minutes cold).
# On a 2-core machine they take ~35 minutes of CPU, and the runtime suites
# leave most of it idle while they wait for plugins, timeouts and pods; run
# in order they pushed a cold `.ci/run` past an hour.
#
# Usage: hack/prebuild.sh OWNER_PID LOG
#
# The targets that need a tool still ask for it as before (the build
# scripts' lock makes them wait for an install under way, then find it
# done; a failed background step is simply built again, in the foreground,
# where its error shows). The background stops when it is done or when
# OWNER_PID (make) exits, whichever comes first, so a failed make test
# leaves no build running. Its output goes to LOG.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)

# step runs one build; one that fails leaves the others to run.
step() {
	"$@" || echo "prebuild: $* failed; the target that needs it builds it again"
}

steps() {
	cd "$REPO"
	step bash contrib/nri/build.sh lint-tool
	step bash contrib/cri-o/build.sh lint-tool
	step bash contrib/containerd/build.sh lint-tool
	step bash test/k8s/build.sh
	step bash test/k8s/build-npd.sh
}

if [[ ${1:-} == --steps ]]; then
	steps
	exit
fi
owner=$1 log=$2
mkdir -p "$(dirname "$log")"

# A session of its own, so that `kill 0` ends the steps, their go builds
# and the watcher together.
setsid bash -c '
	nice -n 19 bash "$0" --steps &
	tail --pid="$1" -f /dev/null &
	wait -n
	echo "prebuild: ended ($(date -u +%T))"
	kill 0
' "$0" "$owner" >"$log" 2>&1 </dev/null &
echo "prebuild: golangci-lint, Kubernetes and node-problem-detector build in the background at nice 19 (log: $log)"
