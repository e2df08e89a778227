#!/usr/bin/env bash
# hack/parity.sh (make parity): run test/policy.bats on each runtime and, on
# CRI-O, with upstream NRI's default validator alone, and write
# docs/parity.md from the run: one row per scenario (BATS test), one column
# per runtime.
#
# Every gated request the suite makes (create, runp, update) appends a JSON
# record (test/helpers.bash record_step): outcome, gRPC code, refusal text,
# seconds. The TAP result says whether the scenario's assertions held.
#
#   PARITY_COLUMNS   columns to run (default "crio containerd validator")
#   PARITY_OUT       the file to write (default docs/parity.md)
#   PARITY_KEEP      keep the work directory (TAP, records) and print it
set -uo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO_ROOT" || exit 1
export PATH=$PATH:$(go env GOPATH 2>/dev/null)/bin
COLUMNS=${PARITY_COLUMNS:-crio containerd validator}
OUT=${PARITY_OUT:-docs/parity.md}
# RUNTIME_BINDIR: where crio and containerd are (test/helpers.bash; default
# bin/); CRIO_BINDIR / CONTAINERD_BINDIR for one of them.
BINDIR=${RUNTIME_BINDIR:-$REPO_ROOT/bin}
#   PARITY_FROM      continue in the kept work directory of an earlier run
#                    (PARITY_KEEP): run only the columns it did not finish
if [[ -n ${PARITY_FROM:-} ]]; then
	WORK=$PARITY_FROM
else
	WORK=$(mktemp -d /tmp/parity.XXXXXX)
	[[ -n ${PARITY_KEEP:-} ]] || trap 'rm -rf "$WORK"' EXIT
fi

for col in $COLUMNS; do
	# PARITY_FROM: a column the earlier run finished is not run again.
	[[ -n ${PARITY_FROM:-} && -f $WORK/$col.secs ]] && continue
	rt=$col mode=policy
	# The validator column: CRI-O with the policy replaced by NRI's default
	# validator (test/helpers.bash policy_to_validator).
	[[ $col == validator ]] && rt=crio mode=validator
	echo "parity: test/policy.bats on $col" >&2
	t0=$SECONDS
	PARITY_RECORDS=$WORK/$col.jsonl PARITY_MODE=$mode RUNTIME=$rt \
		bats --tap --timing test/policy.bats >"$WORK/$col.tap" 2>"$WORK/$col.err"
	echo $((SECONDS - t0)) >"$WORK/$col.secs"
	touch "$WORK/$col.jsonl"
	printf 'parity: %s: %s ok, %s not ok, %s skipped in %ss\n' "$col" \
		"$(grep -c '^ok' "$WORK/$col.tap" | tr -d ' ')" "$(grep -c '^not ok' "$WORK/$col.tap")" \
		"$(grep -c '# skip' "$WORK/$col.tap")" "$(cat "$WORK/$col.secs")" >&2
done

# The e2e restart-loop spec (200 creations from 4 clients while the required
# plugin restarts every 7 answers) on each runtime column.
for col in $COLUMNS; do
	[[ $col == validator ]] && continue
	[[ -n ${PARITY_FROM:-} && -f $WORK/$col.e2e.rc ]] && continue
	echo "parity: e2e restart loop on $col" >&2
	NRIGATE_E2E_RUNTIME=$col go test -v -count=1 ./test/e2e -ginkgo.focus 'a required plugin restarting in a loop' -ginkgo.v >"$WORK/$col.e2e" 2>&1
	echo $? >"$WORK/$col.e2e.rc"
done

