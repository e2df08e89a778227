#!/usr/bin/env bash
# test/k8s/build-npd.sh (make k8s, after test/k8s/build.sh): the
# node-problem-detector of the end-to-end test,
#
#   BIN/node-problem-detector   k8s.io/node-problem-detector v1.35.2's
#                               cmd/nodeproblemdetector, CGO off, built with
#                               NPD's documented tags disable_system_log_monitor
#                               (journald, kmsg), disable_system_stats_monitor
#                               and disable_stackdriver_exporter: what remains is
#                               the custom plugin monitor, the Kubernetes
#                               exporter and the Prometheus exporter
#
# from the released module through the Go module proxy, with the stub
# go.mod in test/k8s/build/npd. A step of its own, with its own stamp
# (BIN/../npd-stamp: the Go version, NPD's version, the stub, this script),
# so that adding or changing it leaves the Kubernetes build's stamp alone.
#
# Where the module proxy does not serve k8s.io/node-problem-detector (the
# machines this project is built on answer 403 "This module version is not
# available"), nothing is built: the reason goes to OUT/npd-unavailable,
# and test/k8s runs its stand-in (test/k8s/npd-standin.bash) and says so in
# its records.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$REPO/test/k8s
OUT=$REPO/build/k8s
BIN=$OUT/bin
NPD_VERSION=v1.35.2
NPD_MODULE=k8s.io/node-problem-detector
NPD_TAGS="disable_system_log_monitor disable_system_stats_monitor disable_stackdriver_exporter"
GO=${GO:-go}
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0

mkdir -p "$OUT"
exec {lock}>"$OUT/npd-build.lock"
flock "$lock"

hash=$({
	$GO version
	echo "$NPD_VERSION $NPD_TAGS"
	cat "$0" "$HERE/build/npd/go.mod"
} | sha256sum | cut -d' ' -f1)
if [[ -f $OUT/npd-stamp && $(cat "$OUT/npd-stamp") == "$hash" && -x $BIN/node-problem-detector ]]; then
	echo "node-problem-detector $NPD_VERSION is up to date in ${BIN#"$REPO"/}"
	exit 0
fi
rm -f "$OUT/npd-stamp" "$OUT/npd-unavailable" "$BIN/node-problem-detector"
mkdir -p "$BIN"

dl=$($GO mod download -json "$NPD_MODULE@$NPD_VERSION" 2>&1) || true
err=$(jq -r '.Error // empty' <<<"$dl" 2>/dev/null) || err=$dl
if [[ -n $err ]]; then
	# The proxy's answer without its URL ("403 Forbidden server
	# response: This module version is not available.").
	err=$(tr '\n\t' '  ' <<<"$err" | sed -e 's/^.*reading [^ ]*: *//' -e 's/  */ /g')
	echo "$NPD_MODULE@$NPD_VERSION is not available from the Go module proxy: $err" >"$OUT/npd-unavailable"
	echo "node-problem-detector not built: $(cat "$OUT/npd-unavailable"); test/k8s uses its stand-in" >&2
	exit 0
fi

start=$SECONDS
rm -rf "$OUT/src/npd"
mkdir -p "$OUT/src/npd"
cp "$HERE/build/npd/go.mod" "$OUT/src/npd/"
echo "building node-problem-detector $NPD_VERSION into ${BIN#"$REPO"/}"
(cd "$OUT/src/npd" && $GO build -trimpath -tags "$NPD_TAGS" -ldflags "-s -w -X $NPD_MODULE/pkg/version.version=$NPD_VERSION" \
		-o "$BIN/node-problem-detector" "$NPD_MODULE/cmd/nodeproblemdetector")
"$BIN/node-problem-detector" --version >/dev/null
echo "$hash" >"$OUT/npd-stamp"
echo "built node-problem-detector $NPD_VERSION in $((SECONDS - start))s"
