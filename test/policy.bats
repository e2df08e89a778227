#!/usr/bin/env bats
# Required NRI plugins end to end: patched CRI-O (RUNTIME=crio, the
# default) or containerd (RUNTIME=containerd) driven by crictl with the real
# bin/nri-faulty plugin registered as 10-guard, required under fail and
# ignore, with faults, scope exemptions, waits and readiness in CRI Status.
# make parity runs it on both runtimes and on CRI-O with NRI's default
# validator instead of the required plugins (PARITY_MODE=validator).

bats_require_minimum_version 1.5.0

load helpers

# setup_file, setup and teardown: the helpers' defaults.

# policy FAIL_POLICY [EXTRA KEYS...]: the table that requires plugin guard.
# registration_wait is "0s" unless EXTRA KEYS set it: the scenarios about
# an absent plugin refuse at once (the default, 5s, has a test of its own).
policy() {
	local fp=$1
	shift
	printf '[crio.nri.required_plugins."guard"]\nfail_policy = "%s"\n' "$fp"
	[[ $* == *registration_wait* ]] || echo 'registration_wait = "0s"'
	printf '%s\n' "$@"
}

# exempt NAMESPACE KEY = VALUE...: an exemption table of plugin guard.
exempt() {
	local ns=$1
	shift
	printf '[[crio.nri.required_plugins."guard".exempt]]\nnamespace = "%s"\n' "$ns"
	printf '%s\n' "$@"
}

# run_pod NAME [NAMESPACE [LABELS [ANNOTATIONS]]]: runp; sets POD_ID and POD_JSON.
run_pod() {
	POD_JSON=$(nri_pod_config "$@")
	POD_ID=$(crictl_cmd runp "$POD_JSON")
}

