package nripolicy_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/ttrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/nrigate/nrigate/pkg/nripolicy/internal/testrig"
)

// The policy sees each plugin connection through adaptation.WithTTRPCOptions:
// a ttrpc.ClientOpts is called with the connection's client, a chained client
// interceptor sees every call with the caller's context, UserOnCloseWait
// returns when the connection closes, and a server interceptor sees
// RegisterPlugin. These tests pin that contract.

type ctxKey struct{}

const (
	methodConfigure       = "/nri.pkg.api.v1alpha1.Plugin/Configure"
	methodSynchronize     = "/nri.pkg.api.v1alpha1.Plugin/Synchronize"
	methodCreateContainer = "/nri.pkg.api.v1alpha1.Plugin/CreateContainer"
	methodRegisterPlugin  = "/nri.pkg.api.v1alpha1.Runtime/RegisterPlugin"
)

type seenCall struct {
	client   *ttrpc.Client
	method   string
	ctxValue any
	events   int32 // Configure response event mask
	service  string
	name     string // req.Method
	status   *int32 // response status code, if any
	err      error
	start    time.Time
	end      time.Time
}

type connSpy struct {
	mu      sync.Mutex
	clients []*ttrpc.Client
	optAt   []time.Time
	calls   []seenCall
	closed  map[*ttrpc.Client]time.Time
	regs    []*api.RegisterPluginRequest
	regAt   []time.Time
}

func (s *connSpy) clientOpt(c *ttrpc.Client) {
	s.mu.Lock()
	s.clients = append(s.clients, c)
	s.optAt = append(s.optAt, time.Now())
	s.mu.Unlock()
	ttrpc.WithChainUnaryClientInterceptor(func(ctx context.Context, req *ttrpc.Request, rsp *ttrpc.Response, info *ttrpc.UnaryClientInfo, inv ttrpc.Invoker) error {
		call := seenCall{client: c, method: info.FullMethod, ctxValue: ctx.Value(ctxKey{}), start: time.Now(),
			service: req.Service, name: req.Method}
		err := inv(ctx, req, rsp)
		call.end, call.err = time.Now(), err
		if rsp.Status != nil {
			code := rsp.Status.Code
			call.status = &code
		}
		if err == nil && info.FullMethod == methodConfigure {
			var cr api.ConfigureResponse
			if uerr := proto.Unmarshal(rsp.Payload, &cr); uerr == nil {
				call.events = cr.Events
			}
		}
		s.mu.Lock()
		s.calls = append(s.calls, call)
		s.mu.Unlock()
		return err
	})(c)
	go func() {
		if c.UserOnCloseWait(context.Background()) == nil {
			s.mu.Lock()
			s.closed[c] = time.Now()
			s.mu.Unlock()
		}
	}()
}

func (s *connSpy) serverInterceptor(ctx context.Context, unmarshal ttrpc.Unmarshaler, info *ttrpc.UnaryServerInfo, m ttrpc.Method) (any, error) {
	if info.FullMethod == methodRegisterPlugin {
		var req api.RegisterPluginRequest
		if err := unmarshal(&req); err == nil {
			s.mu.Lock()
			s.regs = append(s.regs, &req)
			s.regAt = append(s.regAt, time.Now())
			s.mu.Unlock()
		}
	}
	return m(ctx, unmarshal)
}

func (s *connSpy) closedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.closed)
}

func (s *connSpy) snapshot() ([]*ttrpc.Client, []time.Time, []seenCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*ttrpc.Client(nil), s.clients...), append([]time.Time(nil), s.optAt...), append([]seenCall(nil), s.calls...)
}

func (s *connSpy) callsOf(c *ttrpc.Client, method string) []seenCall {
	_, _, calls := s.snapshot()
	var out []seenCall
	for _, call := range calls {
		if call.client == c && call.method == method {
			out = append(out, call)
		}
	}
	return out
}

func newSpyRig(t *testing.T) (*upstreamRig, *connSpy) {
	spy := &connSpy{closed: map[*ttrpc.Client]time.Time{}}
	syncCtx := func(ctx context.Context) context.Context { return context.WithValue(ctx, ctxKey{}, "sync") }
	r := newUpstreamRig(t, syncCtx, adaptation.WithTTRPCOptions(
		[]ttrpc.ClientOpts{spy.clientOpt},
		[]ttrpc.ServerOpt{ttrpc.WithUnaryServerInterceptor(spy.serverInterceptor)}))
	return r, spy
}

