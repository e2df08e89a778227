#!/usr/bin/env bats
# nrigate as a CRI runtime driven by crictl: images from an OCI archive,
# pods without infra containers, containers on conmon + runc.

bats_require_minimum_version 1.5.0

load helpers

setup_file() {
	setup_test_image_file
}

setup() {
	require_daemon_suite
	setup_tmpdir
	start_nrigate
}

teardown() {
	cleanup_nrigate
	cleanup_tmpdir
}

pull_test_image() {
	crictl_cmd pull "oci-archive:$TEST_IMAGE" >/dev/null
}

# container_state ID STATE: succeed if the container reports STATE.
container_state() {
	[ "$(crictl_cmd inspect "$1" | jq -r .status.state)" = "$2" ]
}

@test "crictl info reports RuntimeReady, NetworkReady and the effective config" {
	run --separate-stderr crictl_cmd info
	[ "$status" -eq 0 ]
	[ "$(jq -r '.status.conditions[] | select(.type == "RuntimeReady") | .status' <<<"$output")" = true ]
	[ "$(jq -r '.status.conditions[] | select(.type == "NetworkReady") | .status' <<<"$output")" = true ]
	[ "$(jq -r .config.Crio.API.Listen <<<"$output")" = "$CRI_SOCK" ]
	run --separate-stderr crictl_cmd version
	assert_contains "$output" "RuntimeName:  nrigate"
}

@test "pull the test image from its OCI archive, list, inspect and remove it" {
	run --separate-stderr crictl_cmd pull "oci-archive:$TEST_IMAGE"
	[ "$status" -eq 0 ]
	run --separate-stderr crictl_cmd images -o json
	[ "$status" -eq 0 ]
	tags=$(jq -r '.images[].repoTags[]' <<<"$output")
	assert_contains "$tags" "localhost/busybox:latest"
	assert_not_contains "$tags" "oci-archive"
	run --separate-stderr crictl_cmd inspecti localhost/busybox
	[ "$status" -eq 0 ]
	[ "$(jq -r '.info.imageSpec.config.Cmd[0]' <<<"$output")" = sh ]
	run --separate-stderr crictl_cmd imagefsinfo
	[ "$status" -eq 0 ]
	run --separate-stderr crictl_cmd rmi localhost/busybox:latest
	[ "$status" -eq 0 ]
	run --separate-stderr crictl_cmd images -q
	[ -z "$output" ]
}

@test "pulling from an unreachable registry fails with the reference in the error" {
	run --separate-stderr crictl_cmd pull 127.0.0.1:1/nothing/here:v1
	[ "$status" -ne 0 ]
	assert_contains "$stderr" "127.0.0.1:1/nothing/here:v1"
}

@test "runp, create, start, ps, inspect, exec, logs, stop, rm, rmp" {
	pull_test_image
	pod=$(pod_config web)
	ctr=$(ctr_config web sh -c 'echo hello from web; hostname; exec sleep 1000')
	run --separate-stderr crictl_cmd runp "$pod"
	[ "$status" -eq 0 ]
	pid=$output
	[ "$(crictl_cmd inspectp "$pid" | jq -r .status.state)" = SANDBOX_READY ]
	[ -e "/var/run/netns/nrigate-${pid:0:12}" ]

	run --separate-stderr crictl_cmd create "$pid" "$ctr" "$pod"
	[ "$status" -eq 0 ]
	cid=$output
	container_state "$cid" CONTAINER_CREATED
	crictl_cmd start "$cid"
	container_state "$cid" CONTAINER_RUNNING

	run --separate-stderr crictl_cmd ps -q
	[ "$output" = "$cid" ]
	run --separate-stderr crictl_cmd pods -q
	[ "$output" = "$pid" ]

	run --separate-stderr crictl_cmd inspect "$cid"
	[ "$(jq -r .status.metadata.name <<<"$output")" = web ]
	[ "$(jq -r .status.logPath <<<"$output")" = "$TESTDIR/logs/web/web.log" ]
	[ "$(jq -r '.info.runtimeSpec.annotations["io.kubernetes.pod.namespace"]' <<<"$output")" = nrigate-test ]

	# The pod's own network namespace has loopback up and nothing else.
	run --separate-stderr crictl_cmd exec -s "$cid" ip -o link show
	[ "$status" -eq 0 ]
	assert_contains "$output" "lo:"
	assert_contains "$output" "UP"
	[ "$(wc -l <<<"$output")" -eq 1 ]
	# crictl exec -s reports a command's non-zero exit code as an error.
	run --separate-stderr crictl_cmd exec -s "$cid" sh -c 'exit 3'
	[ "$status" -ne 0 ]
	assert_contains "$stderr" "exited with 3"

	wait_for 5 grep -q "web-host" "$TESTDIR/logs/web/web.log"
	run --separate-stderr crictl_cmd logs "$cid"
	[ "$status" -eq 0 ]
	assert_contains "$output" "hello from web"
	assert_contains "$output" "web-host"
	# The file is in the CRI log format conmon writes.
	grep -Eq '^[0-9T:.+Z-]+ stdout F hello from web$' "$TESTDIR/logs/web/web.log"

	run --separate-stderr crictl_cmd update --memory 67108864 "$cid"
	[ "$status" -eq 0 ]

	run --separate-stderr crictl_cmd stop --timeout 1 "$cid"
	[ "$status" -eq 0 ]
	container_state "$cid" CONTAINER_EXITED
	run --separate-stderr crictl_cmd rm "$cid"
	[ "$status" -eq 0 ]
	run --separate-stderr crictl_cmd ps -aq
	[ -z "$output" ]

	crictl_cmd stopp "$pid"
	[ ! -e "/var/run/netns/nrigate-${pid:0:12}" ]
	crictl_cmd rmp "$pid"
	run --separate-stderr crictl_cmd pods -q
	[ -z "$output" ]
	# Nothing of the container is left in the runtime.
	[ -z "$(runc --root "$TESTDIR/runc" list -q)" ]
}

