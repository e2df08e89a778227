package nripolicy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/ttrpc"
	"google.golang.org/grpc/status"

	"github.com/nrigate/nrigate/pkg/nripolicy/internal/testrig"
)

// The policy learns whether a plugin answered a request from
// adaptation.WithMetrics: RecordPluginLatency then RecordPluginInvocation
// per call to a subscribed plugin, named "IDX-NAME", with the transport
// error. These tests pin that contract.

func TestUpstreamMetricsSynchronizeAndCreate(t *testing.T) {
	rec := &testrig.Recorder{}
	r := newUpstreamRig(t, nil, adaptation.WithMetrics(rec))
	r.faulty("guard", "10", "--events", "CreateContainer")
	r.faulty("other", "20", "--events", "StopContainer")

	// Synchronize is recorded once per plugin; Configure is never recorded.
	if !testrig.Eventually(time.Second, func() bool {
		return len(rec.Filter("invocation", "", "Synchronize")) == 2
	}) {
		t.Fatalf("want one Synchronize invocation per plugin, got %+v", rec.Calls())
	}
	for _, name := range []string{"10-guard", "20-other"} {
		assertLatencyThenInvocation(t, rec.Calls(), name, "Synchronize", nil)
	}
	if c := rec.Filter("", "", "Configure"); len(c) != 0 {
		t.Fatalf("Configure must not be recorded, got %+v", c)
	}

	rec.Reset()
	rsp, err := r.create(context.Background(), testrig.Pod("default", nil, nil))
	if err != nil || !testrig.Acted(rsp, "guard") {
		t.Fatalf("create: err %v, acted %v", err, testrig.Acted(rsp, "guard"))
	}
	assertLatencyThenInvocation(t, rec.Calls(), "10-guard", "CreateContainer", nil)
	// An unsubscribed plugin is not called, so it is not recorded.
	if c := rec.Filter("", "20-other", ""); len(c) != 0 {
		t.Fatalf("unsubscribed plugin must not be recorded, got %+v", c)
	}
	// The plugin count is updated after every request.
	if c := rec.Filter("count", "", ""); len(c) == 0 || c[len(c)-1].Count != 2 {
		t.Fatalf("want UpdatePluginCount(2) after the request, got %+v", c)
	}
}

// assertLatencyThenInvocation checks that plugin's op was recorded exactly
// once, latency first, with an error matching want (nil: no error).
func assertLatencyThenInvocation(t *testing.T, calls []testrig.Call, plugin, op string, want error) {
	t.Helper()
	var seen []string
	var got error
	for _, c := range calls {
		if c.Plugin == plugin && c.Op == op && (c.Kind == "latency" || c.Kind == "invocation") {
			seen = append(seen, c.Kind)
			if c.Kind == "invocation" {
				got = c.Err
			}
		}
	}
	if len(seen) != 2 || seen[0] != "latency" || seen[1] != "invocation" {
		t.Fatalf("%s %s: want [latency invocation], got %v", plugin, op, seen)
	}
	switch {
	case want == nil && got != nil:
		t.Fatalf("%s %s: want no error, got %v", plugin, op, got)
	case want != nil && !errors.Is(got, want):
		t.Fatalf("%s %s: want errors.Is(err, %v), got %v", plugin, op, want, got)
	}
}

func TestUpstreamMetricsTimeoutIsDeadlineExceeded(t *testing.T) {
	rec := &testrig.Recorder{}
	r := newUpstreamRig(t, nil, adaptation.WithMetrics(rec))
	f := r.faulty("guard", "10", "--events", "CreateContainer", "--mode", "hang", "--hang", "2s")
	rec.Reset()
	start := time.Now()
	rsp, err := r.create(context.Background(), testrig.Pod("default", nil, nil))
	if took := time.Since(start); took < upstreamRequestTimeout || took > upstreamRequestTimeout+time.Second {
		t.Fatalf("hung plugin: request took %s, want about the request timeout %s", took, upstreamRequestTimeout)
	}
	// Plain upstream lets the request proceed without the plugin (no FailurePolicy).
	if err != nil || testrig.Acted(rsp, "guard") {
		t.Fatalf("hung plugin: want success without adjustment, got err %v acted %v", err, testrig.Acted(rsp, "guard"))
	}
	assertLatencyThenInvocation(t, rec.Calls(), "10-guard", "CreateContainer", context.DeadlineExceeded)
	// The timed-out plugin is dropped: the plugin exits on its closed connection.
	select {
	case <-f.Exited():
	case <-time.After(5 * time.Second):
		t.Fatal("timed-out plugin was not disconnected")
	}
}

