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
REPO_ROOT=$(cd "$BATS_TEST_DIRNAME/../../.." && pwd)
load "$REPO_ROOT/test/helpers"

setup_file() {
	setup_test_image_file
}

setup() {
	require_root
	require_runtime
	require_cmd crictl jq ip
	[[ -f $TEST_IMAGE ]] || ci_skip "test image not built (needs busybox-static and jq)"
	[[ -x $NRI_FAULTY_BINARY ]] || ci_skip "$NRI_FAULTY_BINARY not built (run make build)"
	setup_tmpdir
}

teardown() {
	[[ -z ${NOTIFY_PID:-} ]] || kill "$NOTIFY_PID" 2>/dev/null || true
	stop_faulty
	stop_runtime
	cleanup_tmpdir
}

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

# unescaped FILE: FILE with logrus' \" quoting undone.
unescaped() {
	sed 's/\\"/"/g' "$1"
}

# daemon_exits: containerd (DAEMON_PID) exits within 20s.
daemon_exits() {
	local i
	for i in $(seq 200); do
		kill -0 "$DAEMON_PID" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

@test "containerd: a bad policy value stops it, naming the key, the value and what is allowed in NRI's text" {
	start_runtime "$(guard_policy bogus)" && started=yes || started=no
	[ "$started" = no ]
	daemon_exits
	# NRI's FieldError text below containerd's table, as CRI-O prints it
	# below crio.nri.policy.
	assert_contains "$(unescaped "$TESTDIR/daemon.log")" \
		'plugins."io.containerd.nri.v1.nri".policy.plugins."guard".fail_policy = "bogus": allowed values are "fail", "ignore" (alias "skip")'
	# The last line is containerd's fatal error, not a warning it went on after.
	assert_contains "$(tail -1 "$TESTDIR/daemon.log")" "level=fatal"
	assert_contains "$(tail -1 "$TESTDIR/daemon.log" | sed 's/\\"/"/g')" 'policy.plugins."guard".fail_policy = "bogus"'
}

@test "containerd: a policy naming plugins with NRI disabled stops it" {
	guard_policy fail >"$TESTDIR/policy.toml"
	"$REPO_ROOT/contrib/containerd/containerd-test-config.sh" "$TESTDIR/containerd" "$TESTDIR/policy.toml" >/dev/null
	sed -i 's/^\([[:space:]]*\)disable = false/\1disable = true/' "$TESTDIR/containerd/config.toml"
	run -1 timeout 20 "$RUNTIME_BINDIR/containerd" --config "$TESTDIR/containerd/config.toml"
	assert_contains "$(sed 's/\\"/"/g' <<<"$output")" 'plugins."io.containerd.nri.v1.nri".policy.plugins = ["guard"]: NRI is disabled (disable = true)'
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

@test "containerd: the required plugin's adjustment reaches the container (NRI_FAULTY_ACTED)" {
	start_runtime "$(guard_policy fail)"
	start_faulty
	wait_for 10 nri_condition_is NRIPluginsReady true
	pod=$(nri_pod_config web)
	pod_id=$(crictl_cmd runp "$pod")
	cfg=$(ctr_config app sh -c 'exec sleep 1000')
	id=$(crictl_cmd create "$pod_id" "$cfg" "$pod")
	crictl_cmd start "$id" >/dev/null
	run --separate-stderr crictl_cmd exec -s "$id" sh -c 'echo "$NRI_FAULTY_ACTED"'
	[ "$status" -eq 0 ]
	[ "$output" = guard ]
}

# notify_listener SOCKET LOG: a systemd notify socket (a datagram socket,
# as systemd's NOTIFY_SOCKET) that appends every message to LOG with the
# time it came; its pid is NOTIFY_PID.
notify_listener() {
	local python=python3
	[[ ! -x /usr/bin/python3 ]] || python=/usr/bin/python3
	"$python" -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as log:
    while True:
        msg = s.recv(4096).decode(errors="replace")
        for line in msg.splitlines():
            log.write("%.3f %s\n" % (time.time(), line))
' "$1" "$2" &
	NOTIFY_PID=$!
	wait_for 20 test -S "$1"
}

@test "containerd: with a required network plugin absent it still notifies READY=1 and keeps running; it has no watchdog" {
	[[ -x /usr/bin/python3 ]] || require_cmd python3
	# containerd speaks sd_notify (cmd/containerd/command/notify_systemd.go):
	# READY=1 once its plugins are up, STOPPING=1 at shutdown, no WATCHDOG=1.
	notify_listener "$TESTDIR/notify.sock" "$TESTDIR/notify.log"
	NOTIFY_SOCKET=$TESTDIR/notify.sock WATCHDOG_USEC=2000000 start_runtime "$(guard_policy fail; echo 'readiness = "network"')"
	wait_for 10 grep -q " READY=1$" "$TESTDIR/notify.log"
	[ "$(nri_condition NRIPluginsReady)" = false ]
	[ "$(nri_condition NetworkReady)" = false ]
	[ "$(nri_condition RuntimeReady)" = true ]
	sleep 6
	kill -0 "$DAEMON_PID"
	! grep -q "WATCHDOG=1" "$TESTDIR/notify.log"
	[ "$(nri_condition NRIPluginsReady)" = false ]
	start_faulty
	wait_for 10 nri_condition_is NetworkReady true
	kill "$NOTIFY_PID" 2>/dev/null || true
}
