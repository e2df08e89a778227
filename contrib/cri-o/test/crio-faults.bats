#!/usr/bin/env bats
# Patched CRI-O: bad tables of required NRI plugins, drop-ins, reload and
# crashes (issue 10, "bad input and faults"), each test on a private
# instance (test/helpers.bash).

bats_require_minimum_version 1.5.0

RUNTIME=crio
load "$BATS_TEST_DIRNAME/../../../test/helpers"

# setup_file, setup and teardown: the helpers' defaults.

# crio_cmd ARGS...: bin/crio on the test instance's config (crio config, or
# a start in the foreground that must fail: bounded by 20 s, exit 124).
crio_cmd() {
	timeout 20 "$RUNTIME_BINDIR/crio" --config "$CRIO_CONFIG" --config-dir "$CRIO_CONFIG_DIR" "$@"
}

# guard_table: plugin guard's table as crio config prints it.
guard_table() {
	local out
	out=$(crio_cmd config 2>/dev/null) || return
	sed -n '/^\[crio\.nri\.required_plugins\."guard"\]/,/^\[/p' <<<"$out"
}

# refuses_config WANT: crio config and crio both stop on the configuration,
# saying WANT; crio config prints nothing of it and crio never serves.
refuses_config() {
	run crio_cmd config
	[ "$status" -ne 0 ]
	assert_contains "$(unquote_log <<<"$output")" "$1"
	# Nothing of the configuration is printed (the error may name a table).
	[ -z "$(grep '^\[crio' <<<"$output")" ]

	run crio_cmd
	[ "$status" -ne 0 ] && [ "$status" -ne 124 ]
	assert_contains "$(unquote_log <<<"$output")" "$1"
	[ ! -S "$CRI_SOCK" ]
}

@test "a bad value of a required plugin stops crio and crio config, naming the file, the table, the key and the value" {
	runtime_config '[crio.nri.required_plugins."guard"]
fail_policy = "maybe"'
	refuses_config "$CRIO_CONFIG_DIR/10-policy.conf: [crio.nri.required_plugins.\"guard\"]: invalid required NRI plugin \"guard\": fail_policy = \"maybe\": allowed values are \"fail\" and \"ignore\""
}

@test "a bad registration_wait and a bad label selector are named with their values" {
	runtime_config '[crio.nri.required_plugins."guard"]
registration_wait = "soon"'
	run crio_cmd config
	[ "$status" -ne 0 ]
	assert_contains "$(unquote_log <<<"$output")" 'registration_wait = "soon": must be a duration from "0s" to "1m0s"'

	printf '[crio.nri.required_plugins."guard"]\nmatch_expressions = [{ key = "tier", operator = "Near" }]\n' >"$CRIO_CONFIG_DIR/10-policy.conf"
	run crio_cmd config
	[ "$status" -ne 0 ]
	# The file which sets the value is named.
	assert_contains "$(unquote_log <<<"$output")" \
		"$CRIO_CONFIG_DIR/10-policy.conf: [crio.nri.required_plugins.\"guard\"]: invalid required NRI plugin \"guard\": match_expressions[0].operator = \"Near\""
}

# refuses_unknown_key TABLES KEY NEAREST: crio config and crio stop on the
# drop-in TABLES, naming the drop-in, the unknown KEY and the NEAREST valid
# key.
refuses_unknown_key() {
	runtime_config "$1"
	refuses_config "$CRIO_CONFIG_DIR/10-policy.conf: unknown key of the required NRI plugins: $2 (did you mean $3?)"
}

@test "two tables naming one plugin instance (\"guard\" and \"10-guard\") in two files stop crio and crio config, naming the file of the key NRI checks second (\"guard\")" {
	runtime_config '[crio.nri.required_plugins."10-guard"]'
	printf '[crio.nri.required_plugins."guard"]\nfail_policy = "ignore"\n' >"$CRIO_CONFIG_DIR/20-guard.conf"
	refuses_config "$CRIO_CONFIG_DIR/20-guard.conf: [crio.nri.required_plugins.\"guard\"]: invalid required NRI plugin \"guard\": name = \"guard\": \"10-guard\" requires instances of the same plugin"
}

