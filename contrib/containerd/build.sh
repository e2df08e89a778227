#!/usr/bin/env bash
# contrib/containerd/build.sh: containerd v2.4.2 with nrigate's patch series,
# built against the patched NRI tree (contrib/nri, make nri).
#
#   build.sh build     build/containerd/src, then bin/containerd,
#                      bin/containerd-shim-runc-v2 and bin/ctr (skipped when
#                      the stamp, a hash of every input, is unchanged)
#   build.sh check     containerd's own checks on a fresh copy with the series
#                      (build/containerd/check): git am, DCO sign-off,
#                      subjects without a trailing period, go.mod
#                      moves only the allowed modules and is what go mod
#                      tidy writes, byte for byte, the generated vendor
#                      diff touches only them, gofmt, go vet, containerd's
#                      golangci-lint configuration with the golangci-lint
#                      version its CI pins, on the packages the series touches
#   build.sh pristine  bin/containerd-v2.4.2: containerd as released, without
#                      the series (the downgrade of contrib/containerd/test)
#   build.sh unit      containerd's own unit tests of the touched packages, -race
#   build.sh integration
#                      containerd's NRI integration tests (integration/nri_test.go,
#                      the series' policy cases included) against a private
#                      bin/containerd (contrib/containerd/integration.sh)
#   build.sh edit      build/containerd/edit: a tree to change the series in
#                      (commit there, one commit per patch, then export)
#   build.sh export    the commits of build/containerd/edit as patches/
#   build.sh lint-tool the path of the golangci-lint containerd pins,
#                      installed on first use
#
# The pristine source is the released module (go mod download), which has no
# vendor/: the build tree gets it generated, as containerd's own
# `make vendor` does (go mod tidy && go mod vendor), once on the pristine
# tree (the base commit) and once on the patched tree with the replace of
# github.com/containerd/nri by build/nri/src (the NRI series). The series
# requires github.com/containerd/nri v0.13.0, the NRI release that would carry
# the plugin policy; the replace is the build's, never a patch's. Binaries and
# tests build from vendor/ (no -mod=mod).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$REPO/contrib/containerd
VERSION=${CONTAINERD_VERSION:-v2.4.2}
MOD=github.com/containerd/containerd/v2
OUT=$REPO/build/containerd
BIN=${CONTAINERD_BINDIR:-$REPO/bin}
# containerd's default build (its Makefile: BUILDTAGS empty plus
# urfave_cli_no_docs), as its releases and nodes run it: the btrfs, devmapper
# and zfs snapshotters built in (btrfs is cgo on the kernel's headers,
# linux-libc-dev, which libc6-dev brings), seccomp profiles in Go (runc
# applies them). The shim as the Makefile builds it: CGO_ENABLED=0, tag
# no_grpc.
TAGS="urfave_cli_no_docs"
SHIM_TAGS="$TAGS no_grpc"
# -trimpath: no build path in the binaries, and the Go build cache serves
# the same tree built in another directory (docs/install.md's recipe, which
# test/install.bats runs in a fresh clone).
BUILDFLAGS="-trimpath"
# The version containerd reports (containerd --version, the CRI Version call
# and so the Node's containerRuntimeVersion), linked as containerd's Makefile
# links it: version.Version is `git describe` of the release tag (v2.4.2),
# version.Package the module. Without it a module build reports
# "2.4.2+unknown". version.Revision, the tag's commit, is left empty: the
# module zip has no git metadata, and outside a checkout the Makefile has
# no commit to give either.
LDFLAGS="-X $MOD/version.Version=$VERSION -X $MOD/version.Package=$MOD"
export GOFLAGS="-buildvcs=false"
GO=${GO:-go}
# The golangci-lint containerd's CI runs (.github/workflows/ci.yml of
# v2.4.2: golangci-lint-action with version v2.14.0).
GOLANGCI_LINT_VERSION=${CONTAINERD_GOLANGCI_LINT_VERSION:-v2.14.0}

NRI_SRC=$REPO/build/nri/src
REPLACES="github.com/containerd/nri=$NRI_SRC"
# The build depends on the NRI series too (make nri builds NRI_SRC from it).
EXTRA_INPUTS="$(ls "$REPO"/contrib/nri/patches/*.patch 2>/dev/null | LC_ALL=C sort | tr '\n' ' ')"

