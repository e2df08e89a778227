#!/usr/bin/env bats
# nrigate config: merging a main file with drop-ins, error text for bad
# values, and the daemon refusing or accepting a configuration.

bats_require_minimum_version 1.5.0

load helpers

setup() {
	require_binary
	setup_tmpdir
	FIX=$FIXTURES/config
}

teardown() {
	if [[ -n ${DAEMON_PID:-} ]]; then
		kill "$DAEMON_PID" 2>/dev/null || true
		wait "$DAEMON_PID" 2>/dev/null || true
	fi
	cleanup_tmpdir
}

@test "config merges the main file and two drop-ins key by key" {
	run --separate-stderr "$NRIGATE_BINARY" config -c "$FIX/crio.conf" -d "$FIX/crio.conf.d"
	[ "$status" -eq 0 ]
	echo "$output" >"$TESTDIR/out.conf"
	guard='crio.nri.policy.plugins."guard"'

	# Later drop-in wins; keys no drop-in sets keep the main file's value.
	[ "$(toml_value "$TESTDIR/out.conf" root crio)" = '"/fixture/dropin20/root"' ]
	[ "$(toml_value "$TESTDIR/out.conf" runroot crio)" = '"/fixture/main/run"' ]
	[ "$(toml_value "$TESTDIR/out.conf" log_level crio.runtime)" = '"debug"' ]
	[ "$(toml_value "$TESTDIR/out.conf" nri_listen crio.nri)" = '"/fixture/nri.sock"' ]
	[ "$(toml_value "$TESTDIR/out.conf" nri_plugin_request_timeout crio.nri)" = '"3s"' ]
	# The guard plugin: fail_policy from 20, lists from 10 (replacing the
	# main file's), wait and selector from the main file.
	[ "$(toml_value "$TESTDIR/out.conf" fail_policy "$guard")" = '"skip"' ]
	[ "$(toml_value "$TESTDIR/out.conf" exclude_namespaces "$guard")" = '["only-this"]' ]
	[ "$(toml_value "$TESTDIR/out.conf" events "$guard")" = '["RunPodSandbox", "CreateContainer"]' ]
	[ "$(toml_value "$TESTDIR/out.conf" registration_wait "$guard")" = '"4s"' ]
	[ "$(toml_value "$TESTDIR/out.conf" pod_selector "$guard")" = '"tier=gold"' ]
	# A plugin only a drop-in names gets the defaults for what it leaves out.
	[ "$(toml_value "$TESTDIR/out.conf" readiness 'crio.nri.policy.plugins."net"')" = '"network"' ]
	[ "$(toml_value "$TESTDIR/out.conf" events 'crio.nri.policy.plugins."net"')" = '["CreateContainer"]' ]

	# The unknown CRI-O key is reported with file and key, not fatal.
	assert_contains "$stderr" "file=$FIX/crio.conf"
	assert_contains "$stderr" "key=crio.runtime.pids_limit"
}

@test "config output loads back to the same configuration" {
	"$NRIGATE_BINARY" config -c "$FIX/crio.conf" -d "$FIX/crio.conf.d" >"$TESTDIR/one.conf" 2>/dev/null
	"$NRIGATE_BINARY" config -c "$TESTDIR/one.conf" -d "$TESTDIR/none" >"$TESTDIR/two.conf"
	diff -u "$TESTDIR/one.conf" "$TESTDIR/two.conf"
	# Global flags before the command name work as well.
	"$NRIGATE_BINARY" -c "$TESTDIR/one.conf" -d "$TESTDIR/none" config >"$TESTDIR/three.conf"
	diff -u "$TESTDIR/one.conf" "$TESTDIR/three.conf"
}

@test "config --default prints the defaults with doc comments" {
	run "$NRIGATE_BINARY" config --default
	[ "$status" -eq 0 ]
	assert_contains "$output" 'enable_nri = true'
	assert_contains "$output" 'nri_listen = "/var/run/nri/nri.sock"'
	assert_contains "$output" 'nri_plugin_registration_timeout = "5s"'
	assert_contains "$output" '# Enable NRI support.'
	assert_contains "$output" '[crio.nri.policy]'
}

@test "a bad fail_policy names the file, the key, the value and the allowed values" {
	run --separate-stderr "$NRIGATE_BINARY" config -c "$FIX/crio.conf" -d "$FIX/bad.d"
	[ "$status" -eq 1 ]
	assert_contains "$stderr" "$FIX/bad.d/50-bad.conf"
	assert_contains "$stderr" 'crio.nri.policy.plugins."guard".fail_policy'
	assert_contains "$stderr" '"sometimes"'
	assert_contains "$stderr" 'allowed values are "fail", "ignore" (alias "skip")'
	[ -z "$output" ]
}

@test "a wrong type names the file and the key" {
	printf '[crio.nri]\nenable_nri = "yes"\n' >"$TESTDIR/crio.conf"
	run --separate-stderr "$NRIGATE_BINARY" config -c "$TESTDIR/crio.conf" -d "$TESTDIR/none"
	[ "$status" -eq 1 ]
	assert_contains "$stderr" "$TESTDIR/crio.conf: line 2: crio.nri.enable_nri"
}

@test "an explicit missing config file is an error" {
	run "$NRIGATE_BINARY" config -c "$TESTDIR/missing.conf"
	[ "$status" -eq 1 ]
	assert_contains "$output" "$TESTDIR/missing.conf"
}

@test "the daemon refuses to start with a bad fail_policy" {
	run timeout 10 "$NRIGATE_BINARY" -c "$FIX/crio.conf" -d "$FIX/bad.d"
	[ "$status" -eq 1 ]
	assert_contains "$output" 'crio.nri.policy.plugins."guard".fail_policy'
}

@test "the daemon serves NRI from [crio.nri] and stops cleanly on SIGTERM" {
	cat >"$TESTDIR/crio.conf" <<-TOML
		[crio]
		root = "$TESTDIR/root"
		runroot = "$TESTDIR/run"
		[crio.api]
		listen = "$TESTDIR/nrigate.sock"
		[crio.nri]
		nri_listen = "$TESTDIR/nri.sock"
		nri_plugin_dir = "$TESTDIR/plugins"
		nri_plugin_config_dir = "$TESTDIR/plugins.d"
	TOML
	"$NRIGATE_BINARY" -c "$TESTDIR/crio.conf" -d "$TESTDIR/none" --log-level debug 2>"$TESTDIR/log" &
	DAEMON_PID=$!
	wait_for 10 test -S "$TESTDIR/nri.sock"
	# A real plugin registers and is synchronized over that socket.
	if [[ -x $REPO_ROOT/bin/nri-faulty ]]; then
		"$REPO_ROOT/bin/nri-faulty" -socket "$TESTDIR/nri.sock" 2>"$TESTDIR/plugin.log" &
		plugin=$!
		wait_for 10 grep -q 'plugin \\"50-nri-faulty\\" connected and synchronized' "$TESTDIR/log"
		kill "$plugin"
		wait "$plugin" || true
	fi
	kill -TERM "$DAEMON_PID"
	status=0
	wait "$DAEMON_PID" || status=$?
	DAEMON_PID=
	cat "$TESTDIR/log"
	[ "$status" -eq 0 ]
	assert_contains "$(cat "$TESTDIR/log")" "nrigate stopped"
}
