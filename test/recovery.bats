#!/usr/bin/env bats
# Restart recovery: nrigate killed with SIGKILL and started again on the same
# root and runroot lists the same pods and containers with their real states
# and exit codes, keeps them usable, resynchronizes NRI plugins with them and
# cleans up creates the kill interrupted.

bats_require_minimum_version 1.5.0

load helpers

setup_file() {
	setup_test_image_file
}

setup() {
	require_daemon_suite
	setup_tmpdir
}

teardown() {
	stop_faulty
	cleanup_nrigate
	cleanup_tmpdir
}

# container_state ID STATE: succeed if the container reports STATE.
container_state() {
	[ "$(crictl_cmd inspect "$1" | jq -r .status.state)" = "$2" ]
}

# containers_json: the storage's list of container root filesystems.
containers_json() {
	local f=$TESTDIR/root/overlay-containers/containers.json
	[[ -f $f ]] || f=$TESTDIR/root/vfs-containers/containers.json
	echo "$f"
}

# storage_containers: how many root filesystems the storage holds.
storage_containers() {
	local f
	f=$(containers_json)
	if [[ -f $f ]]; then jq length "$f"; else echo 0; fi
}

# assert_nothing_left: no pod, container, runc container, root filesystem,
# record or pod netns of this test remains.
assert_nothing_left() {
	[ -z "$(crictl_cmd pods -q)" ]
	[ -z "$(crictl_cmd ps -aq)" ]
	[ -z "$(runc --root "$TESTDIR/runc" list -q)" ]
	[ "$(storage_containers)" -eq 0 ]
	[ -z "$(ls "$TESTDIR/run/nrigate/records")" ]
}

@test "after kill -9 and a restart the pods and containers are back with their states and exit codes, and still work" {
	start_nrigate
	crictl_cmd pull "oci-archive:$TEST_IMAGE" >/dev/null
	pod=$(pod_config rec)
	pid=$(crictl_cmd runp "$pod")
	run_id=$(crictl_cmd create "$pid" "$(ctr_config sleeper sleep 1000)" "$pod")
	crictl_cmd start "$run_id" >/dev/null
	exit_id=$(crictl_cmd create "$pid" "$(ctr_config exit5 sh -c 'exit 5')" "$pod")
	crictl_cmd start "$exit_id" >/dev/null
	# Killed at once: exit5 exits around the kill, most likely after it.
	stop_nrigate KILL
	wait_for 10 test -s "$TESTDIR/run/nrigate/exits/$exit_id"

	start_nrigate
	assert_contains "$(cat "$TESTDIR/daemon.log")" "recovered state"
	[ "$(crictl_cmd pods -o json | jq -r '.items[] | .id + " " + .state')" = "$pid SANDBOX_READY" ]
	[ "$(crictl_cmd ps -a -o json | jq '.containers | length')" -eq 2 ]
	container_state "$run_id" CONTAINER_RUNNING
	container_state "$exit_id" CONTAINER_EXITED
	[ "$(crictl_cmd inspect "$exit_id" | jq .status.exitCode)" -eq 5 ]
	run --separate-stderr crictl_cmd ps -a --state exited -q
	[ "$output" = "$exit_id" ]
	# The names stay reserved.
	run --separate-stderr crictl_cmd runp "$pod"
	[ "$status" -ne 0 ]
	assert_contains "$stderr" "already reserved"

	run --separate-stderr crictl_cmd exec -s "$run_id" echo alive
	[ "$status" -eq 0 ]
	[ "$output" = alive ]
	crictl_cmd stop -t 1 "$run_id" >/dev/null
	container_state "$run_id" CONTAINER_EXITED
	crictl_cmd rm "$run_id" "$exit_id" >/dev/null
	crictl_cmd stopp "$pid" >/dev/null
	crictl_cmd rmp "$pid" >/dev/null
	assert_nothing_left
	[ ! -e "/var/run/netns/nrigate-${pid:0:12}" ]
}

@test "a create killed in its NRI hook is cleaned up at the next start, not listed" {
	start_nrigate_nri "$(printf '[crio.nri.policy.plugins.guard]\nfail_policy = "fail"\n')"
	crictl_cmd pull "oci-archive:$TEST_IMAGE" >/dev/null
	echo ok >"$TESTDIR/control"
	start_faulty --control "$TESTDIR/control"
	wait_for 10 guard_ready
	pod=$(nri_pod_config web)
	pid=$(crictl_cmd runp "$pod")
	# The plugin now hangs on CreateContainer, with the root filesystem made.
	echo "hang 30s" >"$TESTDIR/control"
	crictl_cmd create "$pid" "$(ctr_config app sleep 1000)" "$pod" >/dev/null 2>&1 &
	create_pid=$!
	wait_for 10 grep -q "hang CreateContainer" "$TESTDIR/faulty.log"
	stop_nrigate KILL
	wait "$create_pid" || true
	stop_faulty
	# What the kill left: a record marked creating and its root filesystem.
	[ "$(jq -s '[.[] | select(.creating == true)] | length' "$TESTDIR"/run/nrigate/records/ctr-*.json)" -eq 1 ]
	[ "$(storage_containers)" -eq 1 ]

	echo ok >"$TESTDIR/control"
	start_nrigate_nri "$(printf '[crio.nri.policy.plugins.guard]\nfail_policy = "fail"\n')"
	# The required plugin is not back yet: not ready, whatever was before.
	[ "$(nri_condition NRIPluginsReady)" = false ]
	[ "$(crictl_cmd pods -q)" = "$pid" ]
	[ -z "$(crictl_cmd ps -aq)" ]
	[ "$(storage_containers)" -eq 0 ]
	[ "$(ls "$TESTDIR/run/nrigate/records")" = "pod-$pid.json" ]
	start_faulty --control "$TESTDIR/control"
	wait_for 10 guard_ready
	[ "$(nri_condition NRIPluginsReady)" = true ]
	# The same container can be created again: its name was not kept.
	cid=$(crictl_cmd create "$pid" "$(ctr_config app sleep 1000)" "$pod")
	crictl_cmd start "$cid" >/dev/null
	container_state "$cid" CONTAINER_RUNNING
	crictl_cmd rmp -f "$pid" >/dev/null
	assert_nothing_left
}

