#!/usr/bin/env bats
# The patched containerd (bin/containerd from make containerd) with required
# NRI plugins, driven by crictl and the real bin/nri-faulty: a bad value
# stops it with NRI's text below containerd's key, an absent required plugin
# refuses a create with FailedPrecondition and leaves nothing behind, a failed
# creation is undone once for the plugins that answered it, NRIPluginsReady
# follows the plugin, the plugin's adjustment reaches the container, and a
# containerd killed during a gated request comes back without a pod or
# container the plugin did not act on. test/policy.bats runs the shared
# suite on it (RUNTIME=containerd); containerd's own integration/nri_test.go
# cases run with make containerd-integration.

bats_require_minimum_version 1.5.0

RUNTIME=containerd
load "$BATS_TEST_DIRNAME/../../../test/helpers"

# setup_file, setup and teardown: the helpers' defaults.

# guard_policy FAIL_POLICY: plugin guard required, in CRI-O syntax (the one
# description every runtime's config is generated from).
guard_policy() {
	printf '[crio.nri.required_plugins."guard"]\nfail_policy = "%s"\n' "$1"
}

# snapshots: the number of snapshots in the CRI namespace.
snapshots() {
	"$RUNTIME_BINDIR/ctr" --address "$CRI_SOCK" -n k8s.io snapshots ls | tail -n +2 | grep -c . || true
}

# snapshots_are N (for wait_for: containerd's GC removes leased snapshots).
snapshots_are() {
	[ "$(snapshots)" = "$1" ]
}

# load_failed ID: containerd logged that it failed to load plugin ID.
load_failed() {
	grep 'msg="failed to load plugin"' "$TESTDIR/daemon.log" | grep -q "id=$1 "
}

@test "containerd: a bad value of a required plugin fails the NRI plugin and the CRI plugin that needs it, in NRI's text; containerd runs on without CRI" {
	# containerd's convention for a plugin whose configuration its init
	# rejects: the plugin is not loaded (a warning), nor are the plugins
	# that cannot work without it; containerd serves the others.
	REQUIRE_CRI=false runtime_config "$(guard_policy bogus)"
	PATH=$RUNTIME_BINDIR:$PATH "$RUNTIME_BINDIR/containerd" --config "$CONTAINERD_CONFIG" >>"$TESTDIR/daemon.log" 2>&1 &
	DAEMON_PID=$!
	wait_for 20 load_failed io.containerd.grpc.v1.cri
	# NRI's text below containerd's key, in the NRI plugin's error...
	local text='plugins."io.containerd.nri.v1.nri".required_plugins: invalid required NRI plugin "guard": fail_policy = "bogus": allowed values are "fail" and "ignore"'
	unquote_log "$TESTDIR/daemon.log" | grep 'msg="failed to load plugin"' | grep 'id=io.containerd.nri.v1.nri ' |
		grep -qF "error=\"invalid plugin config: $text\""
	# ... and in the CRI plugin's, which does not run without NRI.
	unquote_log "$TESTDIR/daemon.log" | grep 'msg="failed to load plugin"' | grep 'id=io.containerd.grpc.v1.cri ' |
		grep -qF "error=\"unable to load NRI plugin dependency: invalid plugin config: $text\""
	# (A "!" command mid-test cannot fail it: errexit ignores it.)
	if grep -q "NRI support disabled" "$TESTDIR/daemon.log"; then
		echo "containerd ran on without NRI" >&2
		false
	fi
	# containerd runs, without CRI: nothing creates the pods it would refuse.
	kill -0 "$DAEMON_PID"
	"$RUNTIME_BINDIR/ctr" --address "$CRI_SOCK" version >/dev/null
	run --separate-stderr crictl_cmd info
	[ "$status" -ne 0 ]
	assert_contains "$stderr" "unknown service runtime.v1.RuntimeService"
}

@test "containerd: with the CRI plugin in required_plugins a bad value stops it, naming the plugin, the key, the value and what is allowed" {
	# containerd-test-config.sh lists io.containerd.grpc.v1.cri in
	# required_plugins (REQUIRE_CRI=true), as a Kubernetes node would.
	runtime_config "$(guard_policy bogus)"
	grep -qx 'required_plugins = \["io.containerd.grpc.v1.cri"\]' "$CONTAINERD_CONFIG"
	run -1 timeout 20 "$RUNTIME_BINDIR/containerd" --config "$CONTAINERD_CONFIG"
	# The last line is containerd's error, why it stopped.
	assert_contains "$(tail -1 <<<"$output" | unquote_log)" \
		'load required plugin io.containerd.grpc.v1.cri: unable to load NRI plugin dependency: invalid plugin config: plugins."io.containerd.nri.v1.nri".required_plugins: invalid required NRI plugin "guard": fail_policy = "bogus": allowed values are "fail" and "ignore"'
}

