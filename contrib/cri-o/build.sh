#!/usr/bin/env bash
# contrib/cri-o/build.sh: CRI-O v1.36.3 with nrigate's patch series, built
# against the patched NRI tree (contrib/nri, build/nri/src).
#
#   build.sh build   build/cri-o/src, then bin/crio, bin/pinns and
#                    bin/crio-copyimg (CRI-O's test/copyimg, the image import
#                    helper of the suites); skipped when the stamp, a hash of
#                    every input, is unchanged
#   build.sh check   CRI-O's own checks on a fresh copy with the series: DCO,
#                    subjects without a trailing period,
#                    go.mod moves only the allowed modules and is what go mod
#                    tidy writes, byte for byte, the
#                    vendor diff touches only those modules, gofmt, go vet,
#                    CRI-O's golangci-lint configuration with the version CRI-O
#                    pins, its docs validation, generated docs and completions
#                    up to date, log lines capitalized, every test/nri case
#                    listed in test/nri.bats
#   build.sh unit    CRI-O's own unit tests of the touched packages, -race
#                    (server/ without it: it races upstream, see below)
#   build.sh nritest bin/crio-nri.test: CRI-O's own NRI suite (test/nri)
#   build.sh pristine bin/crio-v1.36.3: CRI-O as released, without the
#                    series (the downgrade of contrib/cri-o/test/crio-restore.bats)
#   build.sh bench   bin/crio-bench/: the series plus contrib/cri-o/bench's
#                    benchmark knobs (tools/nri-bench -barrier), never part
#                    of the series
#   build.sh edit    build/cri-o/edit: a tree to change the series in (commit
#                    there, one commit per patch, then export)
#   build.sh export  the commits of build/cri-o/edit as contrib/cri-o/patches
#   build.sh lint-tool the path of the golangci-lint CRI-O pins, installed on
#                    first use
#
# Every tree is a git repository of its own: the released module (go mod
# download; the module zip has no vendor/), then a commit with the vendor/
# directory `go mod tidy && go mod vendor` generates (as CRI-O's repository
# carries it), then one commit per patch (git am), then, for the build only,
# the replace of github.com/containerd/nri by build/nri/src and `go mod tidy
# && go mod vendor` again. The series itself requires github.com/containerd/nri
# v0.13.0, the NRI release that would carry required plugins: vendor/ and
# the replace are never part of a patch. Everything builds with -mod=vendor.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$REPO/contrib/cri-o
VERSION=${CRIO_VERSION:-v1.36.3}
MOD=github.com/cri-o/cri-o
OUT=$REPO/build/cri-o
BIN=${CRIO_BINDIR:-$REPO/bin}
# The tags CRI-O's release builds use (nix/derivation.nix of v1.36.3:
# seccomp apparmor selinux exclude_graphdriver_btrfs, there with static
# linking and gpgme), as nodes run it: seccomp needs libseccomp-dev and
# pkg-config (make install-deps) and links libseccomp.so.2; without the tag
# CRI-O builds fine with seccomp silently off (`crio version`:
# SeccompEnabled false). apparmor and selinux are pure Go (on a host with
# AppArmor, CRI-O loads its default profile, as packaged CRI-O does).
# containers_image_openpgp: Go's OpenPGP for signature checks instead of
# gpgme (what CRI-O's Makefile picks where gpgme-config is installed; no
# libgpgme at run time). btrfs is excluded as in the release (it would need
# libbtrfs-dev).
TAGS="seccomp apparmor selinux exclude_graphdriver_btrfs containers_image_openpgp"
# The binaries build with -trimpath, as CRI-O's Makefile builds them
# (TRIMPATH ?= -trimpath): no build path in them, and the Go build cache
# serves the same tree built in another directory (docs/install.md's
# recipe, which test/install.bats runs in a fresh clone).
BUILDFLAGS="-trimpath"
# CRI-O's unit tests build with the "test" tag (its test injection files).
TESTTAGS="test $TAGS"
export GOFLAGS="-mod=vendor -buildvcs=false"
GO=${GO:-go}
# The golangci-lint CRI-O pins (Makefile GOLANGCI_LINT_VERSION and
# .github/workflows/verify.yml of v1.36.3).
GOLANGCI_LINT_VERSION=${CRIO_GOLANGCI_LINT_VERSION:-v2.10.1}

