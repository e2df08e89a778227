# hack/lib/upstream-series.sh: building an upstream project with our patch
# series. NRI (contrib/nri/build.sh), CRI-O (contrib/cri-o/build.sh) and
# containerd (contrib/containerd/build.sh) source it. The caller sets
#   REPO          this checkout
#   HERE          the project's contrib directory (patches/, NAME.mk, build.sh)
#   MK            the project's makefile name in HERE (nri.mk, crio.mk, ...)
#   LABEL         the project's name in messages ("NRI", "CRI-O", ...)
#   MOD VERSION   the released Go module and its version
#   GO            the go command
# and may set
#   TAGS          build tags
#   REPLACES      "module=dir ..." replaces for the build tree only, such as
#                 the patched NRI tree for a runtime (never part of a patch)
#   EXTRA_INPUTS  more files whose content a build depends on
#   ALLOWED_MODULES the modules whose go.mod require lines the series may change
# and may define the functions
#   tree_base DIR   run in DIR after the pristine commit, before the series
#                   (a project that vendors commits its generated vendor/ here)
#   tree_finish DIR run in DIR after the series and the replaces (the build
#                   tree's own generated files, such as vendor/ again)

# The identity that commits the pristine tree and applies the series in a
# build tree. Authors of the patches are their own (git am keeps them).
BUILD_GIT=(git -c user.name=nrigate-build -c user.email=build@localhost -c commit.gpgsign=false)

# golangci-lint's cache, one per checkout: entries of identical sources
# linted in another checkout carry that checkout's paths, which its
# exclusion rules then cannot match (a second clone reported 46 issues of
# pristine NRI code that NRI's configuration excludes).
export GOLANGCI_LINT_CACHE=${GOLANGCI_LINT_CACHE:-$REPO/build/tools/golangci-lint-cache}

# build_released BINARY PACKAGE [LDFLAGS]: $BIN/BINARY-$VERSION, the
# released project without the series (the runtimes' restore tests
# downgrade to it and upgrade from it), built with TAGS from a copy of the
# released module with -mod=mod (the module cache has its dependencies),
# cached in $OUT/pristine.stamp.
build_released() {
	local bin=$BIN/$1-$VERSION pkg=$2 ldflags=${3:-} dir=$OUT/pristine hash start
	hash=$(echo "$VERSION $TAGS $ldflags" | sha256sum | cut -d' ' -f1)
	if [[ -x $bin && -f $OUT/pristine.stamp && $(cat "$OUT/pristine.stamp") == "$hash" ]]; then
		echo "$LABEL $VERSION (released) is up to date in $bin"
		return
	fi
	start=$SECONDS
	rm -rf "$dir"
	mkdir -p "$OUT" "$BIN"
	cp -r "$(pristine)" "$dir"
	chmod -R u+w "$dir"
	(cd "$dir" && GOFLAGS="-mod=mod -buildvcs=false" $GO build -ldflags "$ldflags" -tags "$TAGS" -o "$bin" "$pkg") || return
	echo "$hash" >"$OUT/pristine.stamp"
	echo "built $bin (released, without the series) in $((SECONDS - start))s"
}