# unknown_key_warned KEY: containerd warned once about KEY of its NRI
# plugin's table (containerd's decoding of a plugin's table:
# DisallowUnknownFields, then a warning per key).
unknown_key_warned() {
	[ "$(unquote_log "$TESTDIR/daemon.log" | grep 'level=warning msg="Ignoring unknown key in TOML for plugin"' |
		grep -F "key=\"$1\"" | grep -c 'plugin=io.containerd.nri.v1.nri')" = 1 ]
}

@test "containerd: a misspelt key in a required plugin's table, in an exemption's table, or a misspelt table name is warned about, naming plugin and key" {
	start_runtime "$(guard_policy fail)
registration_wiat = \"5s\"
match_expressions = [{ key = \"app\", operator = \"Exists\", valuez = [\"guard\"] }]
[[crio.nri.required_plugins.\"guard\".exempt]]
namespace = \"nri-plugins\"
match_labelz = { app = \"guard\" }
annotation = \"example.com/own\"
[crio.nri.required_plugin.\"other\"]
fail_policy = \"fail\"
[plugins.\"io.containerd.nri.v1.nri\".requried_plugins.\"third\"]
fail_policy = \"fail\""
	# A key of a required plugin's table, and of an inline table in it.
	unknown_key_warned "required_plugins guard registration_wiat"
	unknown_key_warned "required_plugins guard match_expressions valuez"
	# A key of an exemption's table.
	unknown_key_warned "required_plugins guard exempt match_labelz"
	# A misspelt table name: required_plugin, requried_plugins.
	unknown_key_warned "required_plugin other"
	unknown_key_warned "requried_plugins third"
	# The tables that were spelt right are in force, the others are not.
	[ "$(crictl_cmd info | jq -r '[.nri.plugins[] | .key] | unique | join(",")')" = guard ]
}

@test "containerd: required plugins with NRI disabled stop it" {
	ENABLE_NRI=false runtime_config "$(guard_policy fail)"
	run -1 timeout 20 "$RUNTIME_BINDIR/containerd" --config "$CONTAINERD_CONFIG"
	assert_contains "$(tail -1 <<<"$output" | unquote_log)" 'load required plugin io.containerd.grpc.v1.cri: unable to load NRI plugin dependency: invalid plugin config: plugins."io.containerd.nri.v1.nri".required_plugins = ["guard"]: NRI plugins are required while NRI is disabled (disable = true): set disable = false or remove the required_plugins tables'
}

@test "containerd: required plugins with the NRI plugin in disabled_plugins stop it, naming the plugins" {
	runtime_config "$(guard_policy fail)"
	# A top-level key, before the first table.
	sed -i 's|^\([[:space:]]*\)version = 3$|&\n\1disabled_plugins = ["io.containerd.nri.v1.nri"]|' "$CONTAINERD_CONFIG"
	grep -q 'disabled_plugins = \["io.containerd.nri.v1.nri"\]' "$CONTAINERD_CONFIG"
	run -1 timeout 20 "$RUNTIME_BINDIR/containerd" --config "$CONTAINERD_CONFIG"
	assert_contains "$(tail -1 <<<"$output" | unquote_log)" 'disabled plugin io.containerd.nri.v1.nri: plugins."io.containerd.nri.v1.nri".required_plugins = ["guard"]: NRI plugins are required while the NRI plugin is in disabled_plugins: remove it from disabled_plugins or remove the required_plugins tables'
}

@test "containerd: required plugins and an NRI that cannot start: it serves no pod" {
	runtime_config "$(guard_policy fail)"
	# The NRI socket's directory is a file.
	touch "$TESTDIR/not-a-dir"
	sed -i "s|^\([[:space:]]*socket_path = \).*|\1\"$TESTDIR/not-a-dir/nri.sock\"|" "$CONTAINERD_CONFIG"
	grep -q "not-a-dir/nri.sock" "$CONTAINERD_CONFIG"
	run timeout 20 "$RUNTIME_BINDIR/containerd" --config "$CONTAINERD_CONFIG"
	[ "$status" -ne 0 ] && [ "$status" -ne 124 ]
	assert_contains "$(unquote_log <<<"$output")" "$TESTDIR/not-a-dir"
	run crictl_q info
	[ "$status" -ne 0 ]
}

@test "containerd: a plugin required both here and by the default validator stops it, naming both places" {
	runtime_config "$(guard_policy fail)
[crio.nri.default_validator]
nri_enable_default_validator = true
nri_validator_required_plugins = [\"guard\"]"
	run -1 timeout 20 "$RUNTIME_BINDIR/containerd" --config "$CONTAINERD_CONFIG"
	assert_contains "$(tail -1 <<<"$output" | unquote_log)" 'load required plugin io.containerd.grpc.v1.cri: unable to load NRI plugin dependency: failed to initialize NRI interface: invalid required NRI plugin "guard": the default validator'"'"'s required_plugins = ["guard"]: the default validator requires "guard" too: require a plugin in one place'
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
	assert_contains "$stderr" 'CreateContainer of container \"app\" in pod default/web refused: required NRI plugin \"guard\" is not registered'
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
	assert_contains "$stderr" 'RunPodSandbox of pod default/web refused: required NRI plugin \"guard\" is not registered'
	[ -z "$(crictl_cmd pods -q)" ]
	[ -z "$("$RUNTIME_BINDIR/ctr" --address "$CRI_SOCK" -n k8s.io containers ls -q)" ]
	# Refused before anything was created: no network namespace (the
	# directory containerd creates them in may not even exist).
	[ -z "$(ls -A "$TESTDIR/containerd/state/io.containerd.grpc.v1.cri/netns" 2>/dev/null)" ]
	# Only the image's committed layer is left (containerd's GC removes the
	# pause container's leased snapshot).
	wait_for 10 snapshots_are 1
}

# acted_count LOG EVENT CONTAINER: how many EVENT requests of pod default/web
# the plugin logging to LOG acted on, for CONTAINER ("" for the pod's).
acted_count() {
	grep -c "acted $2 pod=default/web .*container=$3\$" "$1" || true
}

# start_observer NAME IDX: nri-faulty as plugin IDX-NAME acting on every
# request, its log $TESTDIR/NAME.log.
start_observer() {
	start_plugin "OBSERVER_$2_PID" "$TESTDIR/$1.log" --name "$1" --idx "$2" \
		--events RunPodSandbox,StopPodSandbox,RemovePodSandbox,CreateContainer,StopContainer,RemoveContainer
}

@test "containerd: a failed creation is undone once for the plugins that answered it, by NRI, and never reaches the plugins after the failing one" {
	# Three ways a relay fails: the required plugin 10-guard does not answer
	# CreateContainer, or RunPodSandbox, within the request timeout (the
	# refusal); or it returns an error, without required plugins.
	local policy mode event ctr
	for c in refused:CreateContainer refused:RunPodSandbox error:CreateContainer; do
		event=${c#*:}
		if [[ $c == refused:* ]]; then
			policy="$(guard_policy fail; echo "events = [\"$event\"]")" mode=hang
		else
			policy="" mode=error
		fi
		start_runtime "$policy"
		start_observer before 05
		start_faulty --mode "$mode" --hang 5s --fault-events "$event"
		start_observer after 20
		pod=$(nri_pod_config web)
		if [[ $event == RunPodSandbox ]]; then
			run --separate-stderr crictl_cmd runp "$pod"
			ctr=
		else
			pod_id=$(crictl_cmd runp "$pod")
			run --separate-stderr crictl_cmd create "$pod_id" "$(ctr_config app sh -c 'exec sleep 1000')" "$pod"
			ctr=app
		fi
		echo "$c: $stderr"
		[ "$status" -ne 0 ]
		if [[ $c == refused:* ]]; then
			assert_contains "$stderr" "code = FailedPrecondition"
			assert_contains "$stderr" "required NRI plugin \\\"guard\\\" (instance 10-guard) did not answer $event"
		else
			assert_contains "$stderr" "injected error for $event"
		fi
		# The undo has been sent when the request returns: the plugin before
		# the failing one saw the request and got one stop and one remove,
		# the plugin after it nothing.
		local stop=StopContainer remove=RemoveContainer
		[[ $event == CreateContainer ]] || stop=StopPodSandbox remove=RemovePodSandbox
		[ "$(acted_count "$TESTDIR/before.log" "$event" "$ctr")" = 1 ]
		[ "$(acted_count "$TESTDIR/before.log" "$stop" "$ctr")" = 1 ]
		[ "$(acted_count "$TESTDIR/before.log" "$remove" "$ctr")" = 1 ]
		for e in "$event" "$stop" "$remove"; do
			[ "$(acted_count "$TESTDIR/after.log" "$e" "$ctr")" = 0 ]
		done
		stop_plugins
		stop_runtime
		rm -f "$TESTDIR"/{before,after,faulty}.log
	done
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

# --- Crash consistency: containerd killed during a gated request -------------

# ctr_cmd ARGS...: ctr in the CRI namespace of the test containerd.
ctr_cmd() {
	"$RUNTIME_BINDIR/ctr" --address "$CRI_SOCK" -n k8s.io "$@"
}

# sandbox_state ID: the CRI state of the pod sandbox.
sandbox_state() {
	crictl_cmd inspectp -o go-template --template '{{.status.state}}' "$1"
}

# task_running ID: containerd has a running task for the container ID.
task_running() {
	[ -n "$(ctr_cmd tasks ls | awk -v id="$1" '$1 == id && $3 == "RUNNING"')" ]
}

@test "containerd: kill -9 while the required plugin holds RunPodSandbox: after the restart no READY pod, its task stopped; the retry goes through the wait and the relay and gets the injection" {
	NRI_REQUEST_TIMEOUT=60s runtime_config "$(guard_policy fail; echo 'events = ["RunPodSandbox", "CreateContainer"]')"
	runtime_start
	echo "hang 60s" >"$TESTDIR/control"
	start_faulty --control "$TESTDIR/control"
	pod=$(nri_pod_config late)
	request_in_background crictl_cmd runp "$pod"
	wait_for 10 grep -q "hang RunPodSandbox" "$TESTDIR/faulty.log"
	crash_runtime
	stop_faulty
	runtime_start

	# No READY pod: the sandbox is recovered not ready, in crictl pods and
	# crictl inspectp alike, and its task is stopped (in the background).
	[ -z "$(crictl_cmd pods -q --state ready)" ]
	old=$(crictl_cmd pods -q --no-trunc --name late)
	[ -n "$old" ]
	[ "$(sandbox_state "$old")" = SANDBOX_NOTREADY ]
	[ "$(crictl_cmd pods -o json | jq -r --arg id "$old" '.items[] | select(.id == $id) | .state')" = SANDBOX_NOTREADY ]
	wait_for 30 eval '! task_running "$old"'
	grep -q "NRI plugins did not act on the sandbox before containerd stopped, stopping it\" pod=default/late sandbox=$old" "$TESTDIR/daemon.log"

	# The kubelet's retry while the plugin is away: the wait refuses it.
	run --separate-stderr crictl_cmd runp "$pod"
	[ "$status" -ne 0 ]
	assert_contains "$stderr" 'RunPodSandbox of pod default/late refused: required NRI plugin \"guard\" is not registered'
	echo ok >"$TESTDIR/control"
	start_faulty --control "$TESTDIR/control"
	wait_for 10 nri_condition_is NRIPluginsReady true
	# containerd does not hand the sandbox back that is not ready: it keeps
	# its name until it is removed (the kubelet stops and removes it, and
	# retries with the next attempt).
	run --separate-stderr crictl_cmd runp "$pod"
	[ "$status" -ne 0 ]
	assert_contains "$stderr" "is reserved for \\\"$old\\\""
	crictl_cmd stopp "$old" >/dev/null
	crictl_cmd rmp "$old" >/dev/null
	new=$(crictl_cmd runp "$pod")
	[ "$new" != "$old" ]
	[ "$(sandbox_state "$new")" = SANDBOX_READY ]
	# The plugin acted on the pod run again, the only RunPodSandbox it
	# answered, and its injection reaches the pod's container.
	[ "$(grep -c "acted RunPodSandbox pod=default/late " "$TESTDIR/faulty.log")" = 1 ]
	ctr=$(crictl_cmd create "$new" "$(ctr_config app sh -c 'exec sleep 1000')" "$pod")
	[ "$(injected_env "$ctr")" = guard ]
}

@test "containerd: kill -9 while RunPodSandbox waits for the required plugin leaves nothing behind" {
	LOG_LEVEL=debug start_runtime "$(guard_policy fail; echo 'events = ["RunPodSandbox", "CreateContainer"]'; echo 'registration_wait = "60s"')"
	request_in_background crictl_cmd runp "$(nri_pod_config waiter)"
	wait_for 20 grep -q "$NRI_WAIT_LOGGED" "$TESTDIR/daemon.log"
	crash_runtime
	runtime_start
	# No pod in CRI, no sandbox or container in containerd, no network
	# namespace: nothing was created before the wait.
	[ -z "$(crictl_cmd pods -q)" ]
	[ -z "$(ctr_cmd sandboxes ls | tail -n +2)" ]
	[ -z "$(ctr_cmd containers ls -q)" ]
	[ -z "$(ls -A "$TESTDIR/containerd/state/io.containerd.grpc.v1.cri/netns" 2>/dev/null)" ]
}

@test "containerd: kill -9 while the required plugin holds CreateContainer: after the restart no container; the same container is created again through the wait and the relay" {
	NRI_REQUEST_TIMEOUT=60s runtime_config "$(guard_policy fail)"
	runtime_start
	echo ok >"$TESTDIR/control"
	start_faulty --control "$TESTDIR/control"
	pod=$(nri_pod_config web)
	pod_id=$(crictl_cmd runp "$pod")
	cfg=$(ctr_config app sh -c 'exec sleep 1000')
	echo "hang 60s" >"$TESTDIR/control"
	request_in_background crictl_cmd create "$pod_id" "$cfg" "$pod"
	wait_for 10 grep -q "hang CreateContainer" "$TESTDIR/faulty.log"
	crash_runtime
	stop_faulty
	runtime_start

	# No container in CRI or in containerd but the pod's own; the pod, which
	# the plugin acted on, is ready.
	[ -z "$(crictl_cmd ps -aq)" ]
	[ "$(ctr_cmd containers ls -q)" = "$pod_id" ]
	[ "$(sandbox_state "$pod_id")" = SANDBOX_READY ]

	# The retry while the plugin is away: the wait refuses it.
	run --separate-stderr crictl_cmd create "$pod_id" "$cfg" "$pod"
	[ "$status" -ne 0 ]
	assert_contains "$stderr" "code = FailedPrecondition"
	echo ok >"$TESTDIR/control"
	start_faulty --control "$TESTDIR/control"
	wait_for 10 nri_condition_is NRIPluginsReady true
	ctr=$(crictl_cmd create "$pod_id" "$cfg" "$pod")
	[ "$(injected_env "$ctr")" = guard ]
}

@test "containerd: a downgrade to the released containerd and back with a container started in the sandbox it recovered ready: the sandbox is recovered as it is, its container keeps running" {
	local released=$RUNTIME_BINDIR/containerd-v2.4.2
	[[ -x $released ]] || { ci_skip "$released not built (make containerd-pristine)"; return; }
	NRI_REQUEST_TIMEOUT=60s runtime_config "$(guard_policy fail; echo 'events = ["RunPodSandbox", "CreateContainer"]')"
	runtime_start
	echo "hang 60s" >"$TESTDIR/control"
	start_faulty --control "$TESTDIR/control"
	pod=$(nri_pod_config adopted)
	request_in_background crictl_cmd runp "$pod"
	wait_for 10 grep -q "hang RunPodSandbox" "$TESTDIR/faulty.log"
	crash_runtime
	stop_faulty

	# The released containerd ignores the tables (with a warning) and the
	# extension: it recovers the sandbox ready, and a container is started
	# in it, as the kubelet does.
	cp "$released" "$TESTDIR/containerd-released"
	PATH=$RUNTIME_BINDIR:$PATH "$TESTDIR/containerd-released" --config "$CONTAINERD_CONFIG" >>"$TESTDIR/daemon.log" 2>&1 &
	DAEMON_PID=$!
	wait_runtime_up 20
	sb=$(crictl_cmd pods -q --no-trunc --name adopted)
	[ "$(sandbox_state "$sb")" = SANDBOX_READY ]
	ctr=$(crictl_cmd create "$sb" "$(ctr_config app sh -c 'exec sleep 1000')" "$pod")
	crictl_cmd start "$ctr"
	task_running "$ctr"
	stop_daemon TERM

	# The upgrade: the patched containerd keeps the sandbox and its container.
	local lines
	lines=$(grep -c "recovering it as it is" "$TESTDIR/daemon.log" || true)
	runtime_start
	grep -q "NRI plugins did not act on the sandbox before containerd stopped, but it has containers.*recovering it as it is\" pod=default/adopted sandbox=$sb" "$TESTDIR/daemon.log"
	[ "$(sandbox_state "$sb")" = SANDBOX_READY ]
	task_running "$sb"
	task_running "$ctr"
	[ "$(crictl_cmd inspect -o go-template --template '{{.status.state}}' "$ctr")" = CONTAINER_RUNNING ]
	# Adopted: relayed from now on.
	stop_daemon TERM
	runtime_start
	[ "$(grep -c "recovering it as it is" "$TESTDIR/daemon.log")" -eq $((lines + 1)) ]
	[ "$(sandbox_state "$sb")" = SANDBOX_READY ]
	task_running "$ctr"
}
