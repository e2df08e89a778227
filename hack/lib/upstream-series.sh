# hack/lib/upstream-series.sh: the part of building an upstream runtime with
# our patch series that CRI-O (contrib/cri-o/build.sh) and containerd
# (contrib/containerd/build.sh) share. Sourced; the caller sets
#   REPO        this checkout
#   HERE        the runtime's contrib directory (patches/, NAME.mk, build.sh)
#   MK          the runtime's makefile name in HERE (crio.mk, containerd.mk)
#   LABEL       the runtime's name in messages ("CRI-O", "containerd")
#   MOD VERSION the released Go module and its version
#   POLICY_MOD  the policy module's path, replaced by this checkout's copy
#   TAGS GO     build tags and the go command
#   ALLOWED_MODULES the modules whose go.mod require lines the series may change

# patches: the series, in order.
patches() { ls "$HERE"/patches/*.patch 2>/dev/null | LC_ALL=C sort; }

# inputs_hash: what a build depends on, so that an unchanged stamp skips it.
inputs_hash() {
	{
		echo "$VERSION $TAGS"
		cat "$HERE/$MK" "$HERE/build.sh" "$REPO/hack/lib/upstream-series.sh"
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

# prepare DIR: a fresh copy of the pristine tree, the series applied, the
# replace of the policy module by this checkout's added.
prepare() {
	local dst=$1 src p
	src=$(pristine)
	rm -rf "$dst"
	mkdir -p "$(dirname "$dst")"
	cp -r "$src" "$dst"
	chmod -R u+w "$dst"
	# A repository of its own: git apply inside this checkout's work tree
	# would take paths relative to it and silently skip the patches.
	(cd "$dst" && git init -q && git add -A && git -c user.name=build -c user.email=build@localhost commit -q -m "$LABEL $VERSION")
	for p in $(patches); do
		(cd "$dst" && git apply --check "$p" && git apply "$p") ||
			{ echo "patch $(basename "$p") does not apply to $LABEL $VERSION" >&2; return 1; }
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

# require_lines GO.MOD: "module version" of every require line.
require_lines() {
	awk '/^require \(/{r=1; next} r && /^\)/{r=0; next} r {print $1, $2} /^require [^(]/{print $2, $3}' "$1" | LC_ALL=C sort
}

# allowed MODULE: whether the series may change MODULE's require line.
allowed() {
	local m
	for m in $ALLOWED_MODULES; do [[ $1 == "$m" ]] && return 0; done
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