# create_ctr NAME [COMMAND...]: crictl create in $POD_ID (the container
# runs COMMAND, default a shell sleeping), output and status in
# $output/$status; recorded for make parity.
create_ctr() {
	local cfg t0=$EPOCHREALTIME name=$1
	shift
	(($#)) || set -- sh -c 'exec sleep 1000'
	cfg=$(ctr_config "$name" "$@")
	run --separate-stderr crictl_cmd create "$POD_ID" "$cfg" "$POD_JSON"
	record_step "create $name" "$status" "$stderr" "$t0"
}

# runp_gated POD_JSON STEP: crictl runp as a gated request (recorded).
runp_gated() {
	local t0=$EPOCHREALTIME
	run --separate-stderr crictl_cmd runp "$1"
	record_step "$2" "$status" "$stderr" "$t0"
}

# update_gated ID CPU_SHARES: crictl update as a gated request (recorded).
update_gated() {
	local t0=$EPOCHREALTIME
	run --separate-stderr crictl_cmd update --cpu-share "$2" "$1"
	record_step "update $2" "$status" "$stderr" "$t0"
}

# assert_refused EVENT NS/POD CONTAINER REASON: $stderr is NRI's refusal of
# a request a required plugin could not act on, naming the event, the
# container, the pod, the plugin, the reason and what to do.
assert_refused() {
	assert_contains "$stderr" "code = FailedPrecondition"
	if [[ -n $3 ]]; then
		assert_contains "$stderr" "$1 of container "'\"'"$3"'\" in pod '"$2 refused: "
	else
		assert_contains "$stderr" "$1 of pod $2 refused: "
	fi
	assert_contains "$stderr" 'refused: required NRI plugin \"guard\" '
	assert_contains "$stderr" "$4"
	# What to do: for a plugin that was not ready, and for one that did not act.
	[[ $stderr == *"; start or fix the plugin, or exempt the pod from the plugin in the runtime's required NRI plugins"* ||
		$stderr == *"; check the plugin's health and the NRI plugin request timeout"* ]] ||
		{ echo "no advice in: $stderr" >&2; return 1; }
}

# guard_state_is STATE: the plugin guard's state in crictl info.
guard_state_is() {
	[ "$(crictl_cmd info | jq -r '.nri.plugins[] | select(.key == "guard") | .state')" = "$1" ]
}

# guard_fail_policy_is FP: the fail policy crictl info shows for guard.
guard_fail_policy_is() {
	[ "$(crictl_cmd info | jq -r '.nri.plugins[] | select(.key == "guard") | .fail_policy' | sort -u)" = "$1" ]
}

# start_faulty2 [ARGS...]: a second instance of guard, 20-guard. Sets FAULTY2_PID.
start_faulty2() {
	start_plugin FAULTY2_PID "$TESTDIR/faulty20.log" --name guard --idx 20 "$@"
}

# warned_once TEXT: the runtime's log has exactly one warning whose message
# starts with TEXT: NRI logs each refusal, and each request let through by
# fail_policy "ignore", once.
warned_once() {
	local n
	n=$(unquote_log "$TESTDIR/daemon.log" | grep -cF "level=warning msg=\"$1" || true)
	if [ "$n" -ne 1 ]; then
		printf 'expected one warning starting with:\n  %s\nfound %d in:\n' "$1" "$n" >&2
		unquote_log "$TESTDIR/daemon.log" | grep -F "level=warning" >&2
		return 1
	fi
}

# no_container: crictl ps -a lists nothing.
no_container() {
	[ -z "$(crictl_cmd ps -aq)" ]
}

# fault_refuses_under_fail_only NRI_FAULTY_ARGS...: guard running with the
# fault makes CreateContainer refused (naming guard, leaving no container)
# with fail_policy = "fail", and lets it through with "ignore".
fault_refuses_under_fail_only() {
	start_runtime "$(policy fail)"
	start_faulty "$@"
	wait_for 10 guard_ready
	run_pod web
	create_ctr app
	[ "$status" -ne 0 ]
	assert_refused CreateContainer default/web app "guard"
	no_container
	stop_faulty
	stop_runtime

	start_runtime "$(policy ignore)"
	start_faulty "$@"
	wait_for 10 guard_ready
	run_pod web
	create_ctr app
	[ "$status" -eq 0 ]
}

@test "fail: absent plugin refuses CreateContainer and leaves no trace; once it runs, its env var is in the container" {
	start_runtime "$(policy fail)"
	run_pod web
	create_ctr app
	[ "$status" -ne 0 ]
	assert_refused CreateContainer default/web app 'required NRI plugin \"guard\" is not registered; start or fix'
	warned_once 'CreateContainer of container "app" in pod default/web refused: required NRI plugin "guard" is not registered'
	no_container

	start_faulty
	wait_for 10 guard_ready
	create_ctr app
	[ "$status" -eq 0 ]
	[ "$(injected_env "$output")" = guard ]
}

@test "ignore: absent plugin lets the container through" {
	start_runtime "$(policy ignore)"
	run_pod web
	create_ctr app
	[ "$status" -eq 0 ]
	[ -n "$(crictl_cmd ps -aq)" ]
	warned_once 'required NRI plugin "guard" is not registered; CreateContainer of container "app" in pod default/web proceeds without it (fail_policy "ignore")'
}

@test "fail: a plugin crashing while it handles CreateContainer refuses; ignore lets it through" {
	fault_refuses_under_fail_only --mode crash-during --fault-events CreateContainer
}

@test "fail: a plugin hanging past the 1s request timeout refuses; ignore lets it through" {
	fault_refuses_under_fail_only --mode hang --hang 5s --fault-events CreateContainer
}

@test "a plugin's own error refuses the container with fail and with ignore" {
	for fp in fail ignore; do
		start_runtime "$(policy $fp)"
		start_faulty --mode error --fault-events CreateContainer
		wait_for 10 guard_ready
		run_pod web
		create_ctr app
		echo "fail_policy=$fp: $stderr"
		[ "$status" -ne 0 ]
		# The plugin's own error (nri-faulty's text) is what refused it,
		# not the policy, and it reaches the client.
		assert_contains "$stderr" "nri-faulty guard: injected error for CreateContainer"
		assert_not_contains "$stderr" "required NRI plugin"
		no_container
		stop_faulty
		stop_runtime
	done
}

@test "scope exemptions: excluded namespace, static pod, namespace-bound label and annotation exemptions" {
	start_runtime "$(policy fail 'exclude_namespaces = ["kube-*"]'
		exempt nri-plugins 'match_labels = { app = "guard" }'
		exempt nri-plugins 'annotation = "nrigate.io/tolerate-missing-plugins"')"
	run_pod sys kube-system
	create_ctr a1
	[ "$status" -eq 0 ]
	run_pod own nri-plugins '{"app":"guard"}'
	create_ctr a2
	[ "$status" -eq 0 ]
	run_pod static default '{}' '{"kubernetes.io/config.source":"file"}'
	create_ctr a3
	[ "$status" -eq 0 ]
	run_pod tol nri-plugins '{}' '{"nrigate.io/tolerate-missing-plugins":"true"}'
	create_ctr a4
	[ "$status" -eq 0 ]
	# An api pod in scope is still refused.
	run_pod web default '{"app":"web"}' '{"kubernetes.io/config.source":"api"}'
	create_ctr a5
	[ "$status" -ne 0 ]
	assert_refused CreateContainer default/web a5 "is not registered"
	[ "$(crictl_cmd ps -aq | wc -l)" -eq 4 ]
}

@test "exemptions a pod author cannot forge: the exempt label or annotation outside the exemption's namespace is refused" {
	start_runtime "$(policy fail
		exempt nri-plugins 'match_labels = { app = "guard" }'
		exempt nri-plugins 'annotation = "nrigate.io/tolerate-missing-plugins"')"
	# The plugin's own label, worn by a pod in another namespace.
	run_pod forged-label default '{"app":"guard"}'
	create_ctr a1
	[ "$status" -ne 0 ]
	assert_refused CreateContainer default/forged-label a1 "is not registered"
	# The exempting annotation, set by a pod author in another namespace.
	run_pod forged-annotation default '{}' '{"nrigate.io/tolerate-missing-plugins":"true"}'
	create_ctr a2
	[ "$status" -ne 0 ]
	assert_refused CreateContainer default/forged-annotation a2 "is not registered"
	# A static pod's annotation needs exempt_static_pods; "api" is not static.
	run_pod forged-static default '{}' '{"kubernetes.io/config.source":"api"}'
	create_ctr a3
	[ "$status" -ne 0 ]
	no_container
	# The same label in the exemption's namespace is exempt.
	run_pod own nri-plugins '{"app":"guard"}'
	create_ctr a4
	[ "$status" -eq 0 ]
}

