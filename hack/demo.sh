#!/usr/bin/env bash
# hack/demo.sh (make demo): a scripted walk-through of a required NRI plugin
# on patched CRI-O (RUNTIME=crio, the default) or containerd
# (RUNTIME=containerd). It starts its own runtime on temporary sockets and
# directories with the demo drop-in of contrib/demo/crio.conf.d (plugin
# nri-faulty required,
# fail_policy = "fail", registration_wait = "3s", namespace "system"
# exempt), drives it with crictl and the real bin/nri-faulty plugin, and
# removes everything on exit. Exit code 0 only if every step behaved as
# described; 2 if a prerequisite is missing (root, runc, crictl, jq,
# busybox-static, `make build` and `make $RUNTIME`).
set -uo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export REPO_ROOT
# The BATS helpers start and clean up the runtime; reuse them as they are.
# shellcheck source=../test/helpers.bash
source "$REPO_ROOT/test/helpers.bash"

PLUGIN=nri-faulty
failed=0
PLUGIN_PID=

# say prints one demo line; ok/fail print the verdict of a step.
say() { printf '\n== %s\n' "$*"; }
ok() { printf '   ok: %s\n' "$*"; }
fail() {
	printf '   FAILED: %s\n' "$*"
	failed=1
}
# check DESCRIPTION CMD...: run CMD, report ok or FAILED.
check() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else fail "$what"; fi
}

setup_tmpdir
TEST_IMAGE=$TESTDIR/busybox.tar
[[ -x /bin/busybox ]] && command -v jq >/dev/null && "$REPO_ROOT/hack/make-test-image.sh" "$TEST_IMAGE" >/dev/null
# require_suite skips in the suites; here a missing prerequisite is exit 2.
skip() {
	echo "demo: $*" >&2
	cleanup_tmpdir
	exit 2
}
require_suite || skip "see above"
unset -f skip

cleanup() {
	stop_plugins 2>/dev/null
	stop_runtime
	cleanup_tmpdir
}
trap cleanup EXIT
trap 'exit 130' INT TERM

CONTROL=$TESTDIR/plugin.mode

# create NAME POD_ID POD_JSON: crictl create; sets OUT (id) and ERR.
create() {
	local cfg
	cfg=$(ctr_config "$1" sh -c 'exec sleep 1000')
	OUT=$(crictl_cmd create "$2" "$cfg" "$3" 2>"$TESTDIR/err") && CREATE_RC=0 || CREATE_RC=$?
	# crictl quotes the gRPC message: keep only NRI's text, unescaped.
	ERR=$(crictl_desc "$(<"$TESTDIR/err")")
}

# refused: the create failed with NRI's refusal (containerd wraps it in its
# own context, "failed to wait for required NRI plugins: ...").
refused() {
	[[ $CREATE_RC -ne 0 && $ERR == *"CreateContainer of "*" refused: required NRI plugin \"$PLUGIN\""* ]]
}

# refused_not_acted: refused after the relay (lost connection, or the kill
# came after the 1s request timeout on a very busy machine).
refused_not_acted() {
	refused && [[ $ERR == *"lost its connection while handling"* || $ERR == *"did not answer"* ]]
}

say "starting $RUNTIME in $TESTDIR, requiring the plugin $PLUGIN:"
sed -n '/^\[/,$p' "$REPO_ROOT/contrib/demo/crio.conf.d/10-nri-faulty.conf" | sed 's/^/   /'
# RUNTIME (crio or containerd) selects the runtime, as in the BATS suites.
start_runtime "$(cat "$REPO_ROOT/contrib/demo/crio.conf.d/10-nri-faulty.conf")" ||
	{ echo "demo: $RUNTIME did not start:" >&2; tail -20 "$TESTDIR/daemon.log" >&2; exit 1; }
ok "$RUNTIME up, test image imported"

say "1. the plugin is not running: crictl info reports NRIPluginsReady=false"
check "NRIPluginsReady=$(nri_condition NRIPluginsReady)" nri_condition_is NRIPluginsReady false
crictl_cmd info | jq -r '.status.conditions[] | select(.type == "NRIPluginsReady") | "   message: " + .message'

say "2. a container in namespace default is refused (after the 3s registration_wait)"
WEB_JSON=$(nri_pod_config web default)
WEB=$(crictl_cmd runp "$WEB_JSON" 2>/dev/null) || fail "runp web"
create app1 "$WEB" "$WEB_JSON"
echo "   crictl: $ERR" | fold -s -w 110 | sed '2,$s/^/   /'
check "refused, naming $PLUGIN" refused

say "3. a pod in the exempt namespace system runs anyway"
SYS_JSON=$(nri_pod_config infra system)
SYS=$(crictl_cmd runp "$SYS_JSON" 2>/dev/null) || fail "runp infra"
create agent "$SYS" "$SYS_JSON"
if [[ $CREATE_RC -eq 0 ]] && crictl_cmd start "$OUT" >/dev/null; then
	ok "system/infra container $(crictl_cmd inspect -o go-template --template '{{.status.state}}' "$OUT")"
else
	fail "exempt container: $ERR"
fi

say "4. start the plugin: bin/nri-faulty --name $PLUGIN"
: >"$CONTROL"
check "the plugin is synchronized" start_plugin PLUGIN_PID "$TESTDIR/plugin.log" --name "$PLUGIN" --control "$CONTROL"
check "NRIPluginsReady=true within 10s" wait_for 10 nri_condition_is NRIPluginsReady true

say "5. a container is created and the plugin injected its env var"
create app2 "$WEB" "$WEB_JSON"
if [[ $CREATE_RC -eq 0 ]] && crictl_cmd start "$OUT" >/dev/null; then
	env=$(crictl_cmd exec -s "$OUT" env | grep NRI_FAULTY_ACTED)
	echo "   crictl exec -s app2 env: $env"
	check "injected by $PLUGIN" [ "$env" = "NRI_FAULTY_ACTED=$PLUGIN" ]
else
	fail "create app2: $ERR"
fi

say "6. the plugin is killed while it handles a CreateContainer"
echo "hang 30s" >"$CONTROL"
# bash reports the SIGKILL of its child on stderr; keep that out of the demo.
exec 3>&2 2>/dev/null
# Kill it as soon as it logs that it received the request (it hangs there).
( wait_for 20 grep -q "hang CreateContainer" "$TESTDIR/plugin.log" && kill -KILL "$PLUGIN_PID" ) &
killer=$!
create app3 "$WEB" "$WEB_JSON"
wait "$killer"
{ wait "$PLUGIN_PID"; } 2>/dev/null
PLUGIN_PID=
exec 2>&3 3>&-
echo "   crictl: $ERR" | fold -s -w 110 | sed '2,$s/^/   /'
check "the plugin received the request and was killed" grep -q "hang CreateContainer" "$TESTDIR/plugin.log"
check "refused, the plugin did not act" refused_not_acted

say "7. with the plugin gone, the next container is refused again"
create app4 "$WEB" "$WEB_JSON"
echo "   crictl: $ERR" | fold -s -w 110 | sed '2,$s/^/   /'
check "refused, naming $PLUGIN" refused
check "NRIPluginsReady=false again" wait_for 5 nri_condition_is NRIPluginsReady false
check "containers in pod default/web: only app2" \
	[ "$(crictl_cmd ps -a -q -p "$WEB" | wc -l)" -eq 1 ]

if ((failed)); then
	say "demo FAILED (daemon log: kept below)"
	tail -30 "$TESTDIR/daemon.log"
	exit 1
fi
say "demo passed: every step behaved as described"
