#!/usr/bin/env bats
# Patched CRI-O: bad policy input and faults (issue 10, "bad input and faults").

load crio-helpers

setup() {
	crio_require
}

teardown() {
	crio_teardown
}

@test "a bad policy value stops crio and crio config, naming the key and the value" {
	crio_setup '[crio.nri.policy.plugins."nri-faulty"]
fail_policy = "maybe"'
	run "$BINDIR/crio" --config "$CRIO_CONFIG" --config-dir "$CRIO_CONFIG_DIR" config
	[ "$status" -ne 0 ]
	[[ $output == *'crio.nri.policy.plugins.\"nri-faulty\".fail_policy = \"maybe\"'* ]]
	[[ $output == *fail*ignore* ]]
	[[ $output != *"[crio.nri.policy]"* ]]

	run timeout 20 "$BINDIR/crio" --config "$CRIO_CONFIG" --config-dir "$CRIO_CONFIG_DIR"
	[ "$status" -ne 0 ] && [ "$status" -ne 124 ]
	[[ $output == *'crio.nri.policy.plugins.\"nri-faulty\".fail_policy = \"maybe\"'* ]]
	[ ! -S "$CRI_SOCK" ]
}

@test "a bad registration_wait and a bad selector are named with their values" {
	crio_setup '[crio.nri.policy.plugins."guard"]
registration_wait = "soon"'
	run "$BINDIR/crio" --config "$CRIO_CONFIG" --config-dir "$CRIO_CONFIG_DIR" config
	[ "$status" -ne 0 ]
	[[ $output == *registration_wait* && $output == *soon* ]]

	printf '[crio.nri.policy.plugins."guard"]\npod_selector = "a in ("\n' >"$CRIO_CONFIG_DIR/10-policy.conf"
	run "$BINDIR/crio" --config "$CRIO_CONFIG" --config-dir "$CRIO_CONFIG_DIR" config
	[ "$status" -ne 0 ]
	[[ $output == *'crio.nri.policy.plugins.\"guard\".pod_selector'* && $output == *'a in ('* ]]
	# The file which sets the value is named.
	[[ $output == *"$CRIO_CONFIG_DIR/10-policy.conf: crio.nri.policy.plugins"* ]]
}

@test "a policy naming plugins with enable_nri = false stops crio" {
	crio_setup '[crio.nri]
enable_nri = false
[crio.nri.policy.plugins."guard"]
fail_policy = "fail"'
	run timeout 20 "$BINDIR/crio" --config "$CRIO_CONFIG" --config-dir "$CRIO_CONFIG_DIR"
	[ "$status" -ne 0 ] && [ "$status" -ne 124 ]
	[[ $output == *crio.nri.policy.plugins* && $output == *'enable_nri = false'* ]]
}

@test "crio config prints the policy tables of the drop-ins" {
	crio_setup '[crio.nri.policy.plugins."nri-faulty"]
fail_policy = "fail"
registration_wait = "3s"
exclude_namespaces = ["system"]'
	run "$BINDIR/crio" --config "$CRIO_CONFIG" --config-dir "$CRIO_CONFIG_DIR" config
	[ "$status" -eq 0 ]
	[[ $output == *'[crio.nri.policy.plugins."nri-faulty"]'* ]]
	[[ $output == *'registration_wait = "3s"'* ]]
	[[ $output == *'exclude_namespaces = ["system"]'* ]]
}

@test "a bad SIGHUP reload keeps the old policy and logs why" {
	crio_setup '[crio.nri.policy.plugins."nri-faulty"]
fail_policy = "fail"'
	crio_start
	printf '[crio.nri.policy.plugins."nri-faulty"]\nfail_policy = "maybe"\n' >"$CRIO_CONFIG_DIR/10-policy.conf"
	kill -HUP "$CRIO_PID"
	wait_for grep -q 'keeping the NRI plugin policy in force.*fail_policy = \\"maybe\\"' "$CDIR/crio.log"
	info=$("${CRICTL[@]}" info)
	jq -e '.status.conditions[] | select(.type == "NRIPluginsReady" and .status == false)' <<<"$info"
	jq -e '.nri.plugins[] | select(.key == "nri-faulty" and .fail_policy == "fail")' <<<"$info"
}

