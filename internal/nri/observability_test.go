package nri

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nrigate/nrigate/internal/metrics"
	"github.com/nrigate/nrigate/internal/oci"
	"github.com/nrigate/nrigate/pkg/config"
	"github.com/nrigate/nrigate/pkg/nripolicy"
)

// newObserved starts an integration whose policy requires guard with the
// given fail policy, with metrics and a log recorder.
func newObserved(t *testing.T, fp nripolicy.FailPolicy) (*NRI, *metrics.Metrics, *logtest.Hook) {
	t.Helper()
	pol := nripolicy.DefaultConfig()
	pc := nripolicy.DefaultPluginConfig()
	pc.FailPolicy = fp
	pol.Plugins = map[string]*nripolicy.PluginConfig{"guard": pc}
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	m := metrics.New()
	n, _ := startNRI(t, fakeRuntime{}, pol, WithLogger(log), WithMetrics(m))
	return n, m, hook
}

// warnings returns the entries logged at warning level or above.
func warnings(h *logtest.Hook) []*logrus.Entry {
	var out []*logrus.Entry
	for _, e := range h.AllEntries() {
		if e.Level <= logrus.WarnLevel {
			out = append(out, e)
		}
	}
	return out
}

func checkDecisionFields(t *testing.T, e *logrus.Entry, msg string) {
	t.Helper()
	if e.Message != msg {
		t.Errorf("message %q, want %q", e.Message, msg)
	}
	want := map[string]string{"plugin": "guard", "event": "CreateContainer", "pod": "prod/web", "container": "app"}
	for k, v := range want {
		if e.Data[k] != v {
			t.Errorf("field %s = %v, want %q (entry %v)", k, e.Data[k], v, e.Data)
		}
	}
	if r, _ := e.Data["reason"].(string); !strings.Contains(r, "not registered") {
		t.Errorf("reason %q does not say the plugin is not registered", r)
	}
	if _, ok := e.Data["waited"].(string); !ok {
		t.Errorf("no waited field: %v", e.Data)
	}
}

// TestRefusalLoggedOnceAndCounted checks that a refusal gives exactly one
// warning with the decision's fields, and moves the metrics.
func TestRefusalLoggedOnceAndCounted(t *testing.T) {
	n, m, hook := newObserved(t, nripolicy.FailPolicyFail)
	_, err := n.CreateContainer(context.Background(), testSandbox(), testContainer(), oci.NewGenerator())
	if st, _ := status.FromError(err); st.Code() != codes.FailedPrecondition {
		t.Fatalf("absent plugin: want FailedPrecondition, got %v", err)
	}
	w := warnings(hook)
	if len(w) != 1 {
		for _, e := range w {
			t.Logf("%s %v", e.Message, e.Data)
		}
		t.Fatalf("%d warnings for one refusal, want 1", len(w))
	}
	checkDecisionFields(t, w[0], msgRefused)
	body := scrape(t, m)
	for _, re := range []string{
		`nrigate_nri_policy_decisions_total\{event="CreateContainer",outcome="refused",plugin="guard"\} 1\n`,
		`nrigate_nri_plugin_ready\{plugin="guard"\} 0\n`,
		`nrigate_nri_policy_wait_seconds_count\{event="CreateContainer",plugin="guard"\} 1\n`,
	} {
		if !regexp.MustCompile(re).MatchString(body) {
			t.Errorf("metrics do not match %s:\n%s", re, body)
		}
	}
}

// TestIgnoreLoggedOnce checks the ignore path: the request proceeds with
// one warning carrying the decision's fields.
func TestIgnoreLoggedOnce(t *testing.T) {
	n, m, hook := newObserved(t, nripolicy.FailPolicyIgnore)
	finish, err := n.CreateContainer(context.Background(), testSandbox(), testContainer(), oci.NewGenerator())
	if err != nil {
		t.Fatalf("ignore plugin absent: %v", err)
	}
	finish(nil)
	w := warnings(hook)
	if len(w) != 1 {
		t.Fatalf("%d warnings for one ignored request, want 1", len(w))
	}
	checkDecisionFields(t, w[0], msgIgnored)
	if !strings.Contains(scrape(t, m), `nrigate_nri_policy_decisions_total{event="CreateContainer",outcome="ignored",plugin="guard"} 1`+"\n") {
		t.Error("ignored decision not counted")
	}
}

// scrape serves the metrics on a free loopback port and GETs them.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	srv, err := m.Serve(&config.MetricsConfig{Enable: true, Host: "127.0.0.1", Port: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	resp, err := http.Get("http://" + srv.Addr().String() + metrics.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	return string(b)
}
