#!/usr/bin/env bats
# Patched CRI-O and the systemd watchdog (issue 18): CRI-O notifies the
# watchdog only while its health check passes. The conditions of the NRI
# plugin policy are about plugins, not CRI-O: WATCHDOG=1 must keep coming
# at its interval while a required plugin is absent and while a
# readiness = "network" plugin holds NetworkReady false, or systemd would
# restart CRI-O in a loop that the plugin's own pod could never end.
#
# No systemd: bin/sdnotify is the NOTIFY_SOCKET (a unix datagram socket)
# and CRI-O gets WATCHDOG_USEC, as systemd would pass them.

load crio-helpers

# The watchdog timeout: CRI-O notifies every WATCHDOG_USEC / 2.
WATCHDOG_SEC=${WATCHDOG_SEC:-4}
WINDOW_SEC=${WATCHDOG_WINDOW_SEC:-12}

setup() {
	crio_require
	[[ -x $BINDIR/sdnotify ]] || skip "$BINDIR/sdnotify missing (make crio)"
}

teardown() {
	[[ -n ${NOTIFY_PID:-} ]] && kill "$NOTIFY_PID" 2>/dev/null
	crio_teardown
}

# crio_start_notify: crio_start with NOTIFY_SOCKET and WATCHDOG_USEC.
crio_start_notify() {
	NOTIFY_SOCK=$CDIR/notify.sock
	"$BINDIR/sdnotify" "$NOTIFY_SOCK" >"$CDIR/notify.log" 2>&1 &
	NOTIFY_PID=$!
	wait_for test -S "$NOTIFY_SOCK"
	NOTIFY_SOCKET=$NOTIFY_SOCK WATCHDOG_USEC=$((WATCHDOG_SEC * 1000000)) crio_start
	wait_for grep -q 'READY=1' "$CDIR/notify.log"
}

# watchdog_in_window: count the WATCHDOG=1 notifications in the next
# WINDOW_SEC seconds and their largest gap; fail if there are fewer than
# one per WATCHDOG_SEC or a gap reaches WATCHDOG_SEC (systemd's kill).
watchdog_in_window() {
	local from to count gap
	from=$(awk 'END {print $1 + 0}' "$CDIR/notify.log")
	sleep "$WINDOW_SEC"
	to=$(awk 'END {print $1 + 0}' "$CDIR/notify.log")
	read -r count gap < <(awk -v from="$from" -v to="$to" -v end="$((WINDOW_SEC))" '
		$2 == "WATCHDOG=1" && $1 > from { if (n) { g = $1 - last; if (g > max) max = g } else { first = $1 } ; last = $1; n++ }
		END { printf "%d %.1f\n", n, max }' "$CDIR/notify.log")
	echo "$1: $count WATCHDOG=1 in ${WINDOW_SEC}s (WATCHDOG_USEC ${WATCHDOG_SEC}s), largest gap ${gap}s" |
		tee -a "${WATCHDOG_REPORT:-/dev/null}" >&3
	grep -c 'Will not notify watchdog' "$CDIR/crio.log" | sed 's/^/    "Will not notify watchdog" log lines: /' >&3 || true
	((count >= WINDOW_SEC / WATCHDOG_SEC))
	awk -v g="$gap" -v w="$WATCHDOG_SEC" 'BEGIN { exit !(g < w) }'
}

@test "the watchdog is notified while a required plugin is absent" {
	crio_setup '[crio.nri.policy.plugins."nri-faulty"]
fail_policy = "fail"
registration_wait = "1s"'
	crio_start_notify
	jq -e '.status.conditions[] | select(.type == "NRIPluginsReady" and .status == false)' <<<"$("${CRICTL[@]}" info)"
	watchdog_in_window "required plugin absent"
}

@test "the watchdog is notified while a network plugin holds NetworkReady false" {
	crio_setup '[crio.nri.policy.plugins."nri-faulty"]
fail_policy = "fail"
readiness = "network"'
	crio_start_notify
	# The CNI network is ready: NetworkReady is false because of the plugin.
	wait_for bash -c "${CRICTL[*]} info | jq -e '.status.conditions[] | select(.type == \"NetworkReady\" and .status == false and .reason == \"NRIPluginNotReady\")'"
	watchdog_in_window "network plugin absent (NetworkReady false)"
	# Once the plugin runs, both conditions turn true and the notifications go on.
	plugin_start
	wait_for bash -c "${CRICTL[*]} info | jq -e '.status.conditions[] | select(.type == \"NetworkReady\" and .status)'"
	watchdog_in_window "network plugin running"
}