@test "an exemption that names no namespace, every namespace or a prefix of namespaces stops the runtime naming the key" {
	for ns in '' '*' 'nri-*'; do
		# Not through run: a daemon that did start must stay known to teardown.
		start_runtime "$(policy fail
			exempt "$ns" 'match_labels = { app = "guard" }')" &&
			started=yes || started=no
		[ "$started" = no ]
		assert_contains "$(unquote_log "$TESTDIR/daemon.log")" "invalid required NRI plugin \"guard\": exempt[0].namespace = \"$ns\""
		[[ -n $ns ]] || assert_contains "$(unquote_log "$TESTDIR/daemon.log")" "an exemption must name the namespace it applies in"
		[[ -z $ns ]] || assert_contains "$(unquote_log "$TESTDIR/daemon.log")" 'an exemption names one namespace, not a prefix'
		: >"$TESTDIR/daemon.log"
	done
}

@test "registration_wait lets a container through when the plugin comes up in time" {
	start_runtime "$(policy fail 'registration_wait = "15s"')"
	run_pod web
	cfg=$(ctr_config app sh -c 'exec sleep 1000')
	crictl_cmd create "$POD_ID" "$cfg" "$POD_JSON" >"$TESTDIR/create.out" 2>"$TESTDIR/create.err" &
	create_pid=$!
	# The create has reached the runtime; it must now wait for the plugin:
	# crictl still running and no container, until the plugin is there.
	wait_for 10 grep -q "$CREATE_LOGGED" "$TESTDIR/daemon.log"
	kill -0 "$create_pid"
	no_container
	start_faulty
	wait "$create_pid"
	[ "$(injected_env "$(cat "$TESTDIR/create.out")")" = guard ]
}

@test "RunPodSandbox gating: an absent plugin refuses the pod, which leaves no trace" {
	start_runtime "$(policy fail 'events = ["RunPodSandbox", "CreateContainer"]')"
	pod=$(nri_pod_config web)
	runp_gated "$pod" "runp web"
	[ "$status" -ne 0 ]
	assert_refused RunPodSandbox default/web "" "is not registered"
	[ -z "$(crictl_cmd pods -q)" ]
	start_faulty
	wait_for 10 guard_ready
	runp_gated "$pod" "runp web (plugin up)"
	[ "$status" -eq 0 ]
}

@test "crictl info: NRIPluginsReady false then true as the plugin starts; RuntimeReady untouched" {
	start_runtime "$(policy fail)"
	[ "$(nri_condition NRIPluginsReady)" = false ]
	[ "$(nri_condition RuntimeReady)" = true ]
	[ "$(nri_condition NetworkReady)" = true ]
	run --separate-stderr crictl_cmd info
	assert_contains "$(jq -r '.status.conditions[] | select(.type == "NRIPluginsReady") | .message' <<<"$output")" "guard"
	[ "$(jq -r '.nri.plugins[] | select(.key == "guard") | .state' <<<"$output")" = "not registered" ]
	start_faulty
	wait_for 10 nri_condition_is NRIPluginsReady true
	[ "$(nri_condition RuntimeReady)" = true ]
	stop_faulty
	wait_for 10 nri_condition_is NRIPluginsReady false
	[ "$(nri_condition RuntimeReady)" = true ]
}

@test "crictl info: NetworkReady false while a readiness=network plugin is not ready" {
	start_runtime "$(policy fail 'readiness = "network"')"
	[ "$(nri_condition NetworkReady)" = false ]
	[ "$(crictl_cmd info | jq -r '.status.conditions[] | select(.type == "NetworkReady") | .reason')" = NRIPluginNotReady ]
	[ "$(nri_condition RuntimeReady)" = true ]
	start_faulty
	wait_for 10 nri_condition_is NetworkReady true
	[ "$(nri_condition NRIPluginsReady)" = true ]
}

@test "without a policy there is no NRIPluginsReady condition" {
	start_runtime ""
	run --separate-stderr crictl_cmd info
	[ "$(jq '[.status.conditions[] | select(.type == "NRIPluginsReady")] | length' <<<"$output")" -eq 0 ]
}