@test "kill -9 of crio while a create waits for the plugin leaves nothing behind; the plugin then syncs the survivors" {
	crio_setup '[crio.nri.policy.plugins."nri-faulty"]
fail_policy = "fail"
registration_wait = "30s"
exclude_namespaces = ["system"]'
	crio_start
	# A survivor: a running container in the exempt namespace.
	survivor=$("${CRICTL[@]}" runp "$(pod_json survivor system)")
	sctr=$("${CRICTL[@]}" create "$survivor" "$(ctr_json keeper)" "$BATS_TEST_TMPDIR/survivor-pod.json")
	"${CRICTL[@]}" start "$sctr"
	# A victim: its create waits for the absent plugin, before CRI-O creates
	# anything for it (no name reservation, no storage).
	victim=$("${CRICTL[@]}" runp "$(pod_json victim default)")
	before=$(storage_containers)
	"${CRICTL[@]}" create "$victim" "$(ctr_json app)" "$BATS_TEST_TMPDIR/victim-pod.json" \
		>"$BATS_TEST_TMPDIR/create.out" 2>&1 &
	create_pid=$!
	wait_for grep -q 'waits for required NRI plugin\|Creating container' "$CDIR/crio.log"
	sleep 1
	kill -0 "$create_pid"
	[ "$(storage_containers)" = "$before" ]
	kill -9 "$CRIO_PID"
	wait "$CRIO_PID" 2>/dev/null || true
	CRIO_PID=
	run wait "$create_pid"
	[ "$status" -ne 0 ]

	crio_start
	[ "$("${CRICTL[@]}" ps -a -q)" = "$sctr" ]
	pods=$("${CRICTL[@]}" pods -q)
	[[ $pods == *"$survivor"* ]]
	# Nothing but the pods and the survivor's container in the store.
	[ "$(storage_containers)" = "$(printf '%s\n' $pods "$sctr" | sort)" ]
	npods=$(wc -l <<<"$pods")

	# The required plugin connects after the restart and is synchronized
	# with the surviving pods and container, then gates as before.
	plugin_start
	wait_for grep -q 'ready (synchronized' "$CDIR/plugin.log"
	grep -q "ready (synchronized $npods pods, 1 containers)" "$CDIR/plugin.log"
	wait_for bash -c "${CRICTL[*]} info | jq -e '.status.conditions[] | select(.type == \"NRIPluginsReady\" and .status)'"
	ctr=$("${CRICTL[@]}" create "$victim" "$BATS_TEST_TMPDIR/app-ctr.json" "$BATS_TEST_TMPDIR/victim-pod.json")
	"${CRICTL[@]}" start "$ctr"
	run "${CRICTL[@]}" exec -s "$ctr" env
	[[ $output == *NRI_FAULTY_ACTED=nri-faulty* ]]
}

@test "crictl stopp of a pod whose container creation waits for the plugin returns at once" {
	crio_setup '[crio.nri.policy.plugins."nri-faulty"]
fail_policy = "fail"
events = ["CreateContainer"]
registration_wait = "30s"'
	crio_start
	pod=$("${CRICTL[@]}" runp "$(pod_json waiter default)")
	"${CRICTL[@]}" create "$pod" "$(ctr_json app)" "$BATS_TEST_TMPDIR/waiter-pod.json" \
		>"$BATS_TEST_TMPDIR/create.out" 2>&1 &
	create_pid=$!
	sleep 1
	kill -0 "$create_pid"
	start=$(date +%s%N)
	"${CRICTL[@]}" stopp "$pod"
	ms=$((($(date +%s%N) - start) / 1000000))
	echo "crictl stopp returned after ${ms} ms while the create waited (registration_wait 30s)" |
		tee -a "${STOPP_REPORT:-/dev/null}" >&3
	# The create still waits: the stop did not wait for it.
	kill -0 "$create_pid"
	((ms < 5000))
	kill "$create_pid" 2>/dev/null || true
}