# patches: the series, in order.
patches() { ls "$HERE"/patches/*.patch 2>/dev/null | LC_ALL=C sort; }

# inputs_hash: what a build depends on, so that an unchanged stamp skips it.
inputs_hash() {
	{
		echo "$VERSION ${TAGS:-} ${REPLACES:-}"
		cat "$HERE/$MK" "$HERE/build.sh" "$REPO/hack/lib/upstream-series.sh"
		local p
		for p in $(patches) ${EXTRA_INPUTS:-}; do cat "$p"; done
	} | sha256sum | cut -d' ' -f1
}

# pristine: the released module's directory in the module cache.
pristine() {
	local dir
	dir=$(cd /tmp && GOFLAGS= $GO mod download -json "$MOD@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[[ -d $dir ]] || { echo "go mod download $MOD@$VERSION gave no directory" >&2; return 1; }
	echo "$dir"
}

# prepare DIR: a fresh copy of the pristine tree as a git repository of its
# own, the series applied with git am (one commit per patch), and the
# build-only replaces added to go.mod without a commit.
prepare() {
	local dst=$1 src p
	src=$(pristine)
	rm -rf "$dst"
	mkdir -p "$(dirname "$dst")"
	cp -r "$src" "$dst"
	chmod -R u+w "$dst"
	# A repository of its own: git inside this checkout's work tree would
	# take paths relative to it.
	(cd "$dst" && git init -q && git add -A && "${BUILD_GIT[@]}" commit -q -m "$LABEL $VERSION")
	if declare -F tree_base >/dev/null; then tree_base "$dst" || return 1; fi
	for p in $(patches); do
		(cd "$dst" && "${BUILD_GIT[@]}" am -q --keep-cr "$p") || {
			echo "patch $(basename "$p") does not apply to $LABEL $VERSION with git am" >&2
			(cd "$dst" && git am --abort 2>/dev/null)
			return 1
		}
	done
	[[ -z $(patches) ]] || (cd "$dst" && ! git diff --quiet HEAD~"$(patches | wc -l)" HEAD) ||
		{ echo "the patch series changed nothing" >&2; return 1; }
	add_replaces "$dst"
	if declare -F tree_finish >/dev/null; then tree_finish "$dst" || return 1; fi
	return 0
}

# vendor_tree DIR MESSAGE [PATHSPEC...]: the project's `make vendor` (go mod
# tidy && go mod vendor) in DIR, committed with MESSAGE: everything, or only
# PATHSPEC (vendor: the build's replace in go.mod stays uncommitted).
vendor_tree() {
	local dir=$1 msg=$2
	shift 2
	(
		cd "$dir"
		GOFLAGS= $GO mod tidy
		GOFLAGS= $GO mod vendor
		git add -A -- "${@:-.}"
		"${BUILD_GIT[@]}" commit -q --allow-empty -m "$msg"
	)
}

# export_series DIR BASE: the commits of DIR after BASE, written over the
# series in $HERE/patches (git format-patch, zero commit hashes).
export_series() {
	rm -f "$HERE"/patches/*.patch
	(cd "$1" && git format-patch -q --zero-commit --no-signature -o "$HERE/patches" "$2"..HEAD)
	ls "$HERE/patches"
}

# add_replaces DIR: the REPLACES of the build tree, uncommitted.
add_replaces() {
	local r
	for r in ${REPLACES:-}; do
		(cd "$1" && $GO mod edit -replace "${r%%=*}=${r#*=}")
	done
}

# touched_packages: the Go packages the series changes (./dir form).
touched_packages() {
	local p
	for p in $(patches); do sed -n 's|^+++ b/\(.*\.go\)$|\1|p' "$p"; done |
		grep -v '^vendor/' | xargs -r -n1 dirname | LC_ALL=C sort -u | sed 's|^|./|'
}

# changed_go_files: the Go files the series adds or changes.
changed_go_files() {
	local p
	for p in $(patches); do sed -n 's|^+++ b/\(.*\.go\)$|\1|p' "$p"; done | LC_ALL=C sort -u
}

# require_lines GO.MOD: "module version" of every require line.
require_lines() {
	awk '/^require \(/{r=1; next} r && /^\)/{r=0; next} r {print $1, $2} /^require [^(]/{print $2, $3}' "$1" | LC_ALL=C sort
}

# check_go_mod_tidy DIR COMMITTED: `go mod tidy` in DIR writes COMMITTED,
# the go.mod the series commits, byte for byte, once the build-only
# REPLACES are dropped again: no require line moves between the direct and
# the indirect block, gains or loses its // indirect marker, or changes its
# version. Without REPLACES (NRI) DIR's go.sum must not change either; a
# runtime's go.sum cannot hold the checksums of the unreleased NRI v0.13.0.
# DIR's go.mod and go.sum are left as they were.
check_go_mod_tidy() {
	local dir=$1 committed=$2 tmp r bad=0
	tmp=$(mktemp -d)
	cp "$dir/go.mod" "$tmp/go.mod.before"
	cp "$dir/go.sum" "$tmp/go.sum.before"
	if ! (cd "$dir" && GOFLAGS= $GO mod tidy); then
		echo "go.mod: go mod tidy failed"
		bad=1
	else
		cp "$dir/go.mod" "$tmp/go.mod"
		for r in ${REPLACES:-}; do
			GOFLAGS= $GO mod edit -dropreplace="${r%%=*}" "$tmp/go.mod"
		done
		if cmp -s "$committed" "$tmp/go.mod"; then
			echo "go.mod: go mod tidy writes the series' go.mod byte for byte"
		else
			echo "go.mod: go mod tidy writes another go.mod than the series' (- the series', + go mod tidy's):"
			diff -u "$committed" "$tmp/go.mod" | tail -n +3 | sed 's/^/    /'
			bad=1
		fi
		if [[ -z ${REPLACES:-} ]] && ! cmp -s "$tmp/go.sum.before" "$dir/go.sum"; then
			echo "go.sum: go mod tidy changes it:"
			diff -u "$tmp/go.sum.before" "$dir/go.sum" | tail -n +3 | sed 's/^/    /'
			bad=1
		fi
	fi
	cp "$tmp/go.mod.before" "$dir/go.mod"
	cp "$tmp/go.sum.before" "$dir/go.sum"
	rm -rf "$tmp"
	return "$bad"
}

# allowed MODULE: whether the series may change MODULE's require line.
allowed() {
	local m
	for m in ${ALLOWED_MODULES:-}; do [[ $1 == "$m" ]] && return 0; done
	return 1
}

# check_requires PRISTINE DIR: print every module whose go.mod require line
# differs between the pristine tree and the patched DIR, marked ok or NOT
# ALLOWED; fails when one is not in ALLOWED_MODULES.
check_requires() {
	local m bad=0
	echo "go.mod: require lines the series changes"
	while read -r m; do
		[[ -n $m ]] || continue
		if allowed "$m"; then echo "  ok  $m"; else echo "  NOT ALLOWED  $m"; bad=1; fi
	done < <(diff <(require_lines "$1/go.mod") <(require_lines "$2/go.mod") |
		sed -n 's/^[<>] \([^ ]*\) .*/\1/p' | LC_ALL=C sort -u)
	return "$bad"
}

