#!/usr/bin/env bash
# contrib/nri/build.sh: NRI v0.12.5 with the plugin policy series.
#
#   build.sh build    build/nri/src: the released module with the series
#                     applied by git am (one commit per patch), compiled; the
#                     runtimes build against it. Skipped when the stamp, a
#                     hash of every input, is unchanged.
#   build.sh check    NRI's own checks on a fresh copy with the series:
#                     every patch authored and signed off (DCO), subjects
#                     without a period; then at every pull request of the
#                     stack (each patch is one; README.md): go.mod and go.sum
#                     unchanged, gofmt, go vet, NRI's golangci-lint
#                     configuration with the golangci-lint version NRI's CI
#                     pins, and go test -race of the packages the series
#                     touches; and API.md, the exported API the series adds
#                     (apidiff against v0.12.5: compatible only, at most
#                     MAX_NEW_API identifiers). build/nri/check is then the
#                     tree for NRI's tests (make nri-check runs go test
#                     -race ./... there)
#   build.sh selector the differential test of NRI's label selector against
#                     k8s.io/apimachinery/pkg/labels (contrib/nri/selectortest)
#   build.sh bench    the Go benchmarks of required plugins in build/nri/src,
#                     summarized with benchstat: the CreateContainer relay
#                     with and without the plugin required (and the two
#                     interleaved request by request, whose ratio per round
#                     gives a median and 95 % interval), the relay without
#                     and with WithFailedCreationUndo (interleaved too), the
#                     decision for 0/1/8/32 ready required plugins, and how
#                     soon 1000 waiting requests are released
#   build.sh edit     build/nri/edit: a tree to change the series in (commit
#                     there, then export)
#   build.sh export   the commits of build/nri/edit as contrib/nri/patches
#   build.sh lint-tool the path of the golangci-lint NRI pins, installed on
#                     first use
#   build.sh tree DIR the patched NRI tree (v0.12.5 + the series, git am) in
#                     DIR, a new directory, for a CRI-O or containerd tree of
#                     your own to replace github.com/containerd/nri with
#                     (docs/cri-o.md, docs/containerd.md)
#
# The pristine source is the released module (go mod download).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$REPO/contrib/nri
VERSION=${NRI_VERSION:-v0.12.5}
MOD=github.com/containerd/nri
OUT=$REPO/build/nri
GO=${GO:-go}
export GOFLAGS="-buildvcs=false"
# The golangci-lint NRI's CI runs (.github/workflows/ci.yml: version v2.12).
GOLANGCI_LINT_VERSION=${NRI_GOLANGCI_LINT_VERSION:-v2.12.2}
# apidiff (golang.org/x/exp/cmd/apidiff) and the most new exported
# identifiers the series may add, in all packages together.
APIDIFF_VERSION=v0.0.0-20261113113407-e3970619a1a4
MAX_NEW_API=30
# Number of differential fuzzing executions of the selector per run.
SELECTOR_FUZZ=${NRI_SELECTOR_FUZZ:-20000x}

MK=nri.mk
LABEL=NRI
# The series must not move NRI's requirements: every plugin author pulls them.
ALLOWED_MODULES=
# shellcheck source=../../hack/lib/upstream-series.sh
. "$REPO/hack/lib/upstream-series.sh"

cmd_build() {
	local hash start
	hash=$(inputs_hash)
	if [[ -f $OUT/stamp && $(cat "$OUT/stamp") == "$hash" && -d $OUT/src ]]; then
		echo "NRI $VERSION (patched) is up to date in $OUT/src"
		return
	fi
	start=$SECONDS
	rm -f "$OUT/stamp"
	prepare "$OUT/src"
	echo "building NRI $VERSION with $(patches | wc -l) patches"
	(cd "$OUT/src" && $GO build ./... && $GO vet ./pkg/adaptation/...)
	echo "$hash" >"$OUT/stamp"
	echo "built $OUT/src in $((SECONDS - start))s"
}