# guard_entry FIELD: FIELD of plugin guard's entry in crictl info's nri
# entry (docs/cri-o.md's `crictl info | jq .nri` recipe), arrays joined by commas.
guard_entry() {
	crictl_cmd info | jq -r --arg f "$1" '.nri.plugins[] | select(.key == "guard") | .[$f] | if type == "array" then join(",") else . end'
}

@test "crictl info | jq .nri: the plugin's index, state, subscribed events and fail policy" {
	start_runtime "$(policy fail)"
	[ "$(guard_entry state)" = "not registered" ]
	[ "$(guard_entry fail_policy)" = fail ]
	start_faulty
	wait_for 10 guard_ready
	[ "$(guard_entry index)" = 10 ]
	[ "$(guard_entry name)" = guard ]
	[ "$(guard_entry fail_policy)" = fail ]
	assert_contains ",$(guard_entry events)," ",CreateContainer,"
}

@test "SIGHUP reloads the policy; an invalid reload keeps the old one" {
	[[ $RUNTIME != containerd ]] ||
		runtime_lacks "SIGHUP policy reload" "containerd has no configuration reload; its NRI plugin config is read once at start"
	start_runtime "$(policy fail)"
	run_pod web
	create_ctr app1
	[ "$status" -ne 0 ]
	# A later file replaces guard's table as a whole.
	policy ignore >"$TESTDIR/crio.conf.d/20-policy.conf"
	runtime_reload
	wait_for 10 guard_fail_policy_is ignore
	wait_for 10 grep -q "$RELOAD_OK_LOG" "$TESTDIR/daemon.log"
	create_ctr app2
	[ "$status" -eq 0 ]
	policy bogus >"$TESTDIR/crio.conf.d/20-policy.conf"
	runtime_reload
	wait_for 10 grep -q "$RELOAD_KEPT_LOG" "$TESTDIR/daemon.log"
	grep "$RELOAD_KEPT_LOG" "$TESTDIR/daemon.log" | grep -q "bogus"
	guard_fail_policy_is ignore
	create_ctr app3
	[ "$status" -eq 0 ]
}

@test "restarting plugin: with registration_wait every container waits for it and gets the injection" {
	start_runtime "$(policy fail 'registration_wait = "10s"')"
	run_pod web
	for i in 1 2 3; do
		# The plugin answers one CreateContainer, then exits; a supervisor
		# would restart it, as we do here after a pause.
		start_faulty --mode exit-after --count 1 --fault-events CreateContainer
		create_ctr "app$i"
		[ "$status" -eq 0 ]
		[ "$(injected_env "$output")" = guard ]
		wait "$FAULTY_PID" || true
		FAULTY_PID=
		wait_for 10 nri_condition_is NRIPluginsReady false
	done
	[ "$(crictl_cmd ps -aq | wc -l)" -eq 3 ]
}

@test "fail: a plugin that crashed refuses the next container, ignore lets it through" {
	for fp in fail ignore; do
		start_runtime "$(policy $fp)"
		start_faulty --mode exit-after --count 1 --fault-events CreateContainer
		run_pod web
		wait_for 10 guard_ready
		create_ctr app1
		[ "$status" -eq 0 ]
		wait "$FAULTY_PID" || true
		FAULTY_PID=
		wait_for 10 guard_state_is disconnected
		create_ctr app2
		if [ "$fp" = fail ]; then
			[ "$status" -ne 0 ]
			assert_refused CreateContainer default/web app2 "disconnected"
			[ "$(crictl_cmd ps -aq | wc -l)" -eq 1 ]
		else
			[ "$status" -eq 0 ]
			[ "$(crictl_cmd ps -aq | wc -l)" -eq 2 ]
		fi
		stop_runtime
	done
}

@test "UpdateContainer gating: fail refuses crictl update while the plugin is absent" {
	start_runtime "$(policy fail 'events = ["CreateContainer", "UpdateContainer"]')"
	start_faulty
	wait_for 10 guard_ready
	run_pod web
	create_ctr app
	[ "$status" -eq 0 ]
	id=$output
	crictl_cmd start "$id" >/dev/null
	update_gated "$id" 512
	[ "$status" -eq 0 ]
	stop_faulty
	wait_for 10 nri_condition_is NRIPluginsReady false
	update_gated "$id" 256
	[ "$status" -ne 0 ]
	assert_refused UpdateContainer default/web app "disconnected"
}

@test "partial subscription: required for RunPodSandbox and CreateContainer, subscribed to RunPodSandbox only: refused at CreateContainer; ignore lets it through" {
	for fp in fail ignore; do
		start_runtime "$(policy $fp 'events = ["RunPodSandbox", "CreateContainer"]')"
		start_faulty --events RunPodSandbox
		run_pod web
		create_ctr app
		if [ "$fp" = fail ]; then
			[ "$status" -ne 0 ]
			assert_refused CreateContainer default/web app "not subscribed to CreateContainer"
			no_container
			wait_for 5 nri_condition_is NRIPluginsReady false
			assert_contains "$(crictl_cmd info | jq -r '.status.conditions[] | select(.type == "NRIPluginsReady") | .message')" \
				"not subscribed to CreateContainer"
		else
			[ "$status" -eq 0 ]
			[ "$(crictl_cmd ps -aq | wc -l)" -eq 1 ]
		fi
		stop_faulty
		stop_runtime
	done
}

