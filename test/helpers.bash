#!/usr/bin/env bash
# Generic helpers shared by the BATS suites. Load with `load helpers`.
# Suites that need more (a running daemon, crictl) add their helpers below
# or in their own files; keep these generic.

# Repository root and the binaries `make build` produced.
REPO_ROOT=${REPO_ROOT:-$(cd "$BATS_TEST_DIRNAME/.." && pwd)}
NRIGATE_BINARY=${NRIGATE_BINARY:-$REPO_ROOT/bin/nrigate}
FIXTURES=${FIXTURES:-$REPO_ROOT/test/fixtures}

# setup_tmpdir makes a short private directory in $TESTDIR (short because
# unix socket paths must stay under 108 bytes) and removes it on teardown
# through cleanup_tmpdir.
setup_tmpdir() {
	TESTDIR=$(mktemp -d /tmp/nrig.XXXXXX)
	export TESTDIR
}

cleanup_tmpdir() {
	if [[ -n ${TESTDIR:-} && -d $TESTDIR ]]; then
		rm -rf "$TESTDIR"
	fi
}

# require_binary skips the test when the nrigate binary was not built.
require_binary() {
	[[ -x $NRIGATE_BINARY ]] || skip "$NRIGATE_BINARY not built (run make build)"
}

# require_root skips the test unless it runs as root.
require_root() {
	[[ $(id -u) -eq 0 ]] || skip "needs root"
}

# require_cmd skips the test unless every named command is in PATH.
require_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null || skip "$c not installed (run make install-deps)"
	done
}

# wait_for TIMEOUT_SECONDS CMD...: retry CMD every 50 ms until it succeeds;
# fail after the timeout.
wait_for() {
	local timeout=$1
	shift
	local deadline=$((SECONDS + timeout))
	until "$@"; do
		if ((SECONDS >= deadline)); then
			echo "timed out after ${timeout}s waiting for: $*" >&2
			return 1
		fi
		sleep 0.05
	done
}

# assert_contains HAYSTACK NEEDLE: fail, showing both, unless HAYSTACK
# contains NEEDLE.
assert_contains() {
	if [[ $1 != *"$2"* ]]; then
		printf 'expected to find:\n  %s\nin:\n%s\n' "$2" "$1" >&2
		return 1
	fi
}

# assert_not_contains HAYSTACK NEEDLE
assert_not_contains() {
	if [[ $1 == *"$2"* ]]; then
		printf 'did not expect:\n  %s\nin:\n%s\n' "$2" "$1" >&2
		return 1
	fi
}

# toml_value FILE KEY: the value of KEY (first match, as written) in a
# file printed by `nrigate config`, within the table given as $3 if set.
toml_value() {
	local file=$1 key=$2 table=${3:-}
	awk -v key="$key" -v table="$table" '
		/^\[/ { cur = substr($0, 2, length($0) - 2); next }
		table != "" && cur != table { next }
		index($0, key " = ") == 1 { print substr($0, length(key) + 4); exit }
	' "$file"
}
