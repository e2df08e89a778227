package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nrigate/nrigate/pkg/nripolicy"
)

// write creates dir/name with content and returns its path.
func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustLoad(t *testing.T, file, dir string) (*Config, []Warning) {
	t.Helper()
	cfg, warnings, err := Load(file, dir)
	if err != nil {
		t.Fatalf("Load(%q, %q): %v", file, dir, err)
	}
	return cfg, warnings
}

func TestDefaults(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	c := cfg.Crio
	checks := map[string][2]any{
		"root":                            {c.Root, "/var/lib/nrigate"},
		"runroot":                         {c.RunRoot, "/run/nrigate"},
		"listen":                          {c.API.Listen, "/var/run/nrigate/nrigate.sock"},
		"default_runtime":                 {c.Runtime.DefaultRuntime, "runc"},
		"cgroup_manager":                  {c.Runtime.CgroupManager, "cgroupfs"},
		"log_level":                       {c.Runtime.LogLevel, "info"},
		"runtime_path":                    {cfg.DefaultHandler().RuntimePath, "/usr/sbin/runc"},
		"monitor_path":                    {cfg.DefaultHandler().MonitorPath, "/usr/bin/conmon"},
		"enable_nri":                      {c.NRI.Enabled, true},
		"nri_listen":                      {c.NRI.SocketPath, "/var/run/nri/nri.sock"},
		"nri_plugin_dir":                  {c.NRI.PluginPath, "/opt/nri/plugins"},
		"nri_plugin_config_dir":           {c.NRI.PluginConfigPath, "/etc/nri/conf.d"},
		"nri_plugin_registration_timeout": {c.NRI.PluginRegistrationTimeout.Std(), 5 * time.Second},
		"nri_plugin_request_timeout":      {c.NRI.PluginRequestTimeout.Std(), 2 * time.Second},
		"nri_disable_connections":         {c.NRI.DisableConnections, false},
		"nri_enable_default_validator":    {c.NRI.DefaultValidator.Enable, false},
		"exempt_static_pods":              {c.NRI.Policy.ExemptStaticPods, true},
		"plugins":                         {len(c.NRI.Policy.Plugins), 0},
		"enable_metrics":                  {c.Metrics.Enable, false},
		"metrics_host":                    {c.Metrics.Host, "127.0.0.1"},
		"metrics_port":                    {c.Metrics.Port, 9090},
	}
	for key, v := range checks {
		if v[0] != v[1] {
			t.Errorf("default %s = %v, want %v", key, v[0], v[1])
		}
	}
}

func TestMissingFiles(t *testing.T) {
	// The default file may be absent: the embedded defaults apply.
	if _, err := os.Stat(DefaultConfigFile); err != nil {
		cfg, _ := mustLoad(t, DefaultConfigFile, filepath.Join(t.TempDir(), "none"))
		if !reflect.DeepEqual(cfg, DefaultConfig()) {
			t.Errorf("missing default file: got %+v, want defaults", cfg)
		}
	}
	// An explicitly named file must exist.
	missing := filepath.Join(t.TempDir(), "crio.conf")
	_, _, err := Load(missing, "")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), missing) {
		t.Errorf("explicit missing file: err = %v, want ErrInvalid naming %s", err, missing)
	}
}