cmd_check() {
	local dir=$OUT/check src bad=0 lint k commits head
	src=$(pristine)
	echo "applying $(patches | wc -l) patches to a fresh copy of NRI $VERSION with git am"
	prepare "$dir"
	check_signoff || bad=1
	check_subjects || bad=1
	lint=$(golangci_lint "$GOLANGCI_LINT_VERSION")
	# Each patch is a pull request of the stack: each must be green alone.
	commits=($(cd "$dir" && git rev-list --reverse "$(git rev-list --max-parents=0 HEAD)..HEAD"))
	head=$(cd "$dir" && git rev-parse --abbrev-ref HEAD)
	for ((k = 0; k < ${#commits[@]}; k++)); do
		(cd "$dir" && git checkout -q "${commits[k]}")
		echo "== pull request $((k + 1)) of ${#commits[@]}: $(cd "$dir" && git log -1 --format=%s)"
		check_tree "$src" "$dir" "$lint" || bad=1
	done
	(cd "$dir" && git checkout -q "$head")
	check_gate_mutation "$dir" || bad=1
	check_api "$src" "$dir" || bad=1
	((bad == 0)) || { echo "nri-check failed" >&2; return 1; }
	echo "nri-check ok"
}

# check_tree PRISTINE DIR LINT: NRI's checks of the tree DIR at one pull
# request of the stack.
check_tree() {
	local src=$1 dir=$2 lint=$3 bad=0 pkgs unformatted
	if ! cmp -s "$src/go.mod" "$dir/go.mod" || ! cmp -s "$src/go.sum" "$dir/go.sum"; then
		echo "go.mod or go.sum changed:"
		diff "$src/go.mod" "$dir/go.mod" || true
		bad=1
	fi
	unformatted=$(cd "$dir" && gofmt -l $(git ls-files '*.go'))
	[[ -z $unformatted ]] || { echo "gofmt needed: $unformatted"; bad=1; }
	(cd "$dir" && $GO vet ./...) || bad=1
	(cd "$dir" && "$lint" run --allow-serial-runners ./...) || bad=1
	pkgs=$(cd "$dir" && git diff --name-only "$(git rev-list --max-parents=0 HEAD)" HEAD -- '*.go' |
		xargs -r -n1 dirname | LC_ALL=C sort -u | sed 's|^|./|')
	if [[ -n $pkgs ]]; then
		echo "go test -race $pkgs"
		(cd "$dir" && $GO test -race -count=1 $pkgs) || bad=1
	fi
	return "$bad"
}

# check_gate_mutation DIR: the relay's gate confirms answers, it does not
# count on every path that skips a plugin to report it. A copy of DIR with
# a "continue" added to each gated relay loop (RunPodSandbox,
# CreateContainer, UpdateContainer, and the validators of CreateContainer),
# so that the relay skips every plugin without telling the gate, must
# refuse the requests of TestRequiredPluginInTime and of
# TestRequiredValidator/approves, which a ready required plugin answers,
# each with the gate's refusal for an instance that did not answer.
check_gate_mutation() {
	local dir=$1 mut=$OUT/mutation out n event bad=0
	rm -rf "$mut"
	cp -r "$dir" "$mut"
	perl -0pi -e 's/(gate\.skipped\(ctx, (?:plugin|p), Event_\w+\); err != nil \{\n(?:.*\n){2}\t\t\tcontinue\n\t\t\}\n)/$1\t\tcontinue \/\/ mutation: skip the plugin without telling the gate\n/g' \
		"$mut/pkg/adaptation/adaptation.go"
	n=$(grep -c '// mutation:' "$mut/pkg/adaptation/adaptation.go" || true)
	if ((n != 4)); then
		echo "gate mutation: $n relay loops mutated, want 4 (RunPodSandbox, CreateContainer, UpdateContainer, validators)"
		return 1
	fi
	echo "gate mutation: go test of a copy whose 4 gated relay loops skip every plugin without telling the gate"
	if out=$(cd "$mut" && $GO test -count=1 -run '^(TestRequiredPluginInTime|TestRequiredValidator)$' ./pkg/adaptation/ 2>&1); then
		echo "gate mutation: the tests passed although the relay skipped the required plugins"
		return 1
	fi
	for event in RunPodSandbox CreateContainer UpdateContainer ValidateContainerAdjustment; do
		if ! grep -q "did not answer $event (the relay did not send it to the instance)" <<<"$out"; then
			echo "gate mutation: no refusal of the skipped plugin for $event"
			bad=1
		fi
	done
	((bad == 0)) && echo "gate mutation: refused for each of the 4 loops"
	return "$bad"
}

# check_api PRISTINE DIR: contrib/nri/API.md is apidiff's report of the
# series' exported API against the release; only compatible changes, and
# at most MAX_NEW_API new identifiers.
check_api() {
	local src=$1 dir=$2 apidiff=$REPO/build/tools/apidiff-$APIDIFF_VERSION/apidiff report added bad=0
	if [[ ! -x $apidiff ]]; then
		(cd /tmp && GOFLAGS= GOBIN=$(dirname "$apidiff") $GO install "golang.org/x/exp/cmd/apidiff@$APIDIFF_VERSION")
	fi
	(cd "$src" && GOFLAGS= "$apidiff" -m -w "$OUT/v0.12.5.api" "$MOD")
	(cd "$dir" && GOFLAGS= "$apidiff" -m -w "$OUT/patched.api" "$MOD")
	report=$(GOFLAGS= "$apidiff" -m "$OUT/v0.12.5.api" "$OUT/patched.api" 2>/dev/null)
	added=$(grep -c ': added$' <<<"$report" || true)
	{
		echo "# The API the NRI series adds"
		echo
		echo "Generated by \`make nri-check\` (contrib/nri/build.sh): \`apidiff -m\` of NRI $VERSION with the series against"
		echo "the release. $added new exported identifiers (at most $MAX_NEW_API), no incompatible change."
		echo
		echo '```'
		echo "$report"
		echo '```'
	} >"$OUT/API.md"
	if grep -q '^Incompatible changes' <<<"$report"; then
		echo "apidiff: the series makes incompatible changes:"; echo "$report"; bad=1
	fi
	if ((added > MAX_NEW_API)); then
		echo "apidiff: $added new exported identifiers, more than $MAX_NEW_API"; bad=1
	fi
	if ! cmp -s "$OUT/API.md" "$HERE/API.md"; then
		echo "contrib/nri/API.md is not apidiff's report of the series: update it from $OUT/API.md"
		diff "$HERE/API.md" "$OUT/API.md" || true
		bad=1
	fi
	((bad == 0)) && echo "apidiff: $added new exported identifiers, all compatible (contrib/nri/API.md)"
	return "$bad"
}

cmd_selector() {
	cmd_build
	echo "go test -race ./... in contrib/nri/selectortest (seed corpora and tables), then each fuzz target -fuzztime $SELECTOR_FUZZ"
	(cd "$HERE/selectortest" && $GO test -race -count=1 ./...)
	local target
	for target in FuzzSelectorMatchesKubernetes FuzzScopeMatchesTheDocumentedRule; do
		(cd "$HERE/selectortest" && $GO test -run '^$' -fuzz "^$target\$" -fuzztime "$SELECTOR_FUZZ" .)
	done
}

BENCHSTAT_VERSION=v0.0.0-20260908200009-22c9c6c9d4da
cmd_bench() {
	local out=$OUT/bench.txt bin=$OUT/adaptation.test rounds=${NRI_BENCH_ROUNDS:-10} i v
	local benchstat=$REPO/build/tools/benchstat-$BENCHSTAT_VERSION/benchstat
	cmd_build
	if [[ ! -x $benchstat ]]; then
		(cd /tmp && GOBIN=$(dirname "$benchstat") $GO install "golang.org/x/perf/cmd/benchstat@$BENCHSTAT_VERSION")
	fi
	(cd "$OUT/src" && $GO test -c -o "$bin" ./pkg/adaptation/)
	# A fresh process per round. The cost of requiring a plugin is the
	# ratio of BenchmarkCreateContainerRelayInterleaved, which alternates
	# between a runtime that requires no plugin and one requiring its
	# plugin request by request; the separate required=0 and =1 runs give
	# the allocations (their times differ by more than the requirement's
	# cost from one run to the next on a small machine).
	bench() { (cd "$OUT/src/pkg/adaptation" && "$bin" -test.run '^$' -test.benchmem -test.bench "$1") | grep -E '^(Benchmark|goos|goarch|pkg|cpu)'; }
	echo "$rounds rounds of adaptation.test -test.bench: CreateContainerRelay (required=0, =1, interleaved; undo), RequiredPluginsDecision, RequiredPluginWaitersReleased"
	: >"$out"
	for ((i = 0; i < rounds; i++)); do
		bench 'CreateContainerRelay|RequiredPluginsDecision|RequiredPluginWaitersReleased' >>"$out"
	done
	echo "== CreateContainer relay: no plugin required (base) vs one required, separate runs"
	"$benchstat" -filter '.name:CreateContainerRelay' -col /required "$out"
	echo "== CreateContainer relay, interleaved request by request"
	"$benchstat" -filter '.name:CreateContainerRelayInterleaved' "$out"
	awk '/^BenchmarkCreateContainerRelayInterleaved/ { for (k = 2; k <= NF; k++) if ($k == "required/none") print $(k - 1) }' "$out" |
		paired_ratio required/none
	echo "== CreateContainer relay without and with WithFailedCreationUndo, interleaved request by request"
	"$benchstat" -filter '.name:CreateContainerRelayUndo' "$out"
	awk '/^BenchmarkCreateContainerRelayUndo/ { for (k = 2; k <= NF; k++) if ($k == "undo/plain") print $(k - 1) }' "$out" |
		paired_ratio undo/plain
	echo "== the decision, and 1000 waiting requests released once the plugin is synchronized"
	"$benchstat" -filter '-.name:CreateContainerRelay -.name:CreateContainerRelayInterleaved -.name:CreateContainerRelayUndo' "$out"
	echo "raw results: $out"
}

# paired_ratio NAME: the median of the per-round ratios NAME on stdin and
# its 95 % interval by resampling the rounds (percentile bootstrap, 10000
# draws). Plain POSIX awk and sort: Debian's default awk (mawk) has no asort.
paired_ratio() {
	local name=$1 ratios lo_hi
	ratios=$(cat)
	lo_hi=$(awk 'BEGIN { srand(1) } { x[n++] = $1 }
		function median(a, m,   i, j, t, b) {
			for (i = 0; i < m; i++) b[i] = a[i]
			for (i = 1; i < m; i++) { t = b[i]; for (j = i - 1; j >= 0 && b[j] > t; j--) b[j + 1] = b[j]; b[j + 1] = t }
			return m % 2 ? b[int(m / 2)] : (b[m / 2 - 1] + b[m / 2]) / 2
		}
		END { for (d = 0; d < 10000; d++) { for (i = 0; i < n; i++) s[i] = x[int(rand() * n)]; print median(s, n) } }' <<<"$ratios" |
		sort -g | awk 'NR == 251 { lo = $1 } NR == 9751 { hi = $1 } END { printf "%.3f %.3f", lo, hi }')
	sort -g <<<"$ratios" | awk -v lh="$lo_hi" -v name="$name" '{ x[n++] = $1 } END {
		split(lh, b, " ")
		printf "paired ratio %s: median %.3f, 95%% interval [%.3f, %.3f] over %d rounds\n", name, n % 2 ? x[int(n / 2)] : (x[n / 2 - 1] + x[n / 2]) / 2, b[1], b[2], n
	}'
}

cmd_edit() {
	prepare "$OUT/edit"
	# The replaces are the build's, not the series'.
	(cd "$OUT/edit" && git checkout -q go.mod 2>/dev/null || true)
	echo "build/nri/edit: commit your changes there (one commit per patch), then: $0 export"
}

cmd_export() {
	local dir=$OUT/edit base
	[[ -d $dir/.git ]] || { echo "no $dir: run $0 edit first" >&2; return 1; }
	base=$(cd "$dir" && git rev-list --max-parents=0 HEAD)
	export_series "$dir" "$base"
}

# cmd_tree DIR: prepare's tree in DIR, which must not exist yet (prepare
# removes its target first).
cmd_tree() {
	local dst=${1:-}
	[[ -n $dst ]] || { echo "usage: $0 tree DIR (a new directory)" >&2; return 2; }
	[[ ! -e $dst ]] || { echo "$0 tree: $dst exists: give a new directory" >&2; return 1; }
	prepare "$dst"
	echo "$dst: NRI $VERSION with $(patches | wc -l) patches (git log shows them); replace github.com/containerd/nri with it"
}

case ${1:-build} in
build) cmd_build ;;
tree) shift; cmd_tree "$@" ;;
check) cmd_check ;;
selector) cmd_selector ;;
bench) cmd_bench ;;
edit) cmd_edit ;;
export) cmd_export ;;
lint-tool) golangci_lint "$GOLANGCI_LINT_VERSION" ;;
*) echo "usage: $0 build|check|selector|bench|edit|export|lint-tool|tree DIR" >&2; exit 2 ;;
esac