@test "a misspelled key of a required plugin stops crio and crio config, naming the file, the key and the nearest key" {
	refuses_unknown_key '[crio.nri.required_plugins."guard"]
fail_policy = "fail"
exclude_namespace = ["nri-plugins"]' \
		'crio.nri.required_plugins."guard".exclude_namespace' 'crio.nri.required_plugins."guard".exclude_namespaces'
}

@test "a misspelled key of an exemption stops crio and crio config, naming the file, the key and the nearest key" {
	refuses_unknown_key '[crio.nri.required_plugins."guard"]
fail_policy = "fail"
[[crio.nri.required_plugins."guard".exempt]]
namespace = "nri-plugins"
match_lables = { app = "guard" }' \
		'crio.nri.required_plugins."guard".exempt.match_lables' 'crio.nri.required_plugins."guard".exempt.match_labels'
}

@test "a misspelled table of required plugins stops crio and crio config, naming the file, the table and the right one" {
	refuses_unknown_key '[crio.nri.required_plugin."guard"]
fail_policy = "fail"' \
		'crio.nri.required_plugin' 'crio.nri.required_plugins'
}

@test "label keys are not configuration keys: a label named like a misspelled key starts crio" {
	start_runtime '[crio.nri.required_plugins."guard"]
match_labels = { fail_polcy = "x", "app.kubernetes.io/name" = "web" }
[[crio.nri.required_plugins."guard".exempt]]
namespace = "nri-plugins"
match_labels = { exclude_namespace = "x" }'
	crictl_cmd info | jq -e '.nri.plugins[] | select(.key == "guard")'
}

@test "a SIGHUP reload with a misspelled key keeps the required plugins, logs the key, and reloads the other options, as a bad value does" {
	start_runtime '[crio.nri.required_plugins."guard"]
fail_policy = "fail"'
	printf '[crio.runtime]\nlog_level = "debug"\n[crio.nri.required_plugins."guard"]\nfail_policy = "ignore"\nregistration_wiat = "5s"\n' \
		>"$CRIO_CONFIG_DIR/10-policy.conf"
	runtime_reload
	wait_for 10 grep -q "$RELOAD_KEPT_LOG"'.*unknown key of the required NRI plugins: crio.nri.required_plugins.\\"guard\\".registration_wiat' "$TESTDIR/daemon.log"
	crictl_cmd info | jq -e '.nri.plugins[] | select(.key == "guard" and .fail_policy == "fail")'
	# The rest of the reload went on.
	grep -q 'Set config log_level to \\"debug\\"' "$TESTDIR/daemon.log"
	[ "$(grep -c 'Unable to reload configuration' "$TESTDIR/daemon.log")" -eq 0 ]
}

@test "required plugins with enable_nri = false stop crio, naming both keys" {
	ENABLE_NRI=false runtime_config '[crio.nri.required_plugins."guard"]
fail_policy = "fail"'
	run crio_cmd
	[ "$status" -ne 0 ] && [ "$status" -ne 124 ]
	assert_contains "$(unquote_log <<<"$output")" \
		"$CRIO_CONFIG_DIR/10-policy.conf: [crio.nri.required_plugins.\"guard\"]: NRI plugins are required while NRI is disabled (enable_nri = false)"
}

@test "a plugin the default validator requires too stops crio and crio config, naming the file and both keys" {
	runtime_config '[crio.nri.required_plugins."10-guard"]
[crio.nri.default_validator]
nri_enable_default_validator = true
nri_validator_required_plugins = ["guard"]'
	refuses_config "$CRIO_CONFIG_DIR/10-policy.conf: [crio.nri.required_plugins.\"10-guard\"]: the default validator requires \"guard\" too ([crio.nri.default_validator] nri_validator_required_plugins = [\"guard\"]): require a plugin in one place"
}