# e2e_cell COL: the restart-loop spec's verdict and counts.
e2e_cell() {
	local line rc
	rc=$(cat "$WORK/$1.e2e.rc" 2>/dev/null)
	line=$(grep -o 'PARITY restart-loop .*' "$WORK/$1.e2e" 2>/dev/null | tail -1)
	if [[ -z $line ]]; then
		grep -q 'SKIPPED\|Skip' "$WORK/$1.e2e" 2>/dev/null && [[ $rc == 0 ]] && { echo "**skip**"; return; }
		echo "**$([[ $rc == 0 ]] && echo pass || echo FAIL)** (no counts: see the run's log)"
		return
	fi
	line=${line#PARITY restart-loop runtime=* }
	echo "**$([[ $rc == 0 ]] && echo pass || echo FAIL)**<br>${line// /, }"
}

# tap_status COL TEST: pass | FAIL | n/a: REASON | skip: REASON | not run
tap_status() {
	local line
	line=$(awk -v t="$2" '
		/^(not )?ok [0-9]+ / {
			s = $0; sub(/^(not )?ok [0-9]+ /, "", s)
			if (index(s, t) == 1) { print; exit }
		}' "$WORK/$1.tap")
	case $line in
	"") echo "not run" ;;
	*"# skip"*)
		local r=${line#*# skip}
		r=${r# }
		[[ $r == "("*")" ]] && { r=${r#(}; r=${r%)}; }
		if [[ $r == "not applicable on"* ]]; then echo "n/a: ${r#*: }"; else echo "skip: $r"; fi
		;;
	"not ok"*) echo FAIL ;;
	*) echo pass ;;
	esac
}

# steps COL TEST: the gated requests of TEST, "step: outcome (s)" joined.
steps() {
	jq -r --arg t "$2" 'select(.test == $t) | "\(.step): \(.outcome) \(.seconds)s"' "$WORK/$1.jsonl" |
		paste -sd';' - | sed 's/;/; /g'
}

# outcomes COL TEST: the outcome sequence only (for comparing columns).
outcomes() {
	jq -r --arg t "$2" 'select(.test == $t) | "\(.step)=\(.outcome)"' "$WORK/$1.jsonl" | paste -sd' ' -
}

# links_required_plugins BINARY: BINARY is a patched build: it links NRI's
# WaitForRequiredPlugins, which released NRI does not have.
links_required_plugins() {
	grep -qF 'adaptation.(*Adaptation).WaitForRequiredPlugins' "$1" 2>/dev/null
}

# is_patched COL: crio/containerd columns whose binary links required plugins.
is_patched() {
	local b
	case $1 in
	crio) b=${CRIO_BINDIR:-${RUNTIME_BINDIR:-$REPO_ROOT/bin}}/crio ;;
	containerd) b=${CONTAINERD_BINDIR:-${RUNTIME_BINDIR:-$REPO_ROOT/bin}}/containerd ;;
	*) return 0 ;;
	esac
	links_required_plugins "$b"
}
COMPARED=""
UNPATCHED=""
for col in $COLUMNS; do
	[[ $col == validator ]] && continue
	if is_patched "$col"; then COMPARED+=" $col"; else UNPATCHED+=" $col"; fi
done

# Scenario order: the file's.
mapfile -t TESTS < <(sed -n 's/^@test "\(.*\)" {$/\1/p' test/policy.bats | sed 's/\\"/"/g')

# Explanations of cells that differ between runtimes (by test name prefix).
declare -A EXPLAIN=(
	["SIGHUP reloads"]="containerd reads its NRI plugin configuration once at start and has no configuration reload (no SIGHUP handler); a change of the required plugins needs a restart there (n/a). CRI-O (contrib/cri-o patch 0012) reloads the required plugins on SIGHUP, validated against the running configuration, and keeps the ones in force on a bad reload."
	["required plugins with NRI disabled"]="Each runtime checks this itself, with its own keys in the text (NRI has no notion of a disabled NRI): the cell shows what each runtime names."
	["a plugin required here and by NRI's default validator"]="NRI refuses the configuration (its New fails) with the same sentence on both runtimes; CRI-O reports it already when it validates its configuration, naming the file and both keys."
	["undo of a creation that fails after the relay"]="containerd creates the runc container at StartContainer, so a command runc cannot run fails the start, not the creation, and the scenario does not apply (n/a); containerd's own deferred NRI undo covers a CreateContainer that fails after its relay. CRI-O creates it in CreateContainer: runc refuses it after every plugin acted on the container, and CRI-O tells the plugin (contrib/cri-o patch 0015)."
	["a container exiting by itself"]="CRI-O v1.36.3 does not tell NRI when a container exits by itself: its exit monitor (server.handleExit) updates the state and runs the post-stop cleanup but does not call NRI's StopContainer; CRI-O relays StopContainer only for a CRI StopContainer and a failed start. An upstream CRI-O behaviour, unrelated to the policy (teardown is never gated)."
)

