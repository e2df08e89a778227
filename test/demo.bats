#!/usr/bin/env bats
# make demo in CI: hack/demo.sh must pass every step (it starts and
# removes its own daemon, plugin and temp directory).

load helpers

@test "hack/demo.sh passes every step" {
	require_binary
	require_root
	require_runtime
	require_cmd crictl runc jq ip
	[[ -x $NRI_FAULTY_BINARY ]] || ci_skip "$NRI_FAULTY_BINARY not built (run make build)"
	[[ -x /bin/busybox ]] || ci_skip "busybox-static not installed (run make install-deps)"
	export PATH=$PATH:$(go env GOPATH 2>/dev/null)/bin
	run timeout 90 bash "$REPO_ROOT/hack/demo.sh"
	echo "$output"
	[ "$status" -eq 0 ]
	assert_contains "$output" "demo passed: every step behaved as described"
	assert_not_contains "$output" "FAILED"
}
