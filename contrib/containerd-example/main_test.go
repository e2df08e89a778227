package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nrigate/nrigate/pkg/nripolicy"
)

const sample = `
version = 3

[plugins."io.containerd.grpc.v1.cri"]
  enable_selinux = false

[plugins."io.containerd.nri.v1.nri"]
  socket_path = "/run/nri/test.sock"
  plugin_request_timeout = "1s"
  disable_connections = false

[plugins."io.containerd.nri.v1.nri".policy]
  exempt_static_pods = true

[plugins."io.containerd.nri.v1.nri".policy.plugins."guard"]
  fail_policy = "fail"
  registration_wait = "3s"
  exclude_namespaces = ["kube-system"]
  exclude_pod_selector = "app.kubernetes.io/name=guard"

[plugins."io.containerd.nri.v1.nri".policy.plugins."10-metrics"]
  fail_policy = "ignore"
  events = ["RunPodSandbox", "CreateContainer"]
`

func TestDecodeConfig(t *testing.T) {
	cfg, err := DecodeConfig(sample)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SocketPath != "/run/nri/test.sock" || cfg.PluginPath != DefaultPluginPath {
		t.Errorf("paths: socket %q plugin %q", cfg.SocketPath, cfg.PluginPath)
	}
	if cfg.PluginRequestTimeout.Std() != time.Second || cfg.PluginRegistrationTimeout.Std() != DefaultPluginRegistrationTimeout {
		t.Errorf("timeouts: request %v registration %v", cfg.PluginRequestTimeout, cfg.PluginRegistrationTimeout)
	}
	if got := strings.Join(cfg.Policy.Names(), ","); got != "10-metrics,guard" {
		t.Fatalf("plugins = %s", got)
	}
	g := cfg.Policy.Plugins["guard"]
	if g.FailPolicy != nripolicy.FailPolicyFail || g.RegistrationWait.Std() != 3*time.Second ||
		g.ExcludePodSelector != "app.kubernetes.io/name=guard" || len(g.ExcludeNamespaces) != 1 {
		t.Errorf("guard = %+v", g)
	}
	// SetDefaults filled what the table left out.
	if len(g.Events) != 1 || g.Events[0] != nripolicy.EventCreateContainer || g.Readiness != nripolicy.DefaultReadiness {
		t.Errorf("guard defaults: events %v readiness %q", g.Events, g.Readiness)
	}
	m := cfg.Policy.Plugins["10-metrics"]
	if m.FailPolicy != nripolicy.FailPolicyIgnore || len(m.Events) != 2 {
		t.Errorf("10-metrics = %+v", m)
	}
	// The decoded policy builds a Policy and its adaptation options.
	pol, err := nripolicy.New(cfg.Policy)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(cfg.AdaptationOptions(pol, nil)); n != 5 {
		t.Errorf("%d adaptation options, want 5 (3 paths + metrics + ttrpc)", n)
	}
}

func TestDecodeConfigWithoutNRITable(t *testing.T) {
	cfg, err := DecodeConfig("version = 3\n")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SocketPath != DefaultSocketPath || len(cfg.Policy.Plugins) != 0 {
		t.Errorf("cfg = %+v", cfg)
	}
}

func TestDecodeConfigInvalid(t *testing.T) {
	_, err := DecodeConfig(`[plugins."io.containerd.nri.v1.nri".policy.plugins."guard"]
fail_policy = "maybe"
`)
	if !errors.Is(err, nripolicy.ErrInvalidConfig) {
		t.Fatalf("err = %v, want ErrInvalidConfig", err)
	}
	if !strings.Contains(err.Error(), `plugins."io.containerd.nri.v1.nri".policy.plugins."guard".fail_policy`) {
		t.Errorf("error does not name the full key: %v", err)
	}
	_, err = DecodeConfig(`[plugins."io.containerd.nri.v1.nri".policy.plugins."guard"]
fail_polcy = "fail"
`)
	if err == nil || !strings.Contains(err.Error(), "unknown key") {
		t.Errorf("typo not reported: %v", err)
	}
}
