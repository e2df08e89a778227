package metrics

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nrigate/nrigate/pkg/config"
	"github.com/nrigate/nrigate/pkg/nripolicy"
)

func TestAdaptationMetrics(t *testing.T) {
	m := New()
	m.RecordPluginInvocation("10-guard", "CreateContainer", nil)
	m.RecordPluginInvocation("10-guard", "CreateContainer", nil)
	m.RecordPluginInvocation("10-guard", "CreateContainer", errors.New("boom"))
	m.RecordPluginLatency("10-guard", "CreateContainer", 3*time.Millisecond)
	m.RecordPluginAdjustments("10-guard", "CreateContainer", &adaptation.ContainerAdjustment{}, 0, 0)
	m.RecordPluginAdjustments("10-guard", "StopContainer", nil, 0, 1)
	m.RecordPluginAdjustments("10-guard", "StopContainer", nil, 0, 0) // empty answer: not counted
	m.UpdatePluginCount(3)
	m.UpdatePluginCount(2)

	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"success", testutil.ToFloat64(m.invocations.WithLabelValues("10-guard", "CreateContainer", ResultSuccess)), 2},
		{"error", testutil.ToFloat64(m.invocations.WithLabelValues("10-guard", "CreateContainer", ResultError)), 1},
		{"adjust create", testutil.ToFloat64(m.adjustments.WithLabelValues("10-guard", "CreateContainer")), 1},
		{"adjust stop", testutil.ToFloat64(m.adjustments.WithLabelValues("10-guard", "StopContainer")), 1},
		{"plugins", testutil.ToFloat64(m.plugins), 2},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	want := `
# HELP nrigate_nri_plugin_latency_seconds Latency of NRI plugin invocations.
# TYPE nrigate_nri_plugin_latency_seconds histogram
nrigate_nri_plugin_latency_seconds_bucket{operation="CreateContainer",plugin="10-guard",le="0.0001"} 0
nrigate_nri_plugin_latency_seconds_bucket{operation="CreateContainer",plugin="10-guard",le="0.0004"} 0
nrigate_nri_plugin_latency_seconds_bucket{operation="CreateContainer",plugin="10-guard",le="0.0016"} 0
nrigate_nri_plugin_latency_seconds_bucket{operation="CreateContainer",plugin="10-guard",le="0.0064"} 1
nrigate_nri_plugin_latency_seconds_bucket{operation="CreateContainer",plugin="10-guard",le="0.0256"} 1
nrigate_nri_plugin_latency_seconds_bucket{operation="CreateContainer",plugin="10-guard",le="0.1024"} 1
nrigate_nri_plugin_latency_seconds_bucket{operation="CreateContainer",plugin="10-guard",le="0.4096"} 1
nrigate_nri_plugin_latency_seconds_bucket{operation="CreateContainer",plugin="10-guard",le="1.6384"} 1
nrigate_nri_plugin_latency_seconds_bucket{operation="CreateContainer",plugin="10-guard",le="6.5536"} 1
nrigate_nri_plugin_latency_seconds_bucket{operation="CreateContainer",plugin="10-guard",le="26.2144"} 1
nrigate_nri_plugin_latency_seconds_bucket{operation="CreateContainer",plugin="10-guard",le="+Inf"} 1
nrigate_nri_plugin_latency_seconds_sum{operation="CreateContainer",plugin="10-guard"} 0.003
nrigate_nri_plugin_latency_seconds_count{operation="CreateContainer",plugin="10-guard"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "nrigate_nri_plugin_latency_seconds"); err != nil {
		t.Error(err)
	}
}

func TestPolicyHooks(t *testing.T) {
	m := New()
	m.Decided(nripolicy.Decision{Plugin: "guard", Event: nripolicy.EventCreateContainer, Outcome: nripolicy.OutcomeRefused,
		Namespace: "prod", Pod: "web", Container: "app", Reason: "is not registered", Waited: 200 * time.Millisecond})
	m.Decided(nripolicy.Decision{Plugin: "guard", Event: nripolicy.EventCreateContainer, Outcome: nripolicy.OutcomeRefused})
	m.Decided(nripolicy.Decision{Plugin: "obs", Event: nripolicy.EventRunPodSandbox, Outcome: nripolicy.OutcomeIgnored})
	if got := testutil.ToFloat64(m.decisions.WithLabelValues("guard", "CreateContainer", "refused")); got != 2 {
		t.Errorf("refused decisions: got %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.decisions.WithLabelValues("obs", "RunPodSandbox", "ignored")); got != 1 {
		t.Errorf("ignored decisions: got %v, want 1", got)
	}
	if got := testutil.CollectAndCount(m.wait, "nrigate_nri_policy_wait_seconds"); got != 2 {
		t.Errorf("wait histograms: got %d series, want 2 (guard/CreateContainer, obs/RunPodSandbox)", got)
	}
	want := `
