#!/usr/bin/env bats
# The patched containerd (bin/containerd from make containerd) with NRI's
# plugin policy, driven by crictl and the real bin/nri-faulty: a bad policy
# stops it with NRI's text below containerd's table, an absent required
# plugin refuses a create with FailedPrecondition and leaves nothing behind,
# NRIPluginsReady follows the plugin, and the plugin's adjustment reaches the
# container. test/policy.bats runs the full policy suite on it
# (RUNTIME=containerd); containerd's own integration/nri_test.go cases run
# with make containerd-integration.

bats_require_minimum_version 1.5.0

RUNTIME=containerd
load "$BATS_TEST_DIRNAME/../../../test/helpers"

# setup_file, setup and teardown: the helpers' defaults.

# guard_policy FAIL_POLICY: the policy of plugin guard, in CRI-O syntax
# (the one description every runtime's config is generated from).
guard_policy() {
	printf '[crio.nri.policy.plugins."guard"]\nfail_policy = "%s"\n' "$1"
}

# snapshots: the number of snapshots in the CRI namespace.
snapshots() {
	"$RUNTIME_BINDIR/ctr" --address "$CRI_SOCK" -n k8s.io snapshots ls | tail -n +2 | grep -c . || true
}

# snapshots_are N (for wait_for: containerd's GC removes leased snapshots).
snapshots_are() {
	[ "$(snapshots)" = "$1" ]
}

@test "containerd: a bad policy value stops it, naming the key, the value and what is allowed in NRI's text" {
	start_runtime "$(guard_policy bogus)" && started=yes || started=no
	[ "$started" = no ]
	# NRI's FieldError text below containerd's table, as CRI-O prints it
	# below crio.nri.policy.
	assert_contains "$(unquote_log "$TESTDIR/daemon.log")" \
		'plugins."io.containerd.nri.v1.nri".policy.plugins."guard".fail_policy = "bogus": allowed values are "fail", "ignore" (alias "skip")'
	# The last line is containerd's fatal error, not a warning it went on after.
	assert_contains "$(tail -1 "$TESTDIR/daemon.log")" "level=fatal"
	assert_contains "$(tail -1 "$TESTDIR/daemon.log" | unquote_log)" 'policy.plugins."guard".fail_policy = "bogus"'
}

@test "containerd: an unknown key in a policy table is warned about, naming it" {
	# containerd's own decoding of a plugin's table (DisallowUnknownFields,
	# then a warning per key): a misspelt key must not go unnoticed.
	start_runtime "$(guard_policy fail)
registration_wiat = \"5s\""
	# One warning naming the key and the plugin.
	unquote_log "$TESTDIR/daemon.log" | grep 'level=warning msg="Ignoring unknown key in TOML for plugin"' |
		grep 'key="policy plugins guard registration_wiat"' | grep -q 'plugin=io.containerd.nri.v1.nri'
}

@test "containerd: a policy naming plugins with NRI disabled stops it" {
	ENABLE_NRI=false runtime_config "$(guard_policy fail)"
	run -1 timeout 20 "$RUNTIME_BINDIR/containerd" --config "$CONTAINERD_CONFIG"
	assert_contains "$(unquote_log <<<"$output")" 'plugins."io.containerd.nri.v1.nri".policy.plugins = ["guard"]: NRI is disabled (disable = true)'
}

@test "containerd: an absent required plugin refuses crictl create with FailedPrecondition naming it; nothing is left" {
	start_runtime "$(guard_policy fail)"
	pod=$(nri_pod_config web)
	pod_id=$(crictl_cmd runp "$pod")
	before=$(snapshots)
	[ "$before" -ge 2 ] # the image's layer and the pause container's
	cfg=$(ctr_config app sh -c 'exec sleep 1000')
	run --separate-stderr crictl_cmd create "$pod_id" "$cfg" "$pod"
	[ "$status" -ne 0 ]
	assert_contains "$stderr" "code = FailedPrecondition"
	assert_contains "$stderr" 'refusing CreateContainer of container \"app\" in pod default/web: required NRI plugin \"guard\" is not registered'
	assert_contains "$stderr" "start or fix the plugin"
	# No container in CRI, none in containerd's metadata, no snapshot.
	[ -z "$(crictl_cmd ps -aq)" ]
	[ "$("$RUNTIME_BINDIR/ctr" --address "$CRI_SOCK" -n k8s.io containers ls -q | grep -vc "^$pod_id")" = 0 ]
	wait_for 10 snapshots_are "$before"
}