func TestDropInPrecedence(t *testing.T) {
	dir := t.TempDir()
	main := write(t, dir, "crio.conf", `
[crio]
root = "/main/root"
runroot = "/main/run"
[crio.nri]
nri_plugin_request_timeout = "3s"
[crio.nri.default_validator]
nri_validator_required_plugins = ["x", "y", "z"]
[crio.nri.policy.plugins."guard"]
fail_policy = "fail"
registration_wait = "4s"
exclude_namespaces = ["kube-system", "guard-system"]
pod_selector = "tier=gold"
[crio.nri.policy.plugins."other"]
fail_policy = "ignore"
`)
	d := filepath.Join(dir, "crio.conf.d")
	// Lexical order: 10 before 20, and 20 wins where both set a key.
	write(t, d, "20-later.conf", `
[crio]
root = "/later/root"
[crio.nri.policy.plugins."guard"]
fail_policy = "skip"
`)
	write(t, d, "10-first.conf", `
[crio]
root = "/first/root"
[crio.nri.default_validator]
nri_validator_required_plugins = []
[crio.nri.policy.plugins."guard"]
exclude_namespaces = ["only-this"]
events = ["RunPodSandbox", "CreateContainer"]
`)
	write(t, d, "30-ignored.txt", "[crio]\nroot = \"/not/a/dropin\"\n")

	cfg, warnings := mustLoad(t, main, d)
	if len(warnings) != 0 {
		t.Errorf("unexpected warnings %v", warnings)
	}
	c := cfg.Crio
	if c.Root != "/later/root" {
		t.Errorf("root = %q, want the last drop-in's value", c.Root)
	}
	if c.RunRoot != "/main/run" {
		t.Errorf("runroot = %q, want the main file's value (no drop-in sets it)", c.RunRoot)
	}
	if got := c.NRI.DefaultValidator.RequiredPlugins; len(got) != 0 {
		t.Errorf("required_plugins = %q, want emptied by the drop-in", got)
	}
	if got := c.NRI.PluginRequestTimeout.Std(); got != 3*time.Second {
		t.Errorf("nri_plugin_request_timeout = %v, want 3s from the main file", got)
	}
	g := c.NRI.Policy.Plugins["guard"]
	if g == nil {
		t.Fatal("plugin guard lost")
	}
	want := &nripolicy.PluginConfig{
		FailPolicy:        nripolicy.FailPolicySkip,
		Events:            []nripolicy.Event{nripolicy.EventRunPodSandbox, nripolicy.EventCreateContainer},
		RegistrationWait:  nripolicy.Duration(4 * time.Second),
		Readiness:         nripolicy.ReadinessCondition,
		ExcludeNamespaces: []string{"only-this"},
		PodSelector:       "tier=gold",
	}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("guard merged key by key:\n got %+v\nwant %+v", g, want)
	}
	o := c.NRI.Policy.Plugins["other"]
	if o == nil || o.FailPolicy != nripolicy.FailPolicyIgnore || !reflect.DeepEqual(o.Events, nripolicy.DefaultEvents()) {
		t.Errorf("plugin other = %+v, want ignore with default events", o)
	}
}

func TestRuntimeHandlerMerge(t *testing.T) {
	dir := t.TempDir()
	main := write(t, dir, "crio.conf", `
[crio.runtime.runtimes.runc]
runtime_path = "/opt/custom/runc"
[crio.runtime.runtimes.kata]
runtime_path = "/usr/bin/kata"
`)
	write(t, dir, "d/10.conf", `
[crio.runtime.runtimes.runc]
runtime_root = "/custom/runc"
`)
	cfg, warnings := mustLoad(t, main, filepath.Join(dir, "d"))
	// kata is not the default handler: the server never uses it, and says so.
	if len(warnings) != 1 || warnings[0].Key != "crio.runtime.runtimes.kata" || warnings[0].File != main ||
		!strings.Contains(warnings[0].String(), `requests naming "kata" are refused`) {
		t.Errorf("warnings %v, want one about the unused kata handler in %s", warnings, main)
	}
	h := cfg.Crio.Runtime.Runtimes["runc"]
	want := &RuntimeHandler{RuntimePath: "/opt/custom/runc", RuntimeType: RuntimeTypeOCI, RuntimeRoot: "/custom/runc", MonitorPath: DefaultMonitorPath}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("runc handler = %+v, want %+v (merged key by key)", h, want)
	}
	k := cfg.Crio.Runtime.Runtimes["kata"]
	if k == nil || k.RuntimePath != "/usr/bin/kata" || k.RuntimeType != RuntimeTypeOCI || k.MonitorPath != DefaultMonitorPath {
		t.Errorf("kata handler = %+v", k)
	}
}