{
	cat <<-'HEAD'
	# Parity: one policy suite on CRI-O and containerd, and upstream's default validator

	GENERATED by `make parity` (hack/parity.sh) from a real run; do not edit by hand.

	Each row is one scenario of `test/policy.bats`, run unchanged against each
	runtime (`RUNTIME=crio|containerd`, test/helpers.bash writes each
	runtime's config with its config script from the same CRI-O-syntax policy
	drop-in). A cell gives
	the scenario's verdict (`pass`: every assertion held; `FAIL`; `n/a` with the
	reason when the runtime lacks the feature) and the gated requests the test
	made, in order, with their outcome as the CRI client saw it and how long
	the call took: `refused` is `FailedPrecondition` with NRI's refusal text,
	`failed (Code)` another error, `created` success.

	The **upstream validator** column is patched CRI-O with no required plugins and
	NRI v0.12.5's built-in default validator on instead
	(`[crio.nri.default_validator] nri_enable_default_validator = true`,
	`nri_validator_required_plugins` = every plugin the scenario requires
	with `fail_policy = "fail"`, an exemption's annotation as its toleration annotation;
	scope, events, `registration_wait`, readiness and `ignore` have no upstream
	equivalent and are dropped: `policy_to_validator` in test/helpers.bash).
	The scenarios' assertions are the required plugins', so `FAIL` there marks where
	upstream alone does not give their outcome; the recorded requests
	show what it did instead (a test stops at its first failed assertion, so
	later steps of that scenario are missing).

	HEAD
	[[ -f $WORK/run-info ]] || echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, commit $(git rev-parse --short HEAD)" >"$WORK/run-info"
	echo "Run: $(cat "$WORK/run-info")."
	echo
	echo "| column | binary | passed | failed | skipped | wall time |"
	echo "|---|---|---:|---:|---:|---:|"
	for col in $COLUMNS; do
		case $col in
		crio | validator)
			BINDIR=${CRIO_BINDIR:-${RUNTIME_BINDIR:-$REPO_ROOT/bin}}
			bin="${BINDIR#"$REPO_ROOT"/}/crio $("$BINDIR/crio" --version 2>/dev/null | awk '/^crio version/ {print $3}')"
			if links_required_plugins "$BINDIR/crio"; then
				bin+=" (patched)"
			else bin+=" (UNPATCHED upstream: no policy)"; fi
			;;
		containerd)
			BINDIR=${CONTAINERD_BINDIR:-${RUNTIME_BINDIR:-$REPO_ROOT/bin}}
			bin="${BINDIR#"$REPO_ROOT"/}/containerd $("$BINDIR/containerd" --version 2>/dev/null | awk '{print $3}')"
			if links_required_plugins "$BINDIR/containerd"; then
				bin+=" (patched)"
			else bin+=" (UNPATCHED upstream: no policy)"; fi
			;;
		esac
		p=$(grep -c '^ok' "$WORK/$col.tap")
		s=$(grep -c '# skip' "$WORK/$col.tap")
		printf '| %s | %s | %s | %s | %s | %ss |\n' "$col" "$bin" "$((p - s))" "$(grep -c '^not ok' "$WORK/$col.tap")" "$s" "$(cat "$WORK/$col.secs")"
	done
	echo
	printf '| scenario |'
	for col in $COLUMNS; do [[ $col == validator ]] && printf ' upstream validator |' || printf ' %s |' "$col"; done
	echo
	printf '|---|'
	for _ in $COLUMNS; do printf -- '---|'; done
	echo
	for t in "${TESTS[@]}"; do
		printf '| %s |' "${t//|/\\|}"
		for col in $COLUMNS; do
			st=$(tap_status "$col" "$t")
			sp=$(steps "$col" "$t")
			printf ' **%s**%s |' "${st//|/\\|}" "${sp:+<br>${sp//|/\\|}}"
		done
		echo
	done
	printf '| e2e: a required plugin restarting in a loop, 200 creations from 4 clients: 0 without the injection (test/e2e) |'
	for col in $COLUMNS; do
		if [[ $col == validator ]]; then printf ' (not run) |'; else printf ' %s |' "$(e2e_cell "$col")"; fi
	done
	echo
	echo
	echo "## Cells that differ between the runtimes"
	echo
	echo "Compared: the verdict and the outcome of every recorded request (not the"
	echo "times) of the columns${COMPARED}."
	echo
	if [[ -n $UNPATCHED ]]; then
		echo "Not compared:${UNPATCHED}: that binary is UNPATCHED upstream (it does not link"
		echo "NRI's required plugins; no patched build existed when this run was made), so it has"
		echo "no policy: its column shows the runtime's behaviour without nrigate, the"
		echo "baseline the patch series changes (the scenarios that pass there are those"
		echo "whose outcome is the same without any policy)."
		echo
	fi
	ndiff=0
	for t in "${TESTS[@]}"; do
		ref="" differ=0
		for col in $COMPARED; do
			st=$(tap_status "$col" "$t")
			st=${st%%:*}
			v="$st|$(outcomes "$col" "$t")"
			if [[ -z $ref ]]; then ref=$v; elif [[ $v != "$ref" ]]; then differ=1; fi
		done
		((differ)) || continue
		ndiff=$((ndiff + 1))
		why="UNEXPLAINED: see the cells above and the report of this run."
		for k in "${!EXPLAIN[@]}"; do [[ $t == "$k"* ]] && why=${EXPLAIN[$k]}; done
		echo "- **$t**: $why"
	done
	ref="" differ=0
	for col in $COMPARED; do
		v=$(e2e_cell "$col" | sed 's/<br>.*//')
		if [[ -z $ref ]]; then ref=$v; elif [[ $v != "$ref" ]]; then differ=1; fi
	done
	if ((differ)); then
		ndiff=$((ndiff + 1))
		echo "- **e2e restart loop**: UNEXPLAINED: see the cells above and the report of this run."
	fi
	((ndiff)) || echo "None: every scenario has the same verdict and the same outcomes on${COMPARED}."
	echo
	echo "## Refusal texts"
	echo
	echo "The first refusal of each scenario on each runtime, as crictl printed the"
	echo "gRPC message (the runtimes may wrap NRI's text in their own prefix)."
	echo
	for t in "${TESTS[@]}"; do
		first=1
		for col in $COLUMNS; do
			msg=$(jq -r --arg t "$t" 'select(.test == $t and .outcome != "created") | .message' "$WORK/$col.jsonl" | head -1)
			[[ -n $msg ]] || continue
			if ((first)); then echo "- $t"; first=0; fi
			printf '  - %s: `%s`\n' "$([[ $col == validator ]] && echo "upstream validator" || echo "$col")" "${msg//\`/\'}"
		done
	done
	echo
	echo "## Times to refuse"
	echo
	echo "Median seconds of the refused requests per column (a refusal after a"
	echo "registration_wait includes the wait; one after a hung plugin includes the"
	echo "1 s request timeout)."
	echo
	printf '| |'; for col in $COLUMNS; do printf ' %s |' "$col"; done; echo
	printf '|---|'; for _ in $COLUMNS; do printf -- '---:|'; done; echo
	printf '| refused requests (median s, count) |'
	for col in $COLUMNS; do
		jq -s -r '[.[] | select(.outcome == "refused") | .seconds] | sort |
			if length == 0 then " - |" else " \(.[length/2|floor]) (\(length)) |" end' "$WORK/$col.jsonl" | tr -d '\n'
	done
	echo
} >"$OUT"
echo "parity: wrote $OUT${PARITY_KEEP:+ (work directory $WORK)}" >&2