@test "two instances of one plugin: 20-guard hanging past the 1s timeout refuses although 10-guard answered, which is told to undo it; ignore lets it through" {
	for fp in fail ignore; do
		start_runtime "$(policy $fp)"
		start_faulty
		start_faulty2 --mode hang --hang 5s --fault-events CreateContainer
		wait_for 10 synced_more_than "$TESTDIR/faulty.log" 0
		wait_for 10 synced_more_than "$TESTDIR/faulty20.log" 0
		run_pod web
		create_ctr app
		# 10-guard, first in index order, answered the request either way.
		grep -q "acted CreateContainer pod=default/web" "$TESTDIR/faulty.log"
		if [ "$fp" = fail ]; then
			[ "$status" -ne 0 ]
			assert_refused CreateContainer default/web app "(instance 20-guard) did not answer CreateContainer"
			no_container
			# The refusal is undone for the instance that acted on it.
			wait_for 5 grep -q "acted RemoveContainer pod=default/web .*container=app$" "$TESTDIR/faulty.log"
		else
			[ "$status" -eq 0 ]
			[ "$(crictl_cmd ps -aq | wc -l)" -eq 1 ]
		fi
		stop_faulty
		stop_plugin FAULTY2_PID
		stop_runtime
	done
}

@test "scope: runtime_handlers = [\"runc\"] covers a pod that names no handler (the default handler); [\"kata\"] does not" {
	start_runtime "$(policy fail 'runtime_handlers = ["runc"]')"
	run_pod web
	create_ctr app
	[ "$status" -ne 0 ]
	assert_refused CreateContainer default/web app "is not registered"
	no_container
	stop_runtime

	start_runtime "$(policy fail 'runtime_handlers = ["kata"]')"
	run_pod web
	create_ctr app
	[ "$status" -eq 0 ]
}

@test "ignore: RunPodSandbox and UpdateContainer go through while the plugin is absent or gone" {
	start_runtime "$(policy ignore 'events = ["RunPodSandbox", "CreateContainer", "UpdateContainer"]')"
	pod=$(nri_pod_config web)
	runp_gated "$pod" "runp web"
	[ "$status" -eq 0 ]
	POD_ID=$output POD_JSON=$pod
	start_faulty
	wait_for 10 guard_ready
	create_ctr app
	[ "$status" -eq 0 ]
	id=$output
	crictl_cmd start "$id" >/dev/null
	stop_faulty
	wait_for 10 guard_state_is disconnected
	update_gated "$id" 256
	[ "$status" -eq 0 ]
}

# stop_acted_count CONTAINER: how many StopContainer requests guard acted on
# for CONTAINER.
stop_acted_count() {
	grep -c "acted StopContainer pod=default/web .*container=$1\$" "$TESTDIR/faulty.log" || true
}

# stop_acted_once CONTAINER (for wait_for).
stop_acted_once() {
	[ "$(stop_acted_count "$1")" -eq 1 ]
}