func TestUnknownKeys(t *testing.T) {
	dir := t.TempDir()
	main := write(t, dir, "crio.conf", `
[crio]
version_file = "/var/run/crio/version"
log_dir = "/var/log/crio/pods"
[crio.runtime]
pids_limit = 1024
[crio.tracing]
enable_tracing = false
tracing_endpoint = "0.0.0.0:4317"
[crio.image]
signature_policy = "/etc/crio/policy.json"
[crio.api]
stream_port = "10010"
`)
	d := filepath.Join(dir, "d")
	drop := write(t, d, "10-policy.conf", `
crio.stats.collection_period = 0
[crio.nri.policy.plugins."guard"]
fail_policy = "fail"
registration_timeout = "3s"
`)
	cfg, warnings := mustLoad(t, main, d)
	if cfg.Crio.NRI.Policy.Plugins["guard"] == nil {
		t.Fatal("known keys next to unknown ones must still load")
	}
	got := map[string]string{}
	for _, w := range warnings {
		got[w.Key] = w.File
		if !strings.Contains(w.String(), w.File) || !strings.Contains(w.String(), w.Key) {
			t.Errorf("warning text %q lacks file or key", w.String())
		}
	}
	want := map[string]string{
		"crio.version_file":       main,
		"crio.runtime.pids_limit": main,
		"crio.tracing":            main,
		// Keys nrigate has no use for are unknown, not silently accepted.
		"crio.log_dir":         main,
		"crio.image":           main,
		"crio.api.stream_port": main,
		"crio.nri.policy.plugins.guard.registration_timeout": drop,
		"crio.stats.collection_period":                       drop,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings:\n got %v\nwant %v", got, want)
	}
}

func TestValidationErrors(t *testing.T) {
	policy := "[crio.nri.policy.plugins.\"guard\"]\n"
	key := `crio.nri.policy.plugins."guard".`
	tests := []struct {
		name    string
		content string
		want    []string // substrings of the error, besides the file name
		policy  bool     // also wraps nripolicy.ErrInvalidConfig
	}{
		{"bad fail_policy", policy + `fail_policy = "sometimes"`,
			[]string{key + "fail_policy", `"sometimes"`, `"fail", "ignore" (alias "skip")`}, true},
		{"teardown event", policy + `events = ["CreateContainer", "StopContainer"]`,
			[]string{key + "events", `"StopContainer"`, "teardown events are never gated"}, true},
		{"empty events", policy + `events = []`,
			[]string{key + "events", "[]", "at least one of"}, true},
		{"negative wait", policy + `registration_wait = "-1s"`,
			[]string{key + "registration_wait", `"-1s"`, "must not be negative"}, true},
		{"bad readiness", policy + `readiness = "maybe"`,
			[]string{key + "readiness", `"maybe"`, `"condition", "network", "none"`}, true},
		{"bad glob", policy + `exclude_namespaces = ["kube-[system"]`,
			[]string{key + "exclude_namespaces", `"kube-[system"`, "glob pattern"}, true},
		{"bad selector", policy + `pod_selector = "app in (a"`,
			[]string{key + "pod_selector", `"app in (a"`, "label selector"}, true},
		{"bad exclude selector", policy + `exclude_pod_selector = "==x"`,
			[]string{key + "exclude_pod_selector", `"==x"`, "label selector"}, true},
		{"bad plugin name", "[crio.nri.policy.plugins.\"bad/name\"]\n",
			[]string{`crio.nri.policy.plugins."bad/name"`, "plugin base name"}, true},
		{"bad duration", policy + `registration_wait = "5 seconds"`,
			[]string{"crio.nri.policy.plugins.guard.registration_wait", `"5 seconds"`, `"5s"`}, false},
		{"bad nri duration", "[crio.nri]\nnri_plugin_request_timeout = \"soon\"\n",
			[]string{"crio.nri.nri_plugin_request_timeout", `"soon"`, `"500ms"`}, false},
		{"zero request timeout", "[crio.nri]\nnri_plugin_request_timeout = \"0s\"\n",
			[]string{"crio.nri.nri_plugin_request_timeout", `"0s"`, "positive duration"}, false},
		{"wrong type bool", "[crio.nri]\nenable_nri = \"yes\"\n",
			[]string{"crio.nri.enable_nri", "line 2", "type string", "boolean"}, false},
		{"wrong type list", policy + `namespaces = "default"`,
			[]string{"crio.nri.policy.plugins.guard.namespaces", "type string", "slice"}, false},
		{"wrong type int", "[crio.metrics]\nmetrics_port = \"9090\"\n",
			[]string{"crio.metrics.metrics_port", "type string"}, false},
		{"syntax error", "[crio\nroot = 1\n",
			[]string{"line 2", "table name"}, false},
		{"bad cgroup manager", "[crio.runtime]\ncgroup_manager = \"cgroupv3\"\n",
			[]string{"crio.runtime.cgroup_manager", `"cgroupv3"`, `only allowed value is "cgroupfs"`}, false},
		{"systemd cgroup manager", "[crio.runtime]\ncgroup_manager = \"systemd\"\n",
			[]string{"crio.runtime.cgroup_manager", `"systemd"`, "no systemd cgroup manager", `"cgroupfs"`}, false},
		{"bad log level", "[crio.runtime]\nlog_level = \"loud\"\n",
			[]string{"crio.runtime.log_level", `"loud"`, `"debug"`}, false},
		{"unknown default runtime", "[crio.runtime]\ndefault_runtime = \"crun\"\n",
			[]string{"crio.runtime.default_runtime", `"crun"`, `"runc"`}, false},
		{"bad runtime type", "[crio.runtime.runtimes.runc]\nruntime_type = \"vm\"\n",
			[]string{"crio.runtime.runtimes.runc.runtime_type", `"vm"`, `"oci"`}, false},
		{"relative runtime path", "[crio.runtime.runtimes.runc]\nruntime_path = \"bin/runc\"\n",
			[]string{"crio.runtime.runtimes.runc.runtime_path", `"bin/runc"`, "absolute path"}, false},
		{"bad metrics port", "[crio.metrics]\nmetrics_port = 70000\n",
			[]string{"crio.metrics.metrics_port", "70000", "0-65535"}, false},
		{"relative listen", "[crio.api]\nlisten = \"nrigate.sock\"\n",
			[]string{"crio.api.listen", `"nrigate.sock"`, "absolute path"}, false},
		{"policy with NRI disabled", "[crio.nri]\nenable_nri = false\n" + policy + `fail_policy = "fail"`,
			[]string{"crio.nri.policy.plugins", `["guard"]`, "enable_nri = false", "gate nothing"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// The bad value sits in a drop-in, so the error must name the
			// drop-in and not the main file.
			main := write(t, dir, "crio.conf", "[crio]\nroot = \"/r\"\n")
			drop := write(t, dir, "d/50-bad.conf", tc.content)
			cfg, _, err := Load(main, filepath.Dir(drop))
			if err == nil {
				t.Fatalf("loaded %+v, want an error", cfg)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if tc.policy && !errors.Is(err, nripolicy.ErrInvalidConfig) {
				t.Errorf("error %v does not wrap nripolicy.ErrInvalidConfig", err)
			}
			msg := err.Error()
			for _, s := range append([]string{drop}, tc.want...) {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q lacks %q", msg, s)
				}
			}
		})
	}
}

