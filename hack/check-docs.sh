#!/usr/bin/env bash
# hack/check-docs.sh: what the docs say about this repository's files holds
# (make check-docs, part of make lint):
#
#   - every example marked as a shipped file matches it: a fenced block
#     after the line <!-- shipped: PATH --> is PATH without its comment
#     lines (blank lines collapsed, none at either end); a block after
#     <!-- excerpt: PATH... --> has its lines (trimmed, comments and blank
#     lines left out) in the order the PATHs have them;
#   - no unmarked toml block of the docs below shows a shipped drop-in's
#     table (the key "10-device-injector", "20-ulimit-adjuster"): such an
#     example must say which file it is, and be checked;
#   - docs/install.md: every ```sh block is marked for test/install.bats
#     (test/install/recipe.sh), and every package its apt-get lines install
#     is in the Makefile's APT_PACKAGES (make install-deps installs them
#     before the test, which runs with /usr read-only);
#   - docs/install.md, "Plugins need no rebuild": no patch of the NRI series
#     touches pkg/api or pkg/stub, and go.mod builds nri-faulty (the test
#     plugin of every suite) against the released NRI v0.12.5.
set -euo pipefail

cd "$(dirname "$0")/.."
bad=0
fail() { echo "check-docs: $*" >&2; bad=1; }

# strip FILE: FILE without comment lines, blank lines collapsed and trimmed.
strip() {
	grep -v '^[[:space:]]*#' "$1" | cat -s | sed -e '/./,$!d' | tac | sed -e '/./,$!d' | tac
}

# block FILE LINE: the fenced block that starts at LINE+1 of FILE.
block() {
	awk -v start="$2" 'NR == start + 1 { if ($0 !~ /^```/) exit 1; inb = 1; next } inb && /^```[[:space:]]*$/ { exit } inb { print }' "$1"
}

# lines FILE...: the trimmed lines of the files, comments and blank lines out.
lines() {
	local f
	for f in "$@"; do sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' "$f"; done | grep -v -e '^#' -e '^$'
}

docs=$(git ls-files '*.md')
checked=0
while IFS=: read -r file line marker; do
	marker=${marker#<!-- }
	kind=${marker%%:*}
	paths=$(sed -e 's/^[a-z]*: *//' -e 's/ *-->$//' <<<"$marker")
	for p in $paths; do [[ -f $p ]] || { fail "$file:$line: $p does not exist"; continue 2; }; done
	if ! got=$(block "$file" "$line"); then
		fail "$file:$line: no fenced block right after the marker"
		continue
	fi
	case $kind in
	shipped)
		if ! diff -u --label "$paths (comment lines left out)" --label "$file:$((line + 2))" <(strip "$paths") <(echo "$got") >&2; then
			fail "$file:$line: the example is not $paths"
		fi
		;;
	excerpt)
		# The block's lines, in order, in the files' lines.
		if ! awk 'BEGIN { i = n = 0 } NR == FNR { want[n++] = $0; next } i < n && $0 == want[i] { i++ } END { exit i < n }' \
			<(lines <(echo "$got")) <(lines $paths); then
			fail "$file:$line: the example's lines are not, in this order, lines of $paths"
		fi
		;;
	*) fail "$file:$line: unknown marker $marker" ;;
	esac
	checked=$((checked + 1))
done < <(grep -n -H -E '^<!-- (shipped|excerpt): [^ ]+( [^ ]+)* -->$' $docs)

# Unmarked toml blocks with a shipped drop-in's key.
for file in README.md docs/cri-o.md docs/containerd.md docs/crio.conf.5.md docs/install.md docs/kubernetes-rollout.md contrib/nri/README.md; do
	awk -v f="$file" '
		/^```toml/ { inb = 1; start = NR; marked = (prev ~ /^<!-- (shipped|excerpt): /); next }
		inb && /^```/ { inb = 0; next }
		inb && !marked && /required_plugins\.["\x27](10-device-injector|20-ulimit-adjuster)["\x27]/ {
			print f ":" start ": a toml block shows a shipped drop-in'"'"'s table without <!-- shipped: PATH --> or <!-- excerpt: PATH --> before it"; exit 1
		}
		{ prev = $0 }
	' "$file" >&2 || bad=1
done

# docs/install.md: every sh block marked; its packages installed first.
for tag in prepare crio containerd; do
	test/install/recipe.sh docs/install.md "$tag" >/dev/null || { fail "docs/install.md: the blocks for $tag"; }
done
apt_packages=$(sed -n 's/^APT_PACKAGES := //p' Makefile)
for pkg in $(awk '/^```sh/ { inb = 1; next } /^```/ { inb = 0 } inb' docs/install.md |
	sed -e ':a' -e '/\\$/N; s/\\\n//; ta' | grep -o 'apt-get install [^|&;]*' | tr ' ' '\n' | grep -v -e '^-' -e '^apt-get$' -e '^install$' -e '^$'); do
	[[ " $apt_packages " == *" $pkg "* ]] || fail "docs/install.md installs $pkg, which the Makefile's APT_PACKAGES lacks (make install-deps must install it before test/install.bats)"
done

# docs/install.md, "Plugins need no rebuild".
touched=$(grep -h '^+++ b/' contrib/nri/patches/*.patch | sed 's|^+++ b/||' | grep -E '^pkg/(api|stub)/' || true)
[[ -z $touched ]] || fail "the NRI series touches $(tr '\n' ' ' <<<"$touched")- docs/install.md says plugins need no rebuild"
# ... and nri-faulty, which every suite runs against the patched runtimes,
# is built against the release.
[[ $(go mod edit -json | jq -r '.Require[] | select(.Path == "github.com/containerd/nri") | .Version') == v0.12.5 &&
	-z $(go mod edit -json | jq -r '.Replace[]? | select(.Old.Path == "github.com/containerd/nri") | .New.Path') ]] ||
	fail "go.mod does not require the released github.com/containerd/nri v0.12.5 without a replace: docs/install.md says nri-faulty is built against it"

((checked > 0)) || fail "no marked example found"
((bad == 0)) || exit 1
echo "check-docs: $checked marked examples match their files; docs/install.md's blocks are marked and its packages are in APT_PACKAGES; the NRI series leaves pkg/api and pkg/stub alone; nri-faulty builds against NRI v0.12.5"