@test "a bad value of a required plugin stops the runtime with NRI's text: the plugin, the key, the value and what is allowed" {
	# Pairs of a bad value in guard's table (or a whole table) and the text
	# of NRI's Validate() for it, which each runtime prints behind its own
	# table: both runtimes must print this one expected text.
	local cases=(
		'fail_policy = "bogus"'
		'invalid required NRI plugin "guard": fail_policy = "bogus": allowed values are "fail" and "ignore"'
		'events = ["StopContainer"]'
		'invalid required NRI plugin "guard": events = "StopContainer": allowed values are "RunPodSandbox", "CreateContainer", "UpdateContainer", "ValidateContainerAdjustment"'
		'readiness = "maybe"'
		'invalid required NRI plugin "guard": readiness = "maybe": allowed values are "condition", "network" and "none"'
		'registration_wait = "-1s"'
		'invalid required NRI plugin "guard": registration_wait = "-1s": must be a duration from "0s" to "1m0s", such as "5s"'
		'registration_wait = "2m"'
		'invalid required NRI plugin "guard": registration_wait = "2m": must be a duration from "0s" to "1m0s", such as "5s"'
		'registration_wait = "soon"'
		'invalid required NRI plugin "guard": registration_wait = "soon": must be a duration from "0s" to "1m0s", such as "5s"'
		'match_expressions = [{ key = "tier", operator = "Near" }]'
		'invalid required NRI plugin "guard": match_expressions[0].operator = "Near": allowed values are "In", "NotIn", "Exists" and "DoesNotExist"'
		'namespaces = ["Bad_NS"]'
		'invalid required NRI plugin "guard": namespaces = "Bad_NS": must be a namespace name, or the start of names followed by "*" (such as "team-*")'
		'[crio.nri.required_plugins."bad name"]
fail_policy = "fail"'
		"invalid required NRI plugin \"bad name\": name = \"bad name\": must be a plugin name or INDEX-NAME (invalid plugin name \"bad name\": contains invalid character ' ')"
		'[[crio.nri.required_plugins."guard".exempt]]
namespace = "nri-plugins"'
		'invalid required NRI plugin "guard": exempt[0].match_labels = {}: an exemption needs match_labels, match_expressions or annotation (to exempt a whole namespace, use exclude_namespaces)'
	)
	local i log table
	for ((i = 0; i < ${#cases[@]}; i += 2)); do
		: >"$TESTDIR/daemon.log"
		# Not through run: a daemon that did start must stay known to teardown.
		table=${cases[i]}
		[[ $table == '['* ]] || table=$(printf '[crio.nri.required_plugins."guard"]\n%s' "$table")
		start_runtime "$table" && started=yes || started=no
		echo "${cases[i]}: started=$started"
		[ "$started" = no ]
		# CRI-O's logrus quotes the message: compare it unescaped.
		log=$(unquote_log "$TESTDIR/daemon.log")
		assert_contains "$log" "${cases[i + 1]}"
	done
}

@test "required plugins with NRI disabled stop the runtime naming both keys" {
	# Not through run: a daemon that did start must stay known to teardown.
	ENABLE_NRI=false start_runtime "$(policy fail)" && started=yes || started=no
	[ "$started" = no ]
	log=$(unquote_log "$TESTDIR/daemon.log")
	case $RUNTIME in
	crio)
		assert_contains "$log" '[crio.nri.required_plugins."guard"]: NRI plugins are required while NRI is disabled (enable_nri = false)'
		;;
	*) assert_contains "$log" guard ;;
	esac
}

@test "a plugin required here and by NRI's default validator stops the runtime naming both" {
	[[ ${PARITY_MODE:-} != validator ]] ||
		runtime_lacks "required plugins and the default validator together" "the upstream validator column has no required plugins"
	# Not through run: a daemon that did start must stay known to teardown.
	start_runtime "$(policy fail
		printf '%s\n' '[crio.nri.default_validator]' 'nri_enable_default_validator = true' \
			'nri_validator_required_plugins = ["guard"]')" && started=yes || started=no
	[ "$started" = no ]
	log=$(unquote_log "$TESTDIR/daemon.log")
	# NRI's sentence, on both runtimes.
	assert_contains "$log" 'the default validator requires "guard" too'
	assert_contains "$log" "require a plugin in one place"
	case $RUNTIME in
	crio)
		assert_contains "$log" '[crio.nri.required_plugins."guard"]'
		assert_contains "$log" '[crio.nri.default_validator] nri_validator_required_plugins = ["guard"]'
		;;
	esac
}

@test "the default registration_wait is 5s: an absent plugin refuses after it" {
	start_runtime '[crio.nri.required_plugins."guard"]'
	run_pod web
	t0=$EPOCHREALTIME
	create_ctr app
	waited=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
	[ "$status" -ne 0 ]
	assert_refused CreateContainer default/web app 'is not registered after its registration_wait (5s)'
	echo "refused after ${waited}ms"
	[ "$waited" -ge 5000 ]
	no_container
}

@test "a registration_wait longer than the client's deadline: the refusal reaches crictl as FailedPrecondition before its deadline" {
	start_runtime "$(policy fail 'registration_wait = "30s"')"
	run_pod web
	cfg=$(ctr_config app sh -c 'exec sleep 1000')
	t0=$EPOCHREALTIME
	# crictl's own deadline for the call: 4s.
	run --separate-stderr crictl_cmd --timeout 4s create "$POD_ID" "$cfg" "$POD_JSON"
	took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
	record_step "create app (crictl --timeout 4s)" "$status" "$stderr" "$t0"
	echo "crictl returned after ${took}ms: $stderr"
	[ "$status" -ne 0 ]
	assert_refused CreateContainer default/web app 'is not registered before the deadline of the request (registration_wait 30s)'
	assert_not_contains "$stderr" DeadlineExceeded
	[ "$took" -lt 4000 ]
	no_container
}

# start_validator [ARGS...]: guard as a validator plugin (subscribed to
# ValidateContainerAdjustment only), as start_faulty.
start_validator() {
	start_faulty --events ValidateContainerAdjustment "$@"
}

