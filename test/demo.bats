#!/usr/bin/env bats
# make demo in CI: hack/demo.sh must pass every step on $RUNTIME (it starts
# and removes its own runtime, plugin and temp directory).

load helpers

# setup_file and setup (the prerequisites): the helpers' defaults.

@test "hack/demo.sh passes every step" {
	run timeout 120 bash "$REPO_ROOT/hack/demo.sh"
	echo "$output"
	[ "$status" -eq 0 ]
	assert_contains "$output" "demo passed: every step behaved as described"
	assert_not_contains "$output" "FAILED"
}