# The modules whose require lines the series may change, and whose vendored
# copies may move: NRI itself. Anything else that moves is reported by check.
ALLOWED_MODULES="github.com/containerd/nri"

MK=containerd.mk
LABEL=containerd
# shellcheck source=../../hack/lib/upstream-series.sh
. "$REPO/hack/lib/upstream-series.sh"

# tree_base: the pristine tree's generated vendor/ (containerd's make
# vendor), the base the series' vendor diff is measured against.
tree_base() {
	[[ -z ${NO_TREE_HOOKS:-} ]] || return 0
	vendor_tree "$1" "vendor: go mod tidy && go mod vendor (generated, pristine)"
	git -C "$1" tag vendor-base
}

# tree_finish: vendor/ regenerated for the patched tree with the build-only
# replaces, as the last commit (go.mod and go.sum keep the replace
# uncommitted).
tree_finish() {
	[[ -z ${NO_TREE_HOOKS:-} ]] || return 0
	vendor_tree "$1" "vendor: go mod tidy && go mod vendor (generated, with the series and $REPLACES)" vendor
}

need_nri() {
	bash "$REPO/contrib/nri/build.sh" build >/dev/null
}

cmd_build() {
	local hash start
	need_nri
	hash=$(inputs_hash)
	if [[ -f $OUT/stamp && $(cat "$OUT/stamp") == "$hash" && -x $BIN/containerd && -x $BIN/containerd-shim-runc-v2 && -x $BIN/ctr ]]; then
		echo "containerd $VERSION (patched) is up to date in $BIN"
		return
	fi
	start=$SECONDS
	rm -f "$OUT/stamp"
	prepare "$OUT/src"
	mkdir -p "$BIN"
	echo "building containerd $VERSION with $(patches | wc -l) patches (vendor/, -mod=vendor)"
	(cd "$OUT/src" && $GO build -mod=vendor $BUILDFLAGS -ldflags "$LDFLAGS" -tags "$TAGS" -o "$BIN/" ./cmd/containerd ./cmd/ctr)
	(cd "$OUT/src" && CGO_ENABLED=0 $GO build -mod=vendor $BUILDFLAGS -ldflags "$LDFLAGS" -tags "$SHIM_TAGS" -o "$BIN/" ./cmd/containerd-shim-runc-v2)
	echo "$hash" >"$OUT/stamp"
	echo "built bin/containerd bin/containerd-shim-runc-v2 bin/ctr in $((SECONDS - start))s"
}

# cmd_pristine: bin/containerd-$VERSION, the released containerd without the
# series, which contrib/containerd/test downgrades to and upgrades from
# (build_released). The shim and ctr of the series serve both.
cmd_pristine() { build_released containerd ./cmd/containerd "$LDFLAGS"; }

