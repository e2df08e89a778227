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

patches() { ls "$HERE"/patches/*.patch 2>/dev/null | sort; }

# inputs_hash: the series, the build recipe and the policy module's sources.
inputs_hash() {
	{
		echo "$VERSION $TAGS"
		cat "$HERE/containerd.mk" "$HERE/build.sh"
		for p in $(patches); do cat "$p"; done
		(cd "$REPO/pkg/nripolicy" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) ! -name '*_test.go' | LC_ALL=C sort | xargs sha256sum)
	} | sha256sum | cut -d' ' -f1
}

# pristine: the released module's directory in the module cache.
pristine() {
	local dir
	dir=$(cd /tmp && GOFLAGS= $GO mod download -json "$MOD@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[[ -d $dir ]] || { echo "go mod download $MOD@$VERSION gave no directory" >&2; return 1; }
	echo "$dir"
}

# prepare DIR: a fresh copy of the pristine tree with the series applied
# and the replace added.
prepare() {
	local dst=$1 src p
	src=$(pristine)
	rm -rf "$dst"
	mkdir -p "$(dirname "$dst")"
	cp -r "$src" "$dst"
	chmod -R u+w "$dst"
	# A repository of its own: git apply inside this checkout's work tree
	# would take paths relative to it and silently skip the patches.
	(cd "$dst" && git init -q && git add -A && git -c user.name=build -c user.email=build@localhost commit -q -m "containerd $VERSION")
	for p in $(patches); do
		(cd "$dst" && git apply --check "$p" && git apply "$p") ||
			{ echo "patch $(basename "$p") does not apply to containerd $VERSION" >&2; return 1; }
	done
	(cd "$dst" && git diff --quiet) && { echo "the patch series changed nothing" >&2; return 1; }
	(cd "$dst" && $GO mod edit -replace "$POLICY_MOD=$REPO/pkg/nripolicy")
}

# touched_packages: the Go packages the series changes (./dir form).
touched_packages() {
	local p
	for p in $(patches); do sed -n 's|^+++ b/\(.*\.go\)$|\1|p' "$p"; done |
		xargs -r -n1 dirname | LC_ALL=C sort -u | sed 's|^|./|'
}

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

# require_lines GO.MOD: "module version" of every require line.
require_lines() {
	awk '/^require \(/{r=1; next} r && /^\)/{r=0; next} r {print $1, $2} /^require [^(]/{print $2, $3}' "$1" | LC_ALL=C sort
}

allowed() {
	local m
	for m in $ALLOWED_MODULES; do [[ $1 == "$m" ]] && return 0; done
	return 1
}

cmd_check() {
	local dir=$OUT/check src bad=0 m
	src=$(pristine)
	echo "applying $(patches | wc -l) patches to a fresh copy of containerd $VERSION"
	prepare "$dir"
	echo "go.mod: require lines the series changes"
	while read -r m; do
		[[ -n $m ]] || continue
		if allowed "$m"; then echo "  ok  $m"; else echo "  NOT ALLOWED  $m"; bad=1; fi
	done < <(diff <(require_lines "$src/go.mod") <(require_lines "$dir/go.mod") |
		sed -n 's/^[<>] \([^ ]*\) .*/\1/p' | LC_ALL=C sort -u)
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