@test "crio config prints the tables of required plugins of the drop-ins, with the keys they set" {
	runtime_config '[crio.nri.required_plugins."guard"]
fail_policy = "fail"
registration_wait = "3s"
exclude_namespaces = ["system"]
match_labels = { "app.kubernetes.io/part-of" = "shop" }
[[crio.nri.required_plugins."guard".exempt]]
namespace = "nri-plugins"
match_labels = { app = "guard" }'
	table=$(guard_table)
	assert_contains "$table" 'fail_policy = "fail"'
	assert_contains "$table" 'registration_wait = "3s"'
	assert_contains "$table" 'exclude_namespaces = ["system"]'
	assert_contains "$table" 'match_labels = { "app.kubernetes.io/part-of" = "shop" }'
	config=$(crio_cmd config 2>/dev/null)
	assert_contains "$(sed -n '/^\[\[crio\.nri\.required_plugins\."guard"\.exempt\]\]/,/^\[/p' <<<"$config")" 'match_labels = { "app" = "guard" }'
	# What crio config prints is a configuration crio reads back the same.
	printf '%s\n' "$config" >"$TESTDIR/printed.conf"
	rm "$CRIO_CONFIG_DIR/10-policy.conf"
	[ "$(timeout 20 "$RUNTIME_BINDIR/crio" --config "$TESTDIR/printed.conf" --config-dir "$CRIO_CONFIG_DIR" config 2>/dev/null |
		sed -n '/^\[crio\.nri\.required_plugins\./,$p')" = "$(sed -n '/^\[crio\.nri\.required_plugins\./,$p' <<<"$config")" ]
}

@test "a later drop-in's table of a plugin replaces the earlier one's whole table (CRI-O's drop-in rule)" {
	runtime_config '[crio.nri.required_plugins."guard"]
fail_policy = "ignore"
registration_wait = "3s"
[crio.nri.required_plugins."other"]'
	printf '[crio.nri.required_plugins."guard"]\nreadiness = "network"\n' >"$CRIO_CONFIG_DIR/20-more.conf"
	table=$(guard_table)
	# 20-more.conf's table alone: its readiness, nothing of 10-policy.conf's.
	assert_contains "$table" 'readiness = "network"'
	assert_not_contains "$table" 'fail_policy'
	assert_not_contains "$table" 'registration_wait'
	# Both files' plugins.
	assert_contains "$(crio_cmd config 2>/dev/null)" '[crio.nri.required_plugins."other"]'
}

@test "a bad SIGHUP reload keeps the required plugins and logs why" {
	start_runtime '[crio.nri.required_plugins."guard"]
fail_policy = "fail"'
	printf '[crio.nri.required_plugins."guard"]\nfail_policy = "maybe"\n' >"$CRIO_CONFIG_DIR/10-policy.conf"
	runtime_reload
	wait_for 10 grep -q "$RELOAD_KEPT_LOG"'.*fail_policy = \\"maybe\\"' "$TESTDIR/daemon.log"
	info=$(crictl_cmd info)
	jq -e '.status.conditions[] | select(.type == "NRIPluginsReady" and .status == false)' <<<"$info"
	jq -e '.nri.plugins[] | select(.key == "guard" and .fail_policy == "fail")' <<<"$info"
}

@test "kill -9 of crio while a create waits for the plugin leaves nothing behind; the plugin then syncs the survivors" {
	CRIO_LOG_LEVEL=debug start_runtime '[crio.nri.required_plugins."guard"]
fail_policy = "fail"
registration_wait = "30s"
exclude_namespaces = ["system"]'
	# A survivor: a running container in the exempt namespace.
	survivor=$(crictl_cmd runp "$(nri_pod_config survivor system)")
	sctr=$(crictl_cmd create "$survivor" "$(ctr_config keeper sleep 3600)" "$TESTDIR/survivor-pod.json")
	crictl_cmd start "$sctr"
	# A victim: its create waits for the absent plugin, before CRI-O creates
	# anything for it (no name reservation, no storage).
	victim=$(crictl_cmd runp "$(nri_pod_config victim default)")
	before=$(storage_containers)
	request_in_background crictl_cmd create "$victim" "$(ctr_config app sleep 3600)" "$TESTDIR/victim-pod.json"
	wait_for 10 grep -q "$NRI_WAIT_LOGGED" "$TESTDIR/daemon.log"
	[ "$(storage_containers)" = "$before" ]
	crash_runtime
	[ "$REQUEST_STATUS" -ne 0 ]

	runtime_start
	[ "$(crictl_cmd ps -a -q)" = "$sctr" ]
	pods=$(crictl_cmd pods -q)
	[[ $pods == *"$survivor"* ]]
	# Nothing but the pods and the survivor's container in the store.
	[ "$(storage_containers)" = "$(printf '%s\n' $pods "$sctr" | sort)" ]
	npods=$(wc -l <<<"$pods")

	# The required plugin connects after the restart and is synchronized
	# with the surviving pods and container, then gates as before.
	[ "$(nri_condition NRIPluginsReady)" = false ]
	start_faulty
	grep -q "ready (synchronized $npods pods, 1 containers)" "$TESTDIR/faulty.log"
	wait_for 10 nri_condition_is NRIPluginsReady true
	ctr=$(crictl_cmd create "$victim" "$TESTDIR/app-ctr.json" "$TESTDIR/victim-pod.json")
	[ "$(injected_env "$ctr")" = guard ]
}