func TestValidationErrorNamesDefiningFile(t *testing.T) {
	dir := t.TempDir()
	// The main file sets the bad value; a drop-in sets another key of the
	// same plugin. The error must blame the main file.
	main := write(t, dir, "crio.conf", "[crio.nri.policy.plugins.guard]\nreadiness = \"maybe\"\n")
	write(t, dir, "d/10.conf", "[crio.nri.policy.plugins.guard]\nfail_policy = \"fail\"\n")
	_, _, err := Load(main, filepath.Join(dir, "d"))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.File != main {
		t.Fatalf("err = %v, want a ValidationError naming %s", err, main)
	}
}

func TestTemplateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	main := write(t, dir, "crio.conf", `
[crio]
root = "/tmp/r o\"ot"
[crio.runtime.runtimes."my.runtime"]
runtime_path = "/opt/bin/runc"
runtime_root = "/run/my"
monitor_path = "/usr/bin/conmon"
[crio.runtime]
default_runtime = "my.runtime"
log_level = "debug"
[crio.nri]
nri_disable_connections = true
nri_plugin_registration_timeout = "1m30s"
[crio.nri.default_validator]
nri_enable_default_validator = true
nri_validator_reject_namespace_adjustment = true
nri_validator_required_plugins = ["guard"]
nri_validator_tolerate_missing_plugins_annotation = "tolerate.example/missing"
[crio.nri.policy]
exempt_static_pods = false
tolerate_missing_plugins_annotation = "nrigate.io/tolerate"
[crio.nri.policy.plugins."10-device-injector"]
fail_policy = "fail"
events = ["RunPodSandbox", "UpdateContainer"]
registration_wait = "250ms"
readiness = "network"
namespaces = ["prod-*"]
exclude_namespaces = ["kube-system"]
pod_selector = "tier in (gold,silver)"
exclude_pod_selector = "app.kubernetes.io/name=device-injector"
runtime_handlers = ["runc"]
[crio.nri.policy.plugins.guard]
fail_policy = "ignore"
[crio.metrics]
enable_metrics = true
metrics_port = 9191
`)
	for name, cfg := range map[string]*Config{"default": DefaultConfig(), "custom": nil} {
		t.Run(name, func(t *testing.T) {
			if cfg == nil {
				cfg, _ = mustLoad(t, main, "")
			}
			var out bytes.Buffer
			if err := WriteTemplate(&out, cfg); err != nil {
				t.Fatal(err)
			}
			again, warnings := mustLoad(t, write(t, t.TempDir(), "out.conf", out.String()), "")
			if len(warnings) != 0 {
				t.Errorf("template has unknown keys: %v", warnings)
			}
			if !reflect.DeepEqual(cfg, again) {
				t.Errorf("round trip changed the configuration:\n got %+v\nwant %+v\ntemplate:\n%s", again.Crio, cfg.Crio, out.String())
			}
			// Every honored key is written with a comment above it.
			lines := strings.Split(out.String(), "\n")
			for i, l := range lines {
				if strings.Contains(l, " = ") && !strings.HasPrefix(l, "#") && (i == 0 || !strings.HasPrefix(lines[i-1], "#")) {
					t.Errorf("key line %q has no doc comment", l)
				}
			}
		})
	}
}

