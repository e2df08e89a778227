#!/usr/bin/env bash
# test/install/recipe.sh FILE TAG...: the shell blocks of FILE (docs/install.md)
# that carry every TAG, in document order, as one script, each block
# preceded by a comment naming its line, for test/install.bats to run as
# written. A block is tagged by the HTML comment on the line before its
# fence, which a reader of the rendered page does not see:
#
#   <!-- test: crio verify -->
#   ```sh
#   ...
#   ```
#
# Every ```sh block of FILE must carry such a line: "test: TAG..." (run by
# the test) or "not run: REASON" (a command the test cannot run here, such
# as kubectl against a cluster, with the reason); an unmarked block, a
# marker without a block, or a selection of no block is an error.
set -euo pipefail

[[ $# -ge 2 ]] || { echo "usage: $0 FILE TAG..." >&2; exit 2; }
file=$1
shift
awk -v tags="$*" -v file="$file" '
	BEGIN { ntags = split(tags, want, " ") }
	function fail(msg) { print file ":" NR ": " msg > "/dev/stderr"; bad = 1; exit 1 }
	inblock && /^```[ \t]*$/ { inblock = 0; if (take) print ""; next }
	inblock { if (take) print; next }
	/^<!-- (test: [a-z -]+|not run: .*) -->$/ {
		if (marker) fail("marker of line " markerline " has no ```sh block after it")
		marker = $0; markerline = NR; next
	}
	/^```sh[ \t]*$/ {
		if (!marker || markerline != NR - 1) fail("```sh block without a <!-- test: TAG... --> or <!-- not run: REASON --> line before it")
		inblock = 1; take = 0
		if (marker ~ /^<!-- test: /) {
			m = marker; sub(/^<!-- test: /, "", m); sub(/ -->$/, "", m)
			n = split(m, have, " "); take = 1
			for (i = 1; i <= ntags; i++) {
				found = 0
				for (j = 1; j <= n; j++) if (have[j] == want[i]) found = 1
				if (!found) take = 0
			}
		}
		if (take) { print "# " file ":" NR; blocks++ }
		marker = ""; next
	}
	marker { fail("marker of line " markerline " is not followed by a ```sh block") }
	END {
		if (bad) exit 1
		if (inblock) { print file ": unterminated ```sh block" > "/dev/stderr"; exit 1 }
		if (!blocks) { print file ": no block tagged \"" tags "\"" > "/dev/stderr"; exit 1 }
	}
' "$file"
