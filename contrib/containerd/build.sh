#!/usr/bin/env bash
# contrib/containerd/build.sh: containerd v2.4.2 with nrigate's patch series.
#
#   build.sh build   build/containerd/src, then bin/containerd,
#                    bin/containerd-shim-runc-v2 and bin/ctr (skipped when the
#                    stamp, a hash of every input, is unchanged)
#   build.sh check   the series applies cleanly to a fresh copy, go vet on the
#                    packages it touches, go.mod changes only the allowed modules
#   build.sh unit    containerd's own unit tests of the touched packages, -race
#
# The pristine source is the released module (go mod download), never a
# vendored copy; the replace of github.com/nrigate/nrigate/pkg/nripolicy
# by this checkout's pkg/nripolicy is added here, not by a patch.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$REPO/contrib/containerd
VERSION=${CONTAINERD_VERSION:-v2.4.2}
MOD=github.com/containerd/containerd/v2
POLICY_MOD=github.com/nrigate/nrigate/pkg/nripolicy
OUT=$REPO/build/containerd
BIN=${CONTAINERD_BINDIR:-$REPO/bin}
TAGS="no_btrfs no_devmapper no_zfs"
export GOFLAGS="-mod=mod -buildvcs=false"
GO=${GO:-go}

# Modules whose require lines the series may change, and whose selected
# versions may move: NRI itself and the policy module. Anything else that
# moves is reported by check.
ALLOWED_MODULES="github.com/containerd/nri $POLICY_MOD"

MK=containerd.mk
LABEL=containerd
# shellcheck source=../../hack/lib/upstream-series.sh
. "$REPO/hack/lib/upstream-series.sh"

cmd_build() {
	local hash start
	hash=$(inputs_hash)
	if [[ -f $OUT/stamp && $(cat "$OUT/stamp") == "$hash" && -x $BIN/containerd && -x $BIN/containerd-shim-runc-v2 && -x $BIN/ctr ]]; then
		echo "containerd $VERSION (patched) is up to date in $BIN"
		return
	fi
	start=$SECONDS
	rm -f "$OUT/stamp"
	prepare "$OUT/src"
	mkdir -p "$BIN"
	echo "building containerd $VERSION with $(patches | wc -l) patches"
	(cd "$OUT/src" && $GO build -tags "$TAGS" -o "$BIN/" ./cmd/containerd ./cmd/containerd-shim-runc-v2 ./cmd/ctr)
	echo "$hash" >"$OUT/stamp"
	echo "built bin/containerd bin/containerd-shim-runc-v2 bin/ctr in $((SECONDS - start))s"
}

cmd_check() {
	local dir=$OUT/check src bad=0 m
	src=$(pristine)
	echo "applying $(patches | wc -l) patches to a fresh copy of containerd $VERSION"
	prepare "$dir"
	check_requires "$src" "$dir" || bad=1
	echo "selected module versions the series moves (go list -m all)"
	local before after
	before=$(cd "$src" && GOFLAGS=-mod=mod $GO list -m all 2>/dev/null | LC_ALL=C sort) || true
	# The module cache copy is read-only: list the pristine graph from a
	# writable copy when go needs to touch go.sum.
	if [[ -z $before ]]; then
		rm -rf "$OUT/pristine" && cp -r "$src" "$OUT/pristine" && chmod -R u+w "$OUT/pristine"
		before=$(cd "$OUT/pristine" && $GO list -m all | LC_ALL=C sort)
	fi
	after=$(cd "$dir" && $GO list -m all | sed 's/ => .*//' | LC_ALL=C sort)
	# The modules linked into the binaries: a module the graph moves but no
	# binary links (a dependency's test-only requirement) is only reported.
	linked=$(cd "$dir" && $GO list -deps -tags "$TAGS" -f '{{with .Module}}{{.Path}}{{end}}' ./cmd/containerd ./cmd/containerd-shim-runc-v2 ./cmd/ctr | LC_ALL=C sort -u)
	while read -r m; do
		[[ -n $m ]] || continue
		local move="$(grep "^$m " <<<"$before" | cut -d' ' -f2) -> $(grep "^$m " <<<"$after" | cut -d' ' -f2)"
		if allowed "$m"; then echo "  ok  $m: $move"
		elif ! grep -qxF "$m" <<<"$linked"; then echo "  note  $m: $move (module graph only: no binary links it)"
		else echo "  NOT ALLOWED  $m: $move (linked into the binaries)"; bad=1; fi
	done < <(diff <(echo "$before") <(echo "$after") | sed -n 's/^[<>] \([^ ]*\).*/\1/p' | LC_ALL=C sort -u)
	local unformatted
	unformatted=$(cd "$dir" && gofmt -l $(for p in $(patches); do sed -n 's|^+++ b/\(.*\.go\)$|\1|p' "$p"; done | LC_ALL=C sort -u))
	if [[ -n $unformatted ]]; then echo "gofmt needed: $unformatted"; bad=1; else echo "gofmt: the changed Go files are formatted"; fi
	echo "go vet -tags \"$TAGS\" $(touched_packages | tr '\n' ' ')"
	(cd "$dir" && $GO vet -tags "$TAGS" $(touched_packages)) || bad=1
	((bad == 0)) || { echo "containerd-check failed" >&2; return 1; }
	echo "containerd-check ok"
}

# Unit tests of every package the series touches, all their tests, -race.
cmd_unit() {
	local dir=$OUT/src pkgs start
	cmd_build
	pkgs=$(touched_packages)
	start=$SECONDS
	echo "go test -race -count=1 -tags \"$TAGS\" $(tr '\n' ' ' <<<"$pkgs")"
	(cd "$dir" && $GO test -race -count=1 -tags "$TAGS" $pkgs)
	echo "containerd unit tests of the touched packages passed in $((SECONDS - start))s"
}

case ${1:-build} in
build) cmd_build ;;
check) cmd_check ;;
unit) cmd_unit ;;
packages) touched_packages ;;
*) echo "usage: $0 build|check|unit|packages" >&2; exit 2 ;;
esac
