#!/usr/bin/env bats
# Patched CRI-O and the systemd watchdog (issue 18): CRI-O notifies the
# watchdog only while its health check passes. The conditions of required
# NRI plugins are about plugins, not CRI-O: WATCHDOG=1 must keep coming
# at its interval while a required plugin is absent and while a
# readiness = "network" plugin holds NetworkReady false, or systemd would
# restart CRI-O in a loop that the plugin's own pod could never end.
#
# No systemd: bin/sdnotify is the NOTIFY_SOCKET (a unix datagram socket)
# and CRI-O gets WATCHDOG_USEC, as systemd would pass them.

bats_require_minimum_version 1.5.0

RUNTIME=crio
load "$BATS_TEST_DIRNAME/../../../test/helpers"

# setup_file, setup and teardown: the helpers' defaults.

# The watchdog timeout; CRI-O notifies every WATCHDOG_SEC / 2.
WATCHDOG_SEC=${WATCHDOG_SEC:-4}
# How many notifications each test waits for.
WATCHDOG_COUNT=${WATCHDOG_COUNT:-4}

# start_runtime_notify POLICY: start_runtime with NOTIFY_SOCKET and
# WATCHDOG_USEC as systemd passes them, up to READY=1.
start_runtime_notify() {
	start_notify_listener
	NOTIFY_SOCKET=$NOTIFY_SOCK WATCHDOG_USEC=$((WATCHDOG_SEC * 1000000)) start_runtime "$1"
	wait_for 10 notified READY=1
}

# watchdogs: the number of WATCHDOG=1 notifications so far.
watchdogs() {
	grep -c ' WATCHDOG=1$' "$TESTDIR/notify.log"
}

# watchdogs_more_than N (for wait_for).
watchdogs_more_than() {
	(($(watchdogs) > $1))
}

# watchdog_keeps_coming WHAT: wait for WATCHDOG_COUNT more notifications
# (at most twice the time they should take) and check that no gap between
# them reached WATCHDOG_SEC, after which systemd would kill CRI-O.
watchdog_keeps_coming() {
	local from gap
	from=$(watchdogs)
	wait_for $((WATCHDOG_COUNT * WATCHDOG_SEC)) watchdogs_more_than $((from + WATCHDOG_COUNT - 1))
	gap=$(awk -v from="$from" '$2 == "WATCHDOG=1" && ++n > from { if (n > from + 1 && $1 - last > max) max = $1 - last; last = $1 }
		END { printf "%.1f", max }' "$TESTDIR/notify.log")
	echo "$1: $WATCHDOG_COUNT WATCHDOG=1 (WATCHDOG_USEC ${WATCHDOG_SEC}s), largest gap ${gap}s" |
		tee -a "${WATCHDOG_REPORT:-/dev/null}" >&3
	awk -v g="$gap" -v w="$WATCHDOG_SEC" 'BEGIN { exit !(g < w) }'
	assert_not_contains "$(cat "$TESTDIR/daemon.log")" "Will not notify watchdog"
}

@test "the watchdog is notified while a required plugin is absent" {
	start_runtime_notify '[crio.nri.required_plugins."guard"]
fail_policy = "fail"
registration_wait = "1s"'
	[ "$(nri_condition NRIPluginsReady)" = false ]
	watchdog_keeps_coming "required plugin absent"
	[ "$(nri_condition NRIPluginsReady)" = false ]
}

@test "the watchdog is notified while a network plugin holds NetworkReady false" {
	start_runtime_notify '[crio.nri.required_plugins."guard"]
fail_policy = "fail"
readiness = "network"'
	# The CNI network is ready: NetworkReady is false because of the plugin.
	[ "$(crictl_cmd info | jq -r '.status.conditions[] | select(.type == "NetworkReady") | .reason')" = NRIPluginNotReady ]
	[ "$(nri_condition NetworkReady)" = false ]
	watchdog_keeps_coming "network plugin absent (NetworkReady false)"
	# Once the plugin runs, both conditions turn true and the notifications go on.
	start_faulty
	wait_for 10 nri_condition_is NetworkReady true
	watchdog_keeps_coming "network plugin running"
}