@test "kill -9 of crio while the required plugin holds a CreateContainer: after the restart the container does not exist, and can be created once the plugin is back" {
	NRI_REQUEST_TIMEOUT=60s start_runtime '[crio.nri.required_plugins."guard"]
fail_policy = "fail"'
	echo ok >"$TESTDIR/control"
	start_faulty --control "$TESTDIR/control"
	pod=$(crictl_cmd runp "$(nri_pod_config web)")
	echo "hang 60s" >"$TESTDIR/control"
	request_in_background crictl_cmd create "$pod" "$(ctr_config app sleep 3600)" "$TESTDIR/web-pod.json"
	# Killed while the plugin holds the request (inside the 60s request timeout).
	wait_for 10 grep -q "hang CreateContainer" "$TESTDIR/faulty.log"
	crash_runtime
	stop_faulty
	runtime_start
	# The plugin never acted on it: no container, nothing in the store but the pod.
	[ -z "$(crictl_cmd ps -aq)" ]
	[ "$(crictl_cmd pods -q --no-trunc)" = "$(storage_containers)" ]
	[ "$(nri_condition NRIPluginsReady)" = false ]
	echo ok >"$TESTDIR/control"
	start_faulty --control "$TESTDIR/control"
	wait_for 10 nri_condition_is NRIPluginsReady true
	# The same container can be created again: its name was not kept.
	ctr=$(crictl_cmd create "$pod" "$TESTDIR/app-ctr.json" "$TESTDIR/web-pod.json")
	[ "$(injected_env "$ctr")" = guard ]
}

@test "kill -9 of crio while a RunPodSandbox waits for the plugin leaves nothing behind" {
	CRIO_LOG_LEVEL=debug start_runtime '[crio.nri.required_plugins."guard"]
fail_policy = "fail"
events = ["RunPodSandbox", "CreateContainer"]
registration_wait = "30s"'
	request_in_background crictl_cmd runp "$(nri_pod_config waiter)"
	wait_for 10 grep -q "$NRI_WAIT_LOGGED" "$TESTDIR/daemon.log"
	crash_runtime
	[ "$REQUEST_STATUS" -ne 0 ]
	runtime_start
	[ -z "$(crictl_cmd pods -q)" ]
	[ -z "$(storage_containers)" ]
	[ -z "$(pinned_namespaces)" ]
	[ -z "$(ipam_allocations)" ]
	start_faulty
	pod=$(crictl_cmd runp "$TESTDIR/waiter-pod.json")
	grep -q "acted RunPodSandbox pod=default/waiter " "$TESTDIR/faulty.log"
	[ "$(crictl_cmd pods -q --no-trunc)" = "$pod" ]
}

@test "crictl stopp of a pod whose container creation waits for the plugin returns at once" {
	CRIO_LOG_LEVEL=debug start_runtime '[crio.nri.required_plugins."guard"]
fail_policy = "fail"
events = ["CreateContainer"]
registration_wait = "30s"'
	pod=$(crictl_cmd runp "$(nri_pod_config waiter default)")
	crictl_cmd create "$pod" "$(ctr_config app sleep 3600)" "$TESTDIR/waiter-pod.json" \
		>"$TESTDIR/create.out" 2>&1 &
	create_pid=$!
	wait_for 10 grep -q "$NRI_WAIT_LOGGED" "$TESTDIR/daemon.log"
	start=$(date +%s%N)
	crictl_cmd stopp "$pod"
	ms=$((($(date +%s%N) - start) / 1000000))
	echo "crictl stopp returned after ${ms} ms while the create waited (registration_wait 30s)" |
		tee -a "${STOPP_REPORT:-/dev/null}" >&3
	# The create still waits: the stop did not wait for it.
	kill -0 "$create_pid"
	((ms < 5000))
	kill "$create_pid" 2>/dev/null || true
}