func TestUpstreamTTRPCClientOptAndInterceptor(t *testing.T) {
	r, spy := newSpyRig(t)
	f := r.faulty("guard", "10", "--events", "RunPodSandbox,CreateContainer")

	clients, _, _ := spy.snapshot()
	if len(clients) != 1 {
		t.Fatalf("want the client opt called once for one plugin connection, got %d", len(clients))
	}
	c := clients[0]

	cfg := spy.callsOf(c, methodConfigure)
	want := int32(api.MustParseEventMask("RunPodSandbox,CreateContainer"))
	if len(cfg) != 1 || cfg[0].err != nil || cfg[0].events != want {
		t.Fatalf("interceptor must see Configure and its event mask 0x%x, got %+v", want, cfg)
	}
	syn := spy.callsOf(c, methodSynchronize)
	if len(syn) != 1 || syn[0].ctxValue != "sync" {
		t.Fatalf("interceptor must see Synchronize with the sync callback's context, got %+v", syn)
	}

	ctx := context.WithValue(context.Background(), ctxKey{}, "create-1")
	if _, err := r.create(ctx, testrig.Pod("default", nil, nil)); err != nil {
		t.Fatal(err)
	}
	cc := spy.callsOf(c, methodCreateContainer)
	if len(cc) != 1 || cc[0].ctxValue != "create-1" || cc[0].err != nil {
		t.Fatalf("interceptor must see CreateContainer with the caller's context value, got %+v", cc)
	}

	// The server interceptor sees the registration with name and index.
	spy.mu.Lock()
	regs := spy.regs
	spy.mu.Unlock()
	if len(regs) != 1 || regs[0].PluginName != "guard" || regs[0].PluginIdx != "10" {
		t.Fatalf("server interceptor must see RegisterPlugin(guard, 10), got %+v", regs)
	}
	// ... before upstream configures that connection (the policy binds the
	// registration to the next Configure).
	spy.mu.Lock()
	regAt := spy.regAt[0]
	spy.mu.Unlock()
	if !cfg[0].start.After(regAt) {
		t.Fatalf("Configure started at %s, before RegisterPlugin was seen at %s", cfg[0].start, regAt)
	}
	if cc[0].service != "nri.pkg.api.v1alpha1.Plugin" || cc[0].name != "CreateContainer" {
		t.Fatalf("interceptor request must name service and method, got %q %q", cc[0].service, cc[0].name)
	}

	// UserOnCloseWait returns when the plugin process dies, and by then the
	// adaptation has marked the plugin closed: the next request skips it.
	killed := time.Now()
	f.Kill()
	if !testrig.Eventually(2*time.Second, func() bool {
		spy.mu.Lock()
		defer spy.mu.Unlock()
		_, ok := spy.closed[c]
		return ok
	}) {
		t.Fatal("UserOnCloseWait did not return after the plugin died")
	}
	spy.mu.Lock()
	t.Logf("UserOnCloseWait returned %s after SIGKILL", spy.closed[c].Sub(killed))
	spy.mu.Unlock()
	rsp, err := r.create(context.Background(), testrig.Pod("default", nil, nil))
	if err != nil || testrig.Acted(rsp, "guard") {
		t.Fatalf("after close: err %v", err)
	}
	if cc := spy.callsOf(c, methodCreateContainer); len(cc) != 1 {
		t.Fatalf("a plugin whose UserOnCloseWait returned must not be called again, got %d calls", len(cc))
	}
}

// Upstream accepts, registers and synchronizes plugin connections one at a
// time: the next connection's client is created only after the previous
// plugin's Synchronize completed.
func TestUpstreamConnectionsRegisterOneAtATime(t *testing.T) {
	r, spy := newSpyRig(t)
	slow := newInProcStub("slow", 300*time.Millisecond)
	r.startStub(slow, "10")
	select {
	case <-slow.syncing:
	case <-time.After(readyTimeout):
		t.Fatal("first plugin never synchronized")
	}
	r.faulty("second", "20")
	clients, optAt, _ := spy.snapshot()
	if len(clients) != 2 {
		t.Fatalf("want 2 connections, got %d", len(clients))
	}
	syn := spy.callsOf(clients[0], methodSynchronize)
	if len(syn) != 1 {
		t.Fatalf("first plugin: want one Synchronize, got %+v", syn)
	}
	if !optAt[1].After(syn[0].end) {
		t.Fatalf("second connection's client opt ran at %s, before the first Synchronize finished at %s",
			optAt[1].Format(time.StampMicro), syn[0].end.Format(time.StampMicro))
	}
}

// After a plugin's Synchronize returned, BlockPluginSync returns only once
// the plugin is in the relay list, so the next request reaches it.
func TestUpstreamBlockPluginSyncAfterSynchronize(t *testing.T) {
	r, _ := newSpyRig(t)
	for i := 0; i < 20; i++ {
		s := newInProcStub("guard", 0)
		st := r.startStub(s, "10")
		select {
		case <-s.synced:
		case <-time.After(readyTimeout):
			t.Fatal("plugin never synchronized")
		}
		r.a.BlockPluginSync().Unblock()
		rsp, err := r.create(context.Background(), testrig.Pod("default", nil, nil))
		if err != nil || !testrig.Acted(rsp, "guard") {
			t.Fatalf("round %d: request after BlockPluginSync did not reach the synchronized plugin (err %v)", i, err)
		}
		st.Stop()
		// Let the adaptation notice the close before the next round.
		if _, err := r.create(context.Background(), testrig.Pod("default", nil, nil)); err != nil {
			t.Fatal(err)
		}
	}
}