NRI_SRC=$REPO/build/nri/src
REPLACES="github.com/containerd/nri=$NRI_SRC"
# The NRI tree is built from these: a changed NRI patch rebuilds CRI-O.
EXTRA_INPUTS="$(ls "$REPO"/contrib/nri/patches/*.patch) $REPO/contrib/nri/build.sh"

# Modules whose require lines (and vendor/ directories) the series may
# change: NRI, and what NRI itself requires at higher minimums than CRI-O
# (minimal version selection moves them with it; testify v1.12.1 no longer
# requires go-difflib, which leaves go.mod and vendor/).
ALLOWED_MODULES="github.com/containerd/nri github.com/stretchr/testify github.com/tetratelabs/wazero go.yaml.in/yaml/v3 github.com/pmezard/go-difflib"

MK=crio.mk
LABEL=CRI-O
# shellcheck source=../../hack/lib/upstream-series.sh
. "$REPO/hack/lib/upstream-series.sh"

# tree_base: the vendor/ directory of the pristine tree, the base the
# vendor diff of the series is measured against.
tree_base() {
	vendor_tree "$1" "vendor: go mod tidy && go mod vendor (generated, as CRI-O's repository carries it)"
	git -C "$1" tag vendor-base
}

# tree_finish: the build-only replace (add_replaces left it uncommitted)
# and the vendor/ directory of the patched tree.
tree_finish() {
	[[ -z ${NO_TREE_FINISH:-} ]] || return 0
	vendor_tree "$1" "build: github.com/containerd/nri from build/nri/src, go mod tidy && go mod vendor (generated, build only)"
	git -C "$1" tag vendor-series
}

nri_tree() {
	bash "$REPO/contrib/nri/build.sh" build
}

cmd_build() {
	local hash start
	nri_tree
	hash=$(inputs_hash)
	if [[ -f $OUT/stamp && $(cat "$OUT/stamp") == "$hash" && -x $BIN/crio && -x $BIN/pinns && -x $BIN/crio-copyimg ]]; then
		echo "CRI-O $VERSION (patched) is up to date in $BIN"
		return
	fi
	start=$SECONDS
	rm -f "$OUT/stamp"
	prepare "$OUT/src"
	mkdir -p "$BIN"
	echo "building CRI-O $VERSION with $(patches | wc -l) patches (-mod=vendor)"
	(cd "$OUT/src" && $GO build $BUILDFLAGS -tags "$TAGS" -o "$BIN/crio" ./cmd/crio)
	(cd "$OUT/src" && $GO build $BUILDFLAGS -tags "$TAGS" -o "$BIN/crio-copyimg" ./test/copyimg)
	make -s -C "$OUT/src/pinns" >/dev/null
	cp "$OUT/src/bin/pinns" "$BIN/pinns"
	echo "$hash" >"$OUT/stamp"
	echo "built bin/crio bin/pinns bin/crio-copyimg in $((SECONDS - start))s"
}