# check_vendor DIR: the vendor diff of the series (the last commit, generated)
# touches only the allowed modules' directories and their lines of
# vendor/modules.txt.
check_vendor() {
	local dir=$1 bad=0 f m ok
	echo "vendor/: files the series' generated vendor commit changes"
	while read -r f; do
		[[ -n $f ]] || continue
		ok=no
		if [[ $f == vendor/modules.txt ]]; then
			ok=yes
		else
			for m in $ALLOWED_MODULES; do
				[[ $f == vendor/$m/* ]] && ok=yes
			done
		fi
		if [[ $ok == no ]]; then echo "  NOT ALLOWED  $f"; bad=1; fi
	done < <(cd "$dir" && git diff --name-only HEAD~1 HEAD)
	# modules.txt: every changed "# module version" header is an allowed one.
	while read -r m; do
		[[ -n $m ]] || continue
		if allowed "$m"; then echo "  ok  vendor/modules.txt: $m"; else echo "  NOT ALLOWED  vendor/modules.txt: $m"; bad=1; fi
	done < <(cd "$dir" && git diff HEAD~1 HEAD -- vendor/modules.txt | sed -n 's/^[-+]# \([^ ]*\) .*/\1/p' | LC_ALL=C sort -u)
	echo "  $(cd "$dir" && git diff --shortstat HEAD~1 HEAD) (vendor/$ALLOWED_MODULES and vendor/modules.txt)"
	return "$bad"
}

cmd_check() {
	local dir=$OUT/check bad=0 lint pkgs
	need_nri
	echo "applying $(patches | wc -l) patches to a fresh copy of containerd $VERSION with git am (vendor/ generated)"
	prepare "$dir"
	check_signoff || bad=1
	check_subjects || bad=1
	# go.mod as released against go.mod as the series commits it (the
	# build's replace is not committed).
	mkdir -p "$OUT/gomod/pristine" "$OUT/gomod/series"
	(cd "$dir" && git show "$(git rev-list --max-parents=0 HEAD):go.mod") >"$OUT/gomod/pristine/go.mod"
	(cd "$dir" && git show HEAD:go.mod) >"$OUT/gomod/series/go.mod"
	check_requires "$OUT/gomod/pristine" "$OUT/gomod/series" || bad=1
	check_go_mod_tidy "$dir" "$OUT/gomod/series/go.mod" || bad=1
	check_vendor "$dir" || bad=1
	check_gofmt "$dir" || bad=1
	pkgs=$(touched_packages | tr '\n' ' ')
	echo "go vet -mod=vendor -tags \"$TAGS\" $pkgs"
	(cd "$dir" && $GO vet -mod=vendor -tags "$TAGS" $pkgs) || bad=1
	lint=$(golangci_lint "$GOLANGCI_LINT_VERSION")
	echo "golangci-lint $GOLANGCI_LINT_VERSION run $pkgs (containerd's .golangci.yml, staticcheck included)"
	# --allow-serial-runners: golangci-lint's lock is the machine's; another
	# checkout's run waits instead of failing this one.
	(cd "$dir" && GOFLAGS="-mod=vendor -buildvcs=false" GOGC=75 "$lint" run --allow-serial-runners --build-tags "$TAGS" $pkgs) || bad=1
	((bad == 0)) || { echo "containerd-check failed" >&2; return 1; }
	echo "containerd-check ok"
}

# Unit tests of every package the series touches (integration/ excluded: it
# needs a running containerd, see cmd_integration), all their tests, -race.
# Extra arguments (-json from hack/test-summary.sh) go to go test.
cmd_unit() {
	local dir=$OUT/src pkgs start
	cmd_build >&2
	pkgs=$(touched_packages | grep -v '^\./integration$')
	start=$SECONDS
	echo "go test -mod=vendor -race -count=1 -tags \"$TAGS\" $* $(tr '\n' ' ' <<<"$pkgs")" >&2
	(cd "$dir" && $GO test -mod=vendor -race -count=1 -tags "$TAGS" "$@" $pkgs)
	echo "containerd unit tests of the touched packages passed in $((SECONDS - start))s" >&2
}

# The integration tests print go test's JSON (go tool test2json) already:
# a -json argument (hack/test-summary.sh) is dropped.
cmd_integration() {
	local a args=()
	for a in "$@"; do [[ $a == -json ]] || args+=("$a"); done
	cmd_build >&2
	bash "$HERE/integration.sh" "$OUT/src" "${args[@]}"
}

cmd_edit() {
	need_nri
	# The series alone: no generated vendor/ commits to export.
	NO_TREE_HOOKS=1 prepare "$OUT/edit"
	(cd "$OUT/edit" && git checkout -q go.mod go.sum)
	echo "build/containerd/edit: commit your changes there (one commit per patch, as $(git -C "$REPO" config user.name)),"
	echo "build with GOFLAGS=-mod=mod after: go mod edit -replace $REPLACES (do not commit it); then: $0 export"
}

cmd_export() {
	local dir=$OUT/edit base
	[[ -d $dir/.git ]] || { echo "no $dir: run $0 edit first" >&2; return 1; }
	base=$(cd "$dir" && git rev-list --max-parents=0 HEAD)
	if ! (cd "$dir" && git diff --quiet HEAD -- go.mod go.sum); then
		echo "$dir: go.mod or go.sum has uncommitted changes (the build's replace?): git checkout go.mod go.sum first" >&2
		return 1
	fi
	export_series "$dir" "$base"
}

case ${1:-build} in
build) cmd_build ;;
check) cmd_check ;;
unit) shift; cmd_unit "$@" ;;
pristine) cmd_pristine ;;
integration) shift; cmd_integration "$@" ;;
edit) cmd_edit ;;
export) cmd_export ;;
lint-tool) golangci_lint "$GOLANGCI_LINT_VERSION" ;;
packages) touched_packages ;;
*) echo "usage: $0 build|check|unit|integration|pristine|edit|export|packages|lint-tool" >&2; exit 2 ;;
esac
