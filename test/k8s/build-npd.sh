#!/usr/bin/env bash
# test/k8s/build-npd.sh (make k8s, after test/k8s/build.sh): the
# node-problem-detector of the end-to-end test,
#
#   BIN/node-problem-detector   k8s.io/node-problem-detector's
#                               cmd/nodeproblemdetector at NPD_VERSION
#                               (default v1.34.0, the newest release the Go
#                               module proxy serves here: v1.35.x and
#                               v1.34.1-3 answer 403), CGO off, built with
#                               NPD's documented tags disable_system_log_monitor
#                               (journald, kmsg), disable_system_stats_monitor
#                               and disable_stackdriver_exporter: what remains is
#                               the custom plugin monitor, the Kubernetes
#                               exporter and the Prometheus exporter
#
# from the released module through the Go module proxy, with the stub
# go.mod in test/k8s/build/npd (its require line is set to NPD_VERSION). A
# step of its own, with its own stamp (BIN/../npd-stamp: the Go version,
# NPD's version, the stub, this script), so that changing it leaves the
# Kubernetes build's stamp alone. test/k8s packs the binary into the image
# that contrib/kubernetes/npd's DaemonSet runs (make-image.sh).
#
# Where the module proxy does not serve that version, nothing is built and
# the message names the module, the version and NPD_VERSION= to try
# another: under CI=true that is a failure; otherwise the reason goes to
# OUT/npd-unavailable and the scenarios that need NPD skip, saying so.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$REPO/test/k8s
OUT=$REPO/build/k8s
BIN=$OUT/bin
NPD_VERSION=${NPD_VERSION:-v1.34.0}
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
	msg="$NPD_MODULE@$NPD_VERSION is not available from the Go module proxy ($err); list the served versions with \`go list -m -versions $NPD_MODULE\` and try another with NPD_VERSION=vX.Y.Z make k8s"
	if [[ ${CI:-} == true ]]; then
		echo "node-problem-detector not built: $msg" >&2
		exit 1
	fi
	echo "$msg" >"$OUT/npd-unavailable"
	echo "node-problem-detector not built: $msg; the test/k8s scenarios that need it skip" >&2
	exit 0
fi

start=$SECONDS
rm -rf "$OUT/src/npd"
mkdir -p "$OUT/src/npd"
cp "$HERE/build/npd/go.mod" "$OUT/src/npd/"
(cd "$OUT/src/npd" && $GO mod edit -require="$NPD_MODULE@$NPD_VERSION")
echo "building node-problem-detector $NPD_VERSION into ${BIN#"$REPO"/}"
(cd "$OUT/src/npd" && $GO build -trimpath -tags "$NPD_TAGS" -ldflags "-s -w -X $NPD_MODULE/pkg/version.version=$NPD_VERSION" \
		-o "$BIN/node-problem-detector" "$NPD_MODULE/cmd/nodeproblemdetector")
"$BIN/node-problem-detector" --version >/dev/null
echo "$hash" >"$OUT/npd-stamp"
echo "built node-problem-detector $NPD_VERSION in $((SECONDS - start))s"