@test "containerd: a refused RunPodSandbox leaves no sandbox, no network namespace" {
	start_runtime "$(guard_policy fail; echo 'events = ["RunPodSandbox", "CreateContainer"]')"
	pod=$(nri_pod_config web)
	run --separate-stderr crictl_cmd runp "$pod"
	[ "$status" -ne 0 ]
	assert_contains "$stderr" "code = FailedPrecondition"
	assert_contains "$stderr" 'refusing RunPodSandbox of pod default/web: required NRI plugin \"guard\" is not registered'
	[ -z "$(crictl_cmd pods -q)" ]
	[ -z "$("$RUNTIME_BINDIR/ctr" --address "$CRI_SOCK" -n k8s.io containers ls -q)" ]
	# Refused before anything was created: no network namespace (the
	# directory containerd creates them in may not even exist).
	[ -z "$(ls -A "$TESTDIR/containerd/state/io.containerd.grpc.v1.cri/netns" 2>/dev/null)" ]
	# Only the image's committed layer is left (containerd's GC removes the
	# pause container's leased snapshot).
	wait_for 10 snapshots_are 1
}

@test "containerd: NRIPluginsReady is false, then true when nri-faulty connects; RuntimeReady untouched; crictl info has the nri entry" {
	start_runtime "$(guard_policy fail)"
	[ "$(nri_condition NRIPluginsReady)" = false ]
	[ "$(nri_condition RuntimeReady)" = true ]
	info=$(crictl_cmd info)
	[ "$(jq -r '.status.conditions[] | select(.type == "NRIPluginsReady") | .reason' <<<"$info")" = NRIPluginsNotReady ]
	assert_contains "$(jq -r '.status.conditions[] | select(.type == "NRIPluginsReady") | .message' <<<"$info")" '"guard"'
	[ "$(jq -r '.nri.plugins[] | select(.key == "guard") | .state' <<<"$info")" = "not registered" ]

	start_faulty
	wait_for 10 nri_condition_is NRIPluginsReady true
	[ "$(nri_condition RuntimeReady)" = true ]
	[ "$(crictl_cmd info | jq -r '.nri.plugins[] | select(.key == "guard") | .state')" = ready ]
}

# guarded_container: containerd with guard required and running, and a
# container app created in a pod web; sets ID.
guarded_container() {
	start_runtime "$(guard_policy fail)"
	start_faulty
	wait_for 10 nri_condition_is NRIPluginsReady true
	local pod pod_id
	pod=$(nri_pod_config web)
	pod_id=$(crictl_cmd runp "$pod")
	ID=$(crictl_cmd create "$pod_id" "$(ctr_config app sh -c 'exec sleep 1000')" "$pod")
}

@test "containerd: the required plugin's adjustment reaches the container (NRI_FAULTY_ACTED)" {
	guarded_container
	[ "$(injected_env "$ID")" = guard ]
}

@test "containerd: after kill -9 and a restart, NRIPluginsReady is false until the plugin is back, which is synchronized with the surviving pod and container" {
	guarded_container
	crictl_cmd start "$ID" >/dev/null
	stop_faulty
	stop_daemon KILL

	runtime_start
	[ "$(nri_condition NRIPluginsReady)" = false ]
	start_faulty
	wait_for 10 nri_condition_is NRIPluginsReady true
	# The last ready line is the restarted plugin's: one pod, one container.
	[ "$(grep 'ready (synchronized' "$TESTDIR/faulty.log" | tail -1 | sed 's/^[^ ]* //')" = "ready (synchronized 1 pods, 1 containers)" ]
	[ "$(crictl_cmd inspect -o go-template --template '{{.status.state}}' "$ID")" = CONTAINER_RUNNING ]
}

@test "containerd: with a required network plugin absent it still notifies READY=1 and keeps serving; it has no watchdog" {
	# containerd speaks sd_notify (cmd/containerd/command/notify_systemd.go):
	# READY=1 once its plugins are up, STOPPING=1 at shutdown, no WATCHDOG=1,
	# so the plugin's conditions cannot get it restarted by systemd.
	start_notify_listener
	NOTIFY_SOCKET=$NOTIFY_SOCK WATCHDOG_USEC=2000000 start_runtime "$(guard_policy fail; echo 'readiness = "network"')"
	wait_for 10 notified READY=1
	[ "$(nri_condition NRIPluginsReady)" = false ]
	[ "$(nri_condition NetworkReady)" = false ]
	[ "$(nri_condition RuntimeReady)" = true ]
	start_faulty
	wait_for 10 nri_condition_is NetworkReady true
	kill -0 "$DAEMON_PID"
	! grep -q "WATCHDOG=1" "$TESTDIR/notify.log"
}