@test "a required validator (events = [\"ValidateContainerAdjustment\"]) absent or killed refuses CreateContainer under fail; ignore lets it through" {
	local required='events = ["ValidateContainerAdjustment"]'
	start_runtime "$(policy fail "$required")"
	run_pod web
	create_ctr absent
	[ "$status" -ne 0 ]
	assert_refused CreateContainer default/web absent "is not registered"
	no_container

	start_validator
	wait_for 10 guard_ready
	create_ctr validated
	[ "$status" -eq 0 ]
	grep -q "acted ValidateContainerAdjustment pod=default/web .*container=validated$" "$TESTDIR/faulty.log"

	stop_faulty
	wait_for 10 guard_state_is disconnected
	create_ctr killed
	[ "$status" -ne 0 ]
	assert_refused CreateContainer default/web killed "is disconnected"
	[ "$(crictl_cmd ps -aq | wc -l)" -eq 1 ]
	stop_runtime

	start_runtime "$(policy ignore "$required")"
	run_pod web
	create_ctr absent
	[ "$status" -eq 0 ]
	start_validator
	wait_for 10 guard_ready
	stop_faulty
	wait_for 10 guard_state_is disconnected
	create_ctr killed
	[ "$status" -eq 0 ]
	[ "$(crictl_cmd ps -aq | wc -l)" -eq 2 ]
}

@test "a required validator hanging past the request timeout refuses CreateContainer; one subscribed to CreateContainer only is not subscribed" {
	local required='events = ["ValidateContainerAdjustment"]'
	start_runtime "$(policy fail "$required")"
	start_validator --mode hang --hang 5s --fault-events ValidateContainerAdjustment
	wait_for 10 guard_ready
	run_pod web
	create_ctr hung
	[ "$status" -ne 0 ]
	assert_refused CreateContainer default/web hung "did not answer ValidateContainerAdjustment"
	no_container
	stop_faulty

	start_faulty --events CreateContainer
	create_ctr unsubscribed
	[ "$status" -ne 0 ]
	assert_refused CreateContainer default/web unsubscribed "not subscribed to ValidateContainerAdjustment"
	no_container
}

# update_fails_with_hang POLICY: guard declares fail_request itself and
# hangs in UpdateContainer past the request timeout; crictl update fails.
update_fails_with_hang() {
	start_runtime "$1"
	# start_faulty returns once the plugin is synchronized.
	start_faulty --failure-policy fail-request --mode hang --hang 5s --fault-events UpdateContainer
	run_pod web
	create_ctr app
	[ "$status" -eq 0 ]
	id=$output
	crictl_cmd start "$id" >/dev/null
	update_gated "$id" 256
	echo "update: $stderr"
	[ "$status" -ne 0 ]
	# The plugin's own failure policy failed it, not the requirement.
	assert_not_contains "$stderr" "required NRI plugin"
	stop_faulty
	stop_runtime
}

@test "the plugin's own fail_request outside the requirement: required for CreateContainer, hanging in UpdateContainer, crictl update fails as without the requirement" {
	update_fails_with_hang ""
	update_fails_with_hang "$(policy fail)"
}

@test "the plugin's own fail_request under fail_policy ignore: hanging in CreateContainer still refuses" {
	start_runtime "$(policy ignore)"
	start_faulty --failure-policy fail-request --mode hang --hang 5s --fault-events CreateContainer
	wait_for 10 guard_ready
	run_pod web
	create_ctr app
	echo "create: $stderr"
	[ "$status" -ne 0 ]
	no_container
}

# acted_count LOG EVENT CONTAINER: how many EVENT requests for CONTAINER of
# pod default/web the plugin logging to LOG acted on.
acted_count() {
	grep -c "acted $2 pod=default/web .*container=$3\$" "$1" || true
}

@test "undo of a refused CreateContainer: the plugin before the required one gets one StopContainer and one RemoveContainer, the one after none" {
	local observer=(--events RunPodSandbox,CreateContainer,StopContainer,RemoveContainer,RemovePodSandbox)
	for fault in hang crash-during; do
		start_runtime "$(policy fail)"
		# Both also subscribe to RemovePodSandbox: the end of the pod.
		start_plugin BEFORE_PID "$TESTDIR/before.log" --name before --idx 05 "${observer[@]}" \
			--acted-env NRI_FAULTY_BEFORE --acted-annotation nri-faulty.nrigate.io/before
		start_plugin AFTER_PID "$TESTDIR/after.log" --name after --idx 20 "${observer[@]}" \
			--acted-env NRI_FAULTY_AFTER --acted-annotation nri-faulty.nrigate.io/after
		start_faulty --mode "$fault" --hang 5s --fault-events CreateContainer
		wait_for 10 guard_ready
		run_pod web
		create_ctr app
		echo "$fault: $stderr"
		[ "$status" -ne 0 ]
		assert_refused CreateContainer default/web app "CreateContainer"
		no_container
		# The undo is part of the refused request: it is done when crictl returns.
		[ "$(acted_count "$TESTDIR/before.log" CreateContainer app)" -eq 1 ]
		[ "$(acted_count "$TESTDIR/before.log" StopContainer app)" -eq 1 ]
		[ "$(acted_count "$TESTDIR/before.log" RemoveContainer app)" -eq 1 ]
		[ "$(acted_count "$TESTDIR/after.log" CreateContainer app)" -eq 0 ]
		[ "$(acted_count "$TESTDIR/after.log" StopContainer app)" -eq 0 ]
		[ "$(acted_count "$TESTDIR/after.log" RemoveContainer app)" -eq 0 ]
		# Removing the pod relays nothing more for the refused container.
		crictl_cmd stopp "$POD_ID" >/dev/null
		crictl_cmd rmp "$POD_ID" >/dev/null
		wait_for 10 grep -q "acted RemovePodSandbox pod=default/web" "$TESTDIR/before.log"
		wait_for 10 grep -q "acted RemovePodSandbox pod=default/web" "$TESTDIR/after.log"
		[ "$(acted_count "$TESTDIR/before.log" StopContainer app)" -eq 1 ]
		[ "$(acted_count "$TESTDIR/before.log" RemoveContainer app)" -eq 1 ]
		[ "$(acted_count "$TESTDIR/after.log" StopContainer app)" -eq 0 ]
		[ "$(acted_count "$TESTDIR/after.log" RemoveContainer app)" -eq 0 ]
		stop_plugins
		stop_runtime
		rm -f "$TESTDIR"/before.log "$TESTDIR"/after.log "$TESTDIR"/faulty.log
	done
}