# cmd_bench: bin/crio-bench/crio, pinns and crio-copyimg: CRI-O with the
# series and then contrib/cri-o/bench's patch, the knobs of tools/nri-bench
# -barrier (an injected per-create delay before the relay, and the block of
# plugin synchronization around the whole create instead of around the
# relay). Never part of the series; build/cri-o/bench is its tree.
cmd_bench() {
	local hash bin=$BIN/crio-bench start
	nri_tree
	# The benchmark's patches come after the series.
	patches() {
		ls "$HERE"/patches/*.patch | LC_ALL=C sort
		ls "$HERE"/bench/*.patch | LC_ALL=C sort
	}
	hash=$(inputs_hash)
	if [[ -f $OUT/bench.stamp && $(cat "$OUT/bench.stamp") == "$hash" && -x $bin/crio && -x $bin/pinns && -x $bin/crio-copyimg ]]; then
		echo "CRI-O $VERSION (patched, benchmark knobs) is up to date in $bin"
		return
	fi
	start=$SECONDS
	rm -f "$OUT/bench.stamp"
	prepare "$OUT/bench"
	mkdir -p "$bin"
	(cd "$OUT/bench" && $GO build $BUILDFLAGS -tags "$TAGS" -o "$bin/crio" ./cmd/crio)
	(cd "$OUT/bench" && $GO build $BUILDFLAGS -tags "$TAGS" -o "$bin/crio-copyimg" ./test/copyimg)
	make -s -C "$OUT/bench/pinns" >/dev/null
	cp "$OUT/bench/bin/pinns" "$bin/pinns"
	echo "$hash" >"$OUT/bench.stamp"
	echo "built $bin/crio (benchmark knobs) in $((SECONDS - start))s"
}

# cmd_pristine: bin/crio-$VERSION, the released CRI-O without the series,
# which the restore tests downgrade to and upgrade from (build_released).
cmd_pristine() { build_released crio ./cmd/crio; }

cmd_nritest() {
	cmd_build
	(cd "$OUT/src" && $GO test -c -tags "$TAGS" -o "$BIN/crio-nri.test" ./test/nri)
	echo "built bin/crio-nri.test"
}

# module_of PATH MODULES_TXT: the module a vendor/ path belongs to (the
# longest module path that prefixes it).
vendored_modules() { # MODULES_TXT: module paths, one a line
	awk '/^# / {print $2}' "$1"
}

# check_vendor DIR: the vendor diff between the pristine tree's and the
# patched tree's generated vendor/ touches only ALLOWED_MODULES.
check_vendor() {
	local dir=$1 files mods m bad=0
	files=$(git -C "$dir" diff --name-only vendor-base vendor-series -- vendor/ | grep -v '^vendor/modules.txt$' || true)
	mods=$(
		{
			git -C "$dir" show vendor-base:vendor/modules.txt | awk '/^# / {print $2}'
			git -C "$dir" show vendor-series:vendor/modules.txt | awk '/^# / {print $2}'
		} | LC_ALL=C sort -u
	)
	{
		# Files: the longest vendored module path that prefixes them.
		for f in $files; do
			awk -v f="${f#vendor/}" 'index(f, $0 "/") == 1 && length($0) > length(best) {best = $0} END {print best == "" ? "?" f : best}' <<<"$mods"
		done
		# modules.txt: changed module lines and package lines.
		git -C "$dir" diff vendor-base vendor-series -- vendor/modules.txt | sed -n 's/^[-+]\([^-+].*\)$/\1/p' |
			while read -r l; do
				case $l in
				"## "*) ;;
				"# "*) set -- $l; echo "$2" ;;
				*) set -- $l; awk -v f="$1" 'index(f "/", $0 "/") == 1 && length($0) > length(best) {best = $0} END {print best == "" ? "?" f : best}' <<<"$mods" ;;
				esac
			done
	} | LC_ALL=C sort -u >"$dir/.vendor-modules"
	echo "vendor/: $(wc -w <<<"$files") files differ from the pristine tree's generated vendor/, in the modules:"
	while read -r m; do
		[[ -n $m ]] || continue
		if allowed "$m"; then echo "  ok  $m"; else echo "  NOT ALLOWED  $m"; bad=1; fi
	done <"$dir/.vendor-modules"
	rm -f "$dir/.vendor-modules"
	return "$bad"
}

# check_generated_docs DIR: docs/crio.8.md and the completions are what the
# patched crio generates (CRI-O's make docs-generation and
# completions-generation).
check_generated_docs() {
	local dir=$1 bad=0 tmp
	tmp=$(mktemp -d)
	"$BIN/crio" -d "" --config="" md >"$tmp/crio.8.md" 2>/dev/null
	"$BIN/crio" complete bash >"$tmp/bash" 2>/dev/null
	"$BIN/crio" complete fish >"$tmp/fish" 2>/dev/null
	"$BIN/crio" complete zsh >"$tmp/zsh" 2>/dev/null
	# The patched tree's docs/crio.8.md against the patched crio's output,
	# minus what the pristine crio.8.md already disagrees with this machine
	# about (defaults read from the host).
	local f
	for f in "docs/crio.8.md:$tmp/crio.8.md" "completions/bash/crio:$tmp/bash" "completions/fish/crio.fish:$tmp/fish" "completions/zsh/_crio:$tmp/zsh"; do
		if diff -u "$dir/${f%%:*}" "${f#*:}" >"$tmp/diff"; then
			echo "  up to date  ${f%%:*}"
		else
			echo "  NOT UP TO DATE  ${f%%:*}:"
			sed 's/^/    /' "$tmp/diff" | head -20
			bad=1
		fi
	done
	rm -rf "$tmp"
	return "$bad"
}

cmd_check() {
	local dir=$OUT/check src bad=0 lint pkgs
	cmd_build
	src=$(pristine)
	echo "applying $(patches | wc -l) patches to a fresh copy of CRI-O $VERSION with git am"
	prepare "$dir"
	check_signoff || bad=1
	check_subjects || bad=1
	check_requires "$src" "$dir" || bad=1
	# go mod tidy on the patched tree (the build's replace dropped again)
	# against the go.mod the series commits.
	git -C "$dir" show vendor-series~1:go.mod >"$OUT/series.go.mod"
	check_go_mod_tidy "$dir" "$OUT/series.go.mod" || bad=1
	check_vendor "$dir" || bad=1
	if git -C "$dir" diff --name-only vendor-base vendor-series~1 | grep -q '^vendor/'; then
		echo "a patch changes vendor/: vendor/ is generated, never part of the series"
		bad=1
	fi
	check_gofmt "$dir" || bad=1
	pkgs=$(touched_packages)
	# Pristine v1.36.3 fails vet's copylocks check in server/ already (range
	# over []ContainerEventResponse in container_events.go and its test):
	# that analyzer is off, every other one runs.
	echo "go vet -copylocks=false -tags \"$TESTTAGS\" $(tr '\n' ' ' <<<"$pkgs")"
	(cd "$dir" && $GO vet -copylocks=false -tags "$TESTTAGS" $pkgs) || bad=1
	lint=$(golangci_lint "$GOLANGCI_LINT_VERSION")
	# gomoddirectives would report the build-only replace of NRI (the
	# series adds no go.mod directive): it is the one linter left out.
	echo "golangci-lint $GOLANGCI_LINT_VERSION run --disable gomoddirectives (CRI-O's .golangci.yml) $(tr '\n' ' ' <<<"$pkgs")"
	# --allow-serial-runners: golangci-lint's lock is the machine's; another
	# checkout's run waits instead of failing this one.
	(cd "$dir" && "$lint" run --allow-serial-runners --disable gomoddirectives $pkgs) || bad=1
	echo "make docs-validation (go run ./test/docs-validation)"
	(cd "$dir" && $GO run -tags "$TAGS" ./test/docs-validation 2>&1 | tail -3) || bad=1
	echo "make docs-generation completions-generation: generated files up to date"
	check_generated_docs "$dir" || bad=1
	echo "make check-log-lines (hack/log-capitalized.sh) on the changed files"
	# (The module zip keeps no executable bits: the scripts run with bash.)
	(cd "$dir" && bash ./hack/log-capitalized.sh && git diff --exit-code --stat -- $(changed_go_files)) || bad=1
	(cd "$dir" && git checkout -q -- .)
	echo "make check-nri-bats-tests: every test/nri case is run by test/nri.bats"
	(cd "$dir" && $GO test -c -tags "$TAGS" -o test/nri/nri.test ./test/nri && bash ./hack/check-nri-bats-tests.sh && rm -f test/nri/nri.test) || bad=1
	((bad == 0)) || { echo "crio-check failed" >&2; return 1; }
	echo "crio-check ok"
}

# Unit tests of every package the series touches, under -race. CRI-O's
# server package is not race-clean upstream: pristine v1.36.3's server tests
# report data races under -race (README.md, "Races upstream"), so server/ runs without
# -race, skipping the specs that need what this machine lacks (SERVER_SKIP:
# checkpoint restore from an archive, a shared / mount). test/nri is CRI-O's
# integration suite (Makefile GINKGO_SKIP_PACKAGES), run by nri-suite.sh.
SERVER_SKIP=${CRIO_SERVER_SKIP:-ContainerRestore from archive into new pod}
SERVER_TEST_SKIP=${CRIO_SERVER_TEST_SKIP:-TestAddOCIBindsRROMountsError}
cmd_unit() {
	local dir=$OUT/src pkgs start race=() p made=() rc=0
	cmd_build >&2
	pkgs=$(touched_packages | grep -v -e '^./test/')
	[[ -n $pkgs ]] || { echo "the series touches no Go package" >&2; return; }
	start=$SECONDS
	# CRI-O's own pkg/config tests validate its default configuration,
	# which, run as root, creates the default signature_policy_dir and
	# namespaced_auth_dir on the host: remove the ones they made.
	for p in /etc/crio/policies /etc/crio/auth /etc/crio; do
		[[ -e $p ]] || made+=("$p")
	done
	for p in $pkgs; do [[ $p == ./server ]] || race+=("$p"); done
	# Extra arguments (make's -json, through hack/test-summary.sh) go to
	# both go test runs.
	echo "go test -race -count=1 -tags \"$TESTTAGS\" $* ${race[*]}" >&2
	(cd "$dir" && $GO test -race -count=1 -tags "$TESTTAGS" "$@" "${race[@]}") || rc=$?
	if ((rc == 0)) && grep -qx ./server <<<"$pkgs"; then
		echo "go test -count=1 -tags \"$TESTTAGS\" $* ./server -skip '$SERVER_TEST_SKIP' -ginkgo.skip '$SERVER_SKIP'" >&2
		(cd "$dir" && $GO test -count=1 -tags "$TESTTAGS" "$@" ./server -skip "$SERVER_TEST_SKIP" -ginkgo.skip "$SERVER_SKIP") || rc=$?
	fi
	for p in "${made[@]}"; do
		if [[ -d $p ]] && rmdir "$p" 2>/dev/null; then
			echo "removed $p, made by the tests" >&2
		fi
	done
	((rc == 0)) || return "$rc"
	echo "CRI-O unit tests of the touched packages passed in $((SECONDS - start))s" >&2
}

cmd_edit() {
	nri_tree
	NO_TREE_FINISH=1 prepare "$OUT/edit"
	# For building in the edit tree: the replace and its vendor/, not
	# committed (export takes the commits after vendor-base only).
	(cd "$OUT/edit" && GOFLAGS= $GO mod tidy && GOFLAGS= $GO mod vendor)
	echo "build/cri-o/edit: commit your changes there (one commit per patch, never go.mod's replace or vendor/), then: $0 export"
}

cmd_export() {
	local dir=$OUT/edit
	[[ -d $dir/.git ]] || { echo "no $dir: run $0 edit first" >&2; return 1; }
	if git -C "$dir" diff --name-only vendor-base HEAD | grep -q '^vendor/'; then
		echo "a commit after vendor-base changes vendor/: vendor/ is generated, not part of the series" >&2
		return 1
	fi
	export_series "$dir" vendor-base
}

case ${1:-build} in
build) cmd_build ;;
check) cmd_check ;;
unit) shift; cmd_unit "$@" ;;
nritest) cmd_nritest ;;
pristine) cmd_pristine ;;
bench) cmd_bench ;;
edit) cmd_edit ;;
export) cmd_export ;;
lint-tool) golangci_lint "$GOLANGCI_LINT_VERSION" ;;
packages) touched_packages ;;
*) echo "usage: $0 build|check|unit|nritest|pristine|bench|edit|export|packages|lint-tool" >&2; exit 2 ;;
esac