@test "reconnecting NRI plugins are synchronized with the recovered pod and container" {
	policy=$(printf '[crio.nri.policy.plugins.guard]\nfail_policy = "fail"\n')
	start_nrigate_nri "$policy"
	crictl_cmd pull "oci-archive:$TEST_IMAGE" >/dev/null
	start_faulty
	wait_for 10 guard_ready
	pod=$(nri_pod_config web)
	pid=$(crictl_cmd runp "$pod")
	cid=$(crictl_cmd create "$pid" "$(ctr_config app sleep 1000)" "$pod")
	crictl_cmd start "$cid" >/dev/null
	stop_faulty
	stop_nrigate KILL

	start_nrigate_nri "$policy"
	[ "$(nri_condition NRIPluginsReady)" = false ]
	: >"$TESTDIR/faulty.log"
	start_faulty
	wait_for 10 guard_ready
	[ "$(nri_condition NRIPluginsReady)" = true ]
	assert_contains "$(cat "$TESTDIR/faulty.log")" "ready (synchronized 1 pods, 1 containers)"
	container_state "$cid" CONTAINER_RUNNING
	crictl_cmd rmp -f "$pid" >/dev/null
	assert_nothing_left
}

@test "a RunPodSandbox killed in its NRI hook leaves no pod and no netns after the next start" {
	policy=$(printf '[crio.nri.policy.plugins.guard]\nfail_policy = "fail"\n')
	start_nrigate_nri "$policy"
	echo "hang 30s" >"$TESTDIR/control"
	start_faulty --control "$TESTDIR/control"
	wait_for 10 guard_ready
	crictl_cmd runp "$(nri_pod_config web)" >/dev/null 2>&1 &
	runp_pid=$!
	wait_for 10 grep -q "hang RunPodSandbox" "$TESTDIR/faulty.log"
	stop_nrigate KILL
	wait "$runp_pid" || true
	stop_faulty
	rec=$(echo "$TESTDIR"/run/nrigate/records/pod-*.json)
	[ "$(jq .creating "$rec")" = true ]
	id=$(jq -r .id "$rec")
	[ -e "/var/run/netns/nrigate-${id:0:12}" ]

	start_nrigate_nri "$policy"
	[ -z "$(crictl_cmd pods -q)" ]
	[ ! -e "/var/run/netns/nrigate-${id:0:12}" ]
	[ -z "$(ls "$TESTDIR/run/nrigate/records")" ]
}

# consistent: every root filesystem and runc container belongs to a listed
# container, and no record is still marked creating.
consistent() {
	local listed ids
	listed=$(crictl_cmd ps -aq --no-trunc | sort)
	ids=$(jq -r '.[].id' "$(containers_json)" 2>/dev/null | sort)
	[ "$ids" = "$listed" ] || { echo "storage: $ids, listed: $listed" >&2; return 1; }
	ids=$(runc --root "$TESTDIR/runc" list -q | sort)
	[ "$ids" = "$listed" ] || { echo "runc: $ids, listed: $listed" >&2; return 1; }
	! grep -ls '"creating":true' "$TESTDIR"/run/nrigate/records/*.json
}

@test "killed at several points of a create, the daemon restarts with nothing lost, duplicated or left over" {
	start_nrigate
	crictl_cmd pull "oci-archive:$TEST_IMAGE" >/dev/null
	pod=$(pod_config kills)
	pid=$(crictl_cmd runp "$pod")
	local i delay
	i=0
	for delay in 0.01 0.05 0.1 0.15 0.2 0.3 0.5 1; do
		i=$((i + 1))
		crictl_cmd create "$pid" "$(ctr_config "c$i" sleep 1000)" "$pod" >"$TESTDIR/created" 2>/dev/null &
		create_pid=$!
		sleep "$delay"
		stop_nrigate KILL
		created=
		if wait "$create_pid"; then created=$(cat "$TESTDIR/created"); fi
		start_nrigate
		consistent
		# A create that answered with an ID is not lost.
		if [[ -n $created ]]; then
			assert_contains "$(crictl_cmd ps -aq --no-trunc)" "$created"
		fi
		[ "$(crictl_cmd pods -q)" = "$pid" ]
	done
	echo "containers that survived the kills: $(crictl_cmd ps -aq | wc -l) of $i" >&3
	# Whatever survived works: it starts and is removed with its pod.
	for cid in $(crictl_cmd ps -aq); do
		crictl_cmd start "$cid" >/dev/null
	done
	crictl_cmd rmp -f "$pid" >/dev/null
	assert_nothing_left
}