@test "undo of a creation that fails after the relay (the runtime cannot create the container): the plugin that acted on it gets one StopContainer and one RemoveContainer" {
	[[ $RUNTIME != containerd ]] ||
		runtime_lacks "a CreateContainer that runc fails" "containerd creates the runc container at StartContainer, so a command runc cannot run fails the start; a CreateContainer failing after its relay is undone for plugins by containerd's own deferred NRI undo"
	start_runtime "$(policy fail)"
	start_faulty
	wait_for 10 guard_ready
	run_pod web
	# The plugin answers; runc then cannot create the container: its
	# command does not exist in the image.
	create_ctr missing /no/such/command
	echo "create: $stderr"
	[ "$status" -ne 0 ]
	assert_contains "$stderr" /no/such/command
	no_container
	[ "$(acted_count "$TESTDIR/faulty.log" CreateContainer missing)" -eq 1 ]
	[ "$(acted_count "$TESTDIR/faulty.log" StopContainer missing)" -eq 1 ]
	[ "$(acted_count "$TESTDIR/faulty.log" RemoveContainer missing)" -eq 1 ]
	# Removing the pod relays nothing more for the container.
	crictl_cmd stopp "$POD_ID" >/dev/null
	crictl_cmd rmp "$POD_ID" >/dev/null
	[ "$(acted_count "$TESTDIR/faulty.log" StopContainer missing)" -eq 1 ]
	[ "$(acted_count "$TESTDIR/faulty.log" RemoveContainer missing)" -eq 1 ]
}

# ctr_state_is ID STATE: crictl inspect shows the container in STATE.
ctr_state_is() {
	[ "$(crictl_cmd inspect -o go-template --template '{{.status.state}}' "$1" 2>/dev/null)" = "$2" ]
}

@test "a container exiting by itself is reported to the plugin as stopped, once" {
	[[ $RUNTIME != crio ]] ||
		runtime_lacks "NRI StopContainer for a container's own exit" "CRI-O v1.36.3's exit monitor (server.handleExit) does not call NRI; it relays StopContainer only for CRI StopContainer and failed starts"
	start_runtime "$(policy fail)"
	start_faulty
	wait_for 10 guard_ready
	run_pod web
	cfg=$(ctr_config quitter sh -c 'exit 0')
	id=$(crictl_cmd create "$POD_ID" "$cfg" "$POD_JSON")
	crictl_cmd start "$id" >/dev/null
	# No stop or remove is sent: only the exit monitor can report it.
	wait_for 5 stop_acted_once quitter
	wait_for 5 ctr_state_is "$id" CONTAINER_EXITED
	crictl_cmd rm "$id" >/dev/null
	stop_acted_once quitter
}

@test "metrics: a refusal is counted, the plugin's readiness is a gauge" {
	use_metrics
	start_runtime "$(policy fail)"
	metric_is "$METRIC_PLUGIN_READY{plugin=\"guard\"}" 0
	run_pod web
	create_ctr app
	[ "$status" -ne 0 ]
	assert_refused CreateContainer default/web app "is not registered"
	metric_is "$METRIC_DECISIONS{event=\"CreateContainer\",outcome=\"refused\",plugin=\"guard\"}" 1

	start_faulty
	wait_for 10 guard_ready
	wait_for 5 metric_is "$METRIC_PLUGIN_READY{plugin=\"guard\"}" 1
	create_ctr app
	[ "$status" -eq 0 ]
	# Only requests the plugin could not act on are counted.
	metric_is "$METRIC_DECISIONS{event=\"CreateContainer\",outcome=\"refused\",plugin=\"guard\"}" 1
	[ -z "$(metric_value "$METRIC_DECISIONS{event=\"CreateContainer\",outcome=\"ignored\",plugin=\"guard\"}")" ]
}