@test "a container that exits 7 shows exit code 7" {
	pull_test_image
	pod=$(pod_config exiter)
	pid=$(crictl_cmd runp "$pod")
	cid=$(crictl_cmd create "$pid" "$(ctr_config seven sh -c 'exit 7')" "$pod")
	crictl_cmd start "$cid"
	wait_for 10 container_state "$cid" CONTAINER_EXITED
	run --separate-stderr crictl_cmd inspect "$cid"
	[ "$(jq -r .status.exitCode <<<"$output")" -eq 7 ]
	[ "$(jq -r .status.reason <<<"$output")" = Error ]
	run --separate-stderr crictl_cmd ps -a --state exited -q
	[ "$output" = "$cid" ]
}

@test "a host-network pod shares the node's network" {
	pull_test_image
	pod=$(pod_config hostnet hostnet)
	pid=$(crictl_cmd runp "$pod")
	[ ! -e "/var/run/netns/nrigate-${pid:0:12}" ]
	cid=$(crictl_cmd create "$pid" "$(ctr_config h sleep 1000)" "$pod")
	crictl_cmd start "$cid"
	run --separate-stderr crictl_cmd exec -s "$cid" ip -o link show
	[ "$status" -eq 0 ]
	[ "$(wc -l <<<"$output")" -eq "$(ip -o link show | wc -l)" ]
}

@test "bad pod and container configs are rejected with a clear message and leave nothing" {
	pull_test_image
	pod=$(pod_config bad)
	run --separate-stderr crictl_cmd runp --runtime kata "$pod"
	[ "$status" -ne 0 ]
	assert_contains "$stderr" 'InvalidArgument desc = runtime handler'
	assert_contains "$stderr" 'kata'
	assert_contains "$stderr" 'is not configured'
	run --separate-stderr crictl_cmd pods -q
	[ -z "$output" ]

	pid=$(crictl_cmd runp "$pod")
	run --separate-stderr crictl_cmd runp "$pod"
	[ "$status" -ne 0 ]
	assert_contains "$stderr" "AlreadyExists"

	ctr=$(ctr_config badmount sleep 10)
	jq '.mounts = [{container_path: "/data", host_path: "/nonexistent/nrigate"}]' "$ctr" >"$TESTDIR/badmount.json"
	run --separate-stderr crictl_cmd create "$pid" "$TESTDIR/badmount.json" "$pod"
	[ "$status" -ne 0 ]
	assert_contains "$stderr" "InvalidArgument"
	assert_contains "$stderr" "/nonexistent/nrigate"

	jq '.image.image = "localhost/not-pulled:1"' "$ctr" >"$TESTDIR/noimage.json"
	run --separate-stderr crictl_cmd create "$pid" "$TESTDIR/noimage.json" "$pod"
	[ "$status" -ne 0 ]
	assert_contains "$stderr" 'NotFound desc = image'
	assert_contains "$stderr" 'localhost/not-pulled:1'
	assert_contains "$stderr" 'not found: pull it first'

	run --separate-stderr crictl_cmd ps -aq
	[ -z "$output" ]
	[ -z "$(runc --root "$TESTDIR/runc" list -q)" ]
	# The failed creates released their names and storage: the same name works.
	cid=$(crictl_cmd create "$pid" "$ctr" "$pod")
	[ -n "$cid" ]
	[ "$(jq length "$TESTDIR/root/overlay-containers/containers.json")" -eq 1 ]

	run --separate-stderr crictl_cmd exec -s nosuchcontainer true
	[ "$status" -ne 0 ]
	assert_contains "$stderr" 'not found'
}

@test "SIGTERM stops the daemon cleanly and leaves containers running" {
	pull_test_image
	pod=$(pod_config survivor)
	pid=$(crictl_cmd runp "$pod")
	cid=$(crictl_cmd create "$pid" "$(ctr_config s sleep 1000)" "$pod")
	crictl_cmd start "$cid"
	stop_nrigate TERM
	assert_contains "$(cat "$TESTDIR/daemon.log")" "nrigate stopped"
	[ ! -S "$CRI_SOCK" ]
	[ "$(runc --root "$TESTDIR/runc" state "$cid" | jq -r .status)" = running ]
}