func TestUpstreamMetricsLostConnectionIsErrClosed(t *testing.T) {
	rec := &testrig.Recorder{}
	r := newUpstreamRig(t, nil, adaptation.WithMetrics(rec))
	r.faulty("guard", "10", "--events", "CreateContainer", "--mode", "crash-during")
	rec.Reset()
	rsp, err := r.create(context.Background(), testrig.Pod("default", nil, nil))
	if err != nil || testrig.Acted(rsp, "guard") {
		t.Fatalf("crashed plugin: want success without adjustment, got err %v", err)
	}
	assertLatencyThenInvocation(t, rec.Calls(), "10-guard", "CreateContainer", ttrpc.ErrClosed)

	// Once closed, the plugin is skipped silently: nothing is recorded.
	rec.Reset()
	if _, err := r.create(context.Background(), testrig.Pod("default", nil, nil)); err != nil {
		t.Fatal(err)
	}
	if c := rec.Filter("invocation", "10-guard", ""); len(c) != 0 {
		t.Fatalf("closed plugin must not be invoked, got %+v", c)
	}
}

func TestUpstreamMetricsPluginErrorIsStatusError(t *testing.T) {
	rec := &testrig.Recorder{}
	r := newUpstreamRig(t, nil, adaptation.WithMetrics(rec))
	r.faulty("guard", "10", "--events", "CreateContainer", "--mode", "error")
	rec.Reset()
	_, err := r.create(context.Background(), testrig.Pod("default", nil, nil))
	if err == nil {
		t.Fatal("a plugin's own error must fail the request")
	}
	inv := rec.Filter("invocation", "10-guard", "CreateContainer")
	if len(inv) != 1 || inv[0].Err == nil {
		t.Fatalf("want one failed invocation, got %+v", inv)
	}
	if _, ok := status.FromError(inv[0].Err); !ok ||
		errors.Is(inv[0].Err, context.DeadlineExceeded) || errors.Is(inv[0].Err, ttrpc.ErrClosed) {
		t.Fatalf("a plugin's rejection must be a gRPC status error, not a transport error: %v", inv[0].Err)
	}
}

func TestUpstreamPluginCountNotUpdatedOnDisconnectAlone(t *testing.T) {
	rec := &testrig.Recorder{}
	spy := &connSpy{closed: map[*ttrpc.Client]time.Time{}}
	r := newUpstreamRig(t, nil, adaptation.WithMetrics(rec), adaptation.WithTTRPCOptions([]ttrpc.ClientOpts{spy.clientOpt}, nil))
	f := r.faulty("guard", "10", "--events", "CreateContainer")
	if !testrig.Eventually(time.Second, func() bool { return len(rec.Filter("count", "", "")) > 0 }) {
		t.Fatal("UpdatePluginCount not called on registration")
	}
	rec.Reset()
	f.Kill()
	// UserOnCloseWait returns once upstream's close handler has run: any
	// count update a disconnect made by itself would be recorded by then.
	if !testrig.Eventually(2*time.Second, func() bool { return spy.closedCount() == 1 }) {
		t.Fatal("the plugin's connection did not close")
	}
	if c := rec.Filter("count", "", ""); len(c) != 0 {
		t.Fatalf("UpdatePluginCount called on a disconnect without a request: %+v", c)
	}
}