# check_gofmt DIR: the Go files the series changes are gofmt-clean.
check_gofmt() {
	local files unformatted
	files=$(changed_go_files)
	[[ -n $files ]] || return 0
	unformatted=$(cd "$1" && gofmt -l $files)
	if [[ -n $unformatted ]]; then
		echo "gofmt needed: $unformatted"
		return 1
	fi
	echo "gofmt: the changed Go files are formatted"
}

# check_signoff: every patch has one author, the same for the whole series,
# and a Signed-off-by line (DCO) of that author; subjects are one line.
check_signoff() {
	local p from author="" bad=0
	for p in $(patches); do
		# The From: header, unfolded (format-patch folds long ones).
		from=$(awk '/^From: / { f = substr($0, 7); while ((getline l) > 0 && l ~ /^[ \t]/) f = f l; print f; exit }' "$p")
		if [[ -z $from ]]; then
			echo "  $(basename "$p"): no From: header (not a git format-patch mail)"
			bad=1
			continue
		fi
		[[ -n $author ]] || author=$from
		if [[ $from != "$author" ]]; then
			echo "  $(basename "$p"): author $from, not the series' author $author"
			bad=1
		fi
		if ! grep -qxF "Signed-off-by: $from" "$p"; then
			echo "  $(basename "$p"): no Signed-off-by: $from"
			bad=1
		fi
	done
	((bad == 0)) && echo "DCO: $(patches | wc -l) patches authored and signed off by $author"
	return "$bad"
}

# check_subjects: no patch's subject (the commit's first line, unfolded)
# ends with a period, as containerd's (and git's own) commit style has it.
check_subjects() {
	local p subject bad=0
	for p in $(patches); do
		subject=$(git mailinfo /dev/null /dev/null <"$p" | sed -n 's/^Subject: //p')
		if [[ $subject == *. ]]; then
			echo "  $(basename "$p"): subject ends with a period: $subject"
			bad=1
		fi
	done
	((bad == 0)) && echo "subjects: $(patches | wc -l) patches, none ends with a period"
	return "$bad"
}

# golangci_lint VERSION: the path of golangci-lint VERSION, installed with go
# install into build/tools on first use (the version the project pins). The
# install holds a lock, so a caller waits for one already under way (make
# test starts them in the background, hack/prebuild.sh) instead of racing it.
golangci_lint() {
	local dir=$REPO/build/tools/golangci-lint-$1 lock
	mkdir -p "$REPO/build/tools"
	exec {lock}>"$dir.lock"
	if ! flock -n "$lock"; then
		echo "waiting for the golangci-lint $1 install under way (hack/prebuild.sh)" >&2
		flock "$lock"
	fi
	if [[ ! -x $dir/golangci-lint ]]; then
		echo "installing golangci-lint $1 into $dir" >&2
		# Into a directory of its own first: an install killed half way
		# (the background prebuild ends with make) leaves no binary.
		rm -rf "$dir.tmp"
		(cd /tmp && GOFLAGS= GOBIN=$dir.tmp $GO install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$1") >&2 || return 1
		mkdir -p "$dir"
		mv "$dir.tmp/golangci-lint" "$dir/golangci-lint"
		rmdir "$dir.tmp"
	fi
	exec {lock}>&-
	echo "$dir/golangci-lint"
}