// DESIGN.md: never pass ttrpc.WithOnClose. The adaptation installs its own
// close handler first and appends the runtime's client options, so a
// runtime WithOnClose replaces it: a dead plugin is then never marked
// closed and every later request is still relayed to it.
func TestUpstreamWithOnCloseReplacesAdaptationHandler(t *testing.T) {
	rec := &testrig.Recorder{}
	closed := make(chan struct{})
	var once sync.Once
	r := newUpstreamRig(t, nil, adaptation.WithMetrics(rec), adaptation.WithTTRPCOptions(
		[]ttrpc.ClientOpts{ttrpc.WithOnClose(func() { once.Do(func() { close(closed) }) })}, nil))
	f := r.faulty("guard", "10", "--events", "CreateContainer")
	f.Kill()
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("the runtime's on-close handler was not called")
	}
	rec.Reset()
	for i := 0; i < 2; i++ {
		if _, err := r.create(context.Background(), testrig.Pod("default", nil, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if inv := rec.Filter("invocation", "10-guard", "CreateContainer"); len(inv) == 0 {
		t.Fatal("with a runtime WithOnClose the adaptation still noticed the close; DESIGN.md's warning is obsolete")
	} else if !errors.Is(inv[0].Err, ttrpc.ErrClosed) {
		t.Fatalf("want ErrClosed for the dead plugin, got %v", inv[0].Err)
	}
}

// The adaptation relays events under one lock: a request waits for a hung
// plugin's request timeout of the request before it.
func TestUpstreamRelaysAreSerialized(t *testing.T) {
	r := newUpstreamRig(t, nil)
	f := r.faulty("guard", "10", "--events", "CreateContainer", "--mode", "hang", "--hang", "3s")
	first := make(chan time.Time, 1)
	start := time.Now()
	go func() {
		_, _ = r.create(context.Background(), testrig.Pod("default", nil, nil))
		first <- time.Now()
	}()
	// The plugin logs the hang when the request reaches it.
	if !testrig.Eventually(2*time.Second, func() bool { return strings.Contains(f.LogText(), "hang CreateContainer") }) {
		t.Fatal("the hung request never reached the plugin")
	}
	if err := r.a.RunPodSandbox(context.Background(), &adaptation.RunPodSandboxRequest{Pod: testrig.Pod("default", nil, nil)}); err != nil {
		t.Fatal(err)
	}
	second := time.Now()
	if took := second.Sub(start); took < upstreamRequestTimeout-20*time.Millisecond {
		t.Fatalf("a relay during a hung request returned after %s, before the request timeout %s", took, upstreamRequestTimeout)
	}
	if f := <-first; second.Before(f.Add(-5 * time.Millisecond)) {
		t.Fatalf("second relay finished at %s, before the hung one at %s", second, f)
	}
}

// What a client interceptor sees for each outcome of a relayed request: a
// plugin's own error arrives as a non-OK response status with a nil error
// from the invoker; a timeout as context.DeadlineExceeded; a crash as
// ttrpc.ErrClosed.
func TestUpstreamTTRPCInterceptorSeesOutcomes(t *testing.T) {
	r, spy := newSpyRig(t)
	f := r.faulty("guard", "10", "--events", "CreateContainer")
	last := func() seenCall {
		clients, _, _ := spy.snapshot()
		cc := spy.callsOf(clients[len(clients)-1], methodCreateContainer)
		if len(cc) == 0 {
			t.Fatal("no CreateContainer call seen")
		}
		return cc[len(cc)-1]
	}
	pod := func() *api.PodSandbox { return testrig.Pod("default", nil, nil) }

	if _, err := r.create(context.Background(), pod()); err != nil {
		t.Fatal(err)
	}
	if c := last(); c.err != nil || (c.status != nil && *c.status != int32(codes.OK)) {
		t.Fatalf("answered: want nil error and OK status, got %v / %v", c.err, c.status)
	}

	if err := f.SetMode("error"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.create(context.Background(), pod()); err == nil {
		t.Fatal("plugin error must fail the request")
	}
	if c := last(); c.err != nil || c.status == nil || *c.status == int32(codes.OK) {
		t.Fatalf("plugin error: want nil invoker error and a non-OK status, got %v / %v", c.err, c.status)
	}

	if err := f.SetMode("hang 2s"); err != nil {
		t.Fatal(err)
	}
	_, _ = r.create(context.Background(), pod())
	if c := last(); !errors.Is(c.err, context.DeadlineExceeded) {
		t.Fatalf("hang: want DeadlineExceeded, got %v", c.err)
	}

	// The control file, shared by plugins of the same name, overrides --mode.
	if err := f.SetMode("crash-during"); err != nil {
		t.Fatal(err)
	}
	r.faulty("guard", "10", "--events", "CreateContainer")
	_, _ = r.create(context.Background(), pod())
	if c := last(); !errors.Is(c.err, ttrpc.ErrClosed) {
		t.Fatalf("crash: want ErrClosed, got %v", c.err)
	}
}