func TestTemplateHasEveryKey(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Crio.NRI.Policy.Plugins = map[string]*nripolicy.PluginConfig{"guard": nripolicy.DefaultPluginConfig()}
	var out bytes.Buffer
	if err := WriteTemplate(&out, cfg); err != nil {
		t.Fatal(err)
	}
	// Every toml tag of the structs must appear as a key in the template.
	for _, typ := range []reflect.Type{
		reflect.TypeOf(CrioConfig{}), reflect.TypeOf(APIConfig{}), reflect.TypeOf(RuntimeConfig{}),
		reflect.TypeOf(RuntimeHandler{}), reflect.TypeOf(NRIConfig{}),
		reflect.TypeOf(DefaultValidatorConfig{}), reflect.TypeOf(nripolicy.Config{}),
		reflect.TypeOf(nripolicy.PluginConfig{}), reflect.TypeOf(MetricsConfig{}),
	} {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			tag := f.Tag.Get("toml")
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(nripolicy.Duration(0)) || f.Type.Kind() == reflect.Map {
				continue // a table, checked through its own type
			}
			if !strings.Contains(out.String(), "\n"+tag+" = ") {
				t.Errorf("template lacks key %s (%s.%s)", tag, typ.Name(), f.Name)
			}
		}
	}
}

func TestDefaultValidatorUpstream(t *testing.T) {
	v := DefaultValidatorConfig{
		Enable: true, RejectOCIHookAdjustment: true, RejectRuntimeDefaultSeccompAdjustment: true,
		RejectUnconfinedSeccompAdjustment: true, RejectCustomSeccompAdjustment: true,
		RejectNamespaceAdjustment: true, RejectSysctlAdjustment: true,
		RequiredPlugins: []string{"guard"}, TolerateMissingAnnotation: "tolerate",
	}
	u := v.Upstream()
	// Every field of the upstream struct must be mapped: compare field by
	// field by name, so a new upstream field without a key fails here.
	uv, vv := reflect.ValueOf(*u), reflect.ValueOf(v)
	for i := 0; i < uv.NumField(); i++ {
		name := uv.Type().Field(i).Name
		ours := vv.FieldByName(name)
		if !ours.IsValid() {
			t.Errorf("upstream field %s has no crio.nri.default_validator key", name)
			continue
		}
		if !reflect.DeepEqual(ours.Interface(), uv.Field(i).Interface()) {
			t.Errorf("field %s: upstream %v, ours %v", name, uv.Field(i), ours)
		}
	}
}

func TestSplitKey(t *testing.T) {
	got := splitKey(`crio.nri.policy.plugins."a.b\"c".fail_policy`)
	want := []string{"crio", "nri", "policy", "plugins", `a.b"c`, "fail_policy"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("splitKey = %q, want %q", got, want)
	}
}