# HELP nrigate_nri_policy_wait_seconds Time requests waited for a required NRI plugin (registration_wait), by plugin and event.
# TYPE nrigate_nri_policy_wait_seconds histogram
nrigate_nri_policy_wait_seconds_bucket{event="CreateContainer",plugin="guard",le="0.001"} 1
nrigate_nri_policy_wait_seconds_bucket{event="CreateContainer",plugin="guard",le="0.005"} 1
nrigate_nri_policy_wait_seconds_bucket{event="CreateContainer",plugin="guard",le="0.01"} 1
nrigate_nri_policy_wait_seconds_bucket{event="CreateContainer",plugin="guard",le="0.05"} 1
nrigate_nri_policy_wait_seconds_bucket{event="CreateContainer",plugin="guard",le="0.1"} 1
nrigate_nri_policy_wait_seconds_bucket{event="CreateContainer",plugin="guard",le="0.25"} 2
nrigate_nri_policy_wait_seconds_bucket{event="CreateContainer",plugin="guard",le="0.5"} 2
nrigate_nri_policy_wait_seconds_bucket{event="CreateContainer",plugin="guard",le="1"} 2
nrigate_nri_policy_wait_seconds_bucket{event="CreateContainer",plugin="guard",le="2.5"} 2
nrigate_nri_policy_wait_seconds_bucket{event="CreateContainer",plugin="guard",le="5"} 2
nrigate_nri_policy_wait_seconds_bucket{event="CreateContainer",plugin="guard",le="10"} 2
nrigate_nri_policy_wait_seconds_bucket{event="CreateContainer",plugin="guard",le="30"} 2
nrigate_nri_policy_wait_seconds_bucket{event="CreateContainer",plugin="guard",le="+Inf"} 2
nrigate_nri_policy_wait_seconds_sum{event="CreateContainer",plugin="guard"} 0.2
nrigate_nri_policy_wait_seconds_count{event="CreateContainer",plugin="guard"} 2
nrigate_nri_policy_wait_seconds_bucket{event="RunPodSandbox",plugin="obs",le="0.001"} 1
nrigate_nri_policy_wait_seconds_bucket{event="RunPodSandbox",plugin="obs",le="0.005"} 1
nrigate_nri_policy_wait_seconds_bucket{event="RunPodSandbox",plugin="obs",le="0.01"} 1
nrigate_nri_policy_wait_seconds_bucket{event="RunPodSandbox",plugin="obs",le="0.05"} 1
nrigate_nri_policy_wait_seconds_bucket{event="RunPodSandbox",plugin="obs",le="0.1"} 1
nrigate_nri_policy_wait_seconds_bucket{event="RunPodSandbox",plugin="obs",le="0.25"} 1
nrigate_nri_policy_wait_seconds_bucket{event="RunPodSandbox",plugin="obs",le="0.5"} 1
nrigate_nri_policy_wait_seconds_bucket{event="RunPodSandbox",plugin="obs",le="1"} 1
nrigate_nri_policy_wait_seconds_bucket{event="RunPodSandbox",plugin="obs",le="2.5"} 1
nrigate_nri_policy_wait_seconds_bucket{event="RunPodSandbox",plugin="obs",le="5"} 1
nrigate_nri_policy_wait_seconds_bucket{event="RunPodSandbox",plugin="obs",le="10"} 1
nrigate_nri_policy_wait_seconds_bucket{event="RunPodSandbox",plugin="obs",le="30"} 1
nrigate_nri_policy_wait_seconds_bucket{event="RunPodSandbox",plugin="obs",le="+Inf"} 1
nrigate_nri_policy_wait_seconds_sum{event="RunPodSandbox",plugin="obs"} 0
nrigate_nri_policy_wait_seconds_count{event="RunPodSandbox",plugin="obs"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "nrigate_nri_policy_wait_seconds"); err != nil {
		t.Error(err)
	}

	m.ReadinessChanged([]nripolicy.PluginState{{Key: "guard", State: nripolicy.StateReady, KeyReady: true}, {Key: "obs", State: nripolicy.StateRegistered}})
	if g, o := testutil.ToFloat64(m.ready.WithLabelValues("guard")), testutil.ToFloat64(m.ready.WithLabelValues("obs")); g != 1 || o != 0 {
		t.Errorf("ready: guard %v obs %v, want 1 0", g, o)
	}
	m.ReadinessChanged([]nripolicy.PluginState{{Key: "guard", State: nripolicy.StateDisconnected}})
	if got := testutil.CollectAndCount(m.ready); got != 1 {
		t.Errorf("after obs left the snapshot: %d ready series, want 1", got)
	}
	if got := testutil.ToFloat64(m.ready.WithLabelValues("guard")); got != 0 {
		t.Errorf("disconnected guard: ready %v, want 0", got)
	}
}

func TestServe(t *testing.T) {
	m := New()
	m.UpdatePluginCount(1)
	srv, err := m.Serve(&config.MetricsConfig{Enable: true, Host: "127.0.0.1", Port: 0})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + srv.Addr().String() + Path
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "\nnrigate_nri_plugins 1\n") {
		t.Fatalf("GET %s: %d\n%s", url, resp.StatusCode, body)
	}
	if !strings.Contains(string(body), "go_goroutines") {
		t.Error("Go runtime metrics missing")
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(url); err == nil {
		t.Fatal("endpoint still serving after Stop")
	}
	// The port is free again: a second endpoint can listen on it.
	srv2, err := m.Serve(&config.MetricsConfig{Host: "127.0.0.1", Port: srv.Addr().(*net.TCPAddr).Port})
	if err != nil {
		t.Fatalf("port not released: %v", err)
	}
	srv2.Stop()
}

func TestServeBadAddress(t *testing.T) {
	_, err := New().Serve(&config.MetricsConfig{Host: "256.0.0.1", Port: 0})
	if err == nil || !strings.Contains(err.Error(), "256.0.0.1") {
		t.Fatalf("want a listen error naming the address, got %v", err)
	}
}
