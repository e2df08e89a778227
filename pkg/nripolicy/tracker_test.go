package nripolicy

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/ttrpc"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// call drives a connection's client interceptor with a fake invoker that
// answers with rsp (marshalled) and status code, or fails with err.
func call(t *testing.T, p *Policy, c *conn, ctx context.Context, method string, req, rsp proto.Message, code codes.Code, err error) error {
	t.Helper()
	payload, _ := proto.Marshal(req)
	r := &ttrpc.Request{Service: pluginService, Method: method, Payload: payload}
	resp := &ttrpc.Response{}
	return p.trk.intercept(c, ctx, r, resp, func(context.Context, *ttrpc.Request, *ttrpc.Response) error {
		if err != nil {
			return err
		}
		if rsp != nil {
			resp.Payload, _ = proto.Marshal(rsp)
		}
		if code != codes.OK {
			resp.Status = &rpcstatus.Status{Code: int32(code)}
		}
		return nil
	})
}

// register drives connection c's server interceptor with a RegisterPlugin.
func register(t *testing.T, p *Policy, c *conn, name, idx string) {
	t.Helper()
	payload, _ := proto.Marshal(&api.RegisterPluginRequest{PluginName: name, PluginIdx: idx})
	_, err := p.trk.serverIntercept(c, context.Background(), func(v any) error { return proto.Unmarshal(payload, v.(proto.Message)) },
		&ttrpc.UnaryServerInfo{FullMethod: registerMethod},
		func(ctx context.Context, unmarshal func(any) error) (any, error) {
			var req api.RegisterPluginRequest
			if err := unmarshal(&req); err != nil {
				return nil, err
			}
			return &api.Empty{}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

func newConn(p *Policy) *conn {
	p.trk.mu.Lock()
	defer p.trk.mu.Unlock()
	c := &conn{}
	p.trk.conns = append(p.trk.conns, c)
	return c
}

func TestInterceptorsTrackRegistrationAndSync(t *testing.T) {
	p := mustNew(t, cfgOf("guard", func(pc *PluginConfig) { pc.Events = []Event{EventRunPodSandbox, EventCreateContainer} }))
	ctx := context.Background()
	c := newConn(p)
	register(t, p, c, "guard", "10")
	if st, _ := findState(p, "guard"); st.State != StateNotRegistered {
		t.Fatalf("named before Configure: %+v", st)
	}
	// Events 0 means every valid event, as upstream reads it.
	if err := call(t, p, c, ctx, methodConfigure, &api.ConfigureRequest{}, &api.ConfigureResponse{Events: 0}, codes.OK, nil); err != nil {
		t.Fatal(err)
	}
	st, _ := findState(p, "guard")
	if st.State != StateRegistered || st.Index != "10" || len(st.Events) != len(eventNames(api.ValidEvents)) {
		t.Fatalf("after Configure: %+v", st)
	}
	// A split sync is complete only with the last answer.
	call(t, p, c, ctx, methodSync, &api.SynchronizeRequest{More: true}, &api.SynchronizeResponse{More: true}, codes.OK, nil)
	if st, _ := findState(p, "guard"); st.State != StateRegistered {
		t.Fatalf("synchronized before the last message: %+v", st)
	}
	call(t, p, c, ctx, methodSync, &api.SynchronizeRequest{}, &api.SynchronizeResponse{}, codes.OK, nil)
	if st, _ := findState(p, "guard"); st.State != StateReady {
		t.Fatalf("after Synchronize: %+v", st)
	}

	// Answers are recorded on the admission in ctx, for its event only.
	actx, adm, err := p.Admit(ctx, Request{Event: EventRunPodSandbox, Pod: pod("d", "p", nil)})
	if err != nil {
		t.Fatal(err)
	}
	call(t, p, c, actx, "CreateContainer", &api.CreateContainerRequest{}, &api.CreateContainerResponse{}, codes.OK, nil)
	// An old plugin answers Unimplemented; upstream retries over StateChange.
	call(t, p, c, actx, "RunPodSandbox", &api.RunPodSandboxRequest{}, nil, codes.Unimplemented, nil)
	if len(adm.answers) != 0 {
		t.Fatalf("recorded answers of other calls: %+v", adm.answers)
	}
	call(t, p, c, actx, methodState, &api.StateChangeEvent{Event: api.Event_STOP_POD_SANDBOX}, &api.Empty{}, codes.OK, nil)
	if len(adm.answers) != 0 {
		t.Fatal("a StateChange of another event is not an answer")
	}
	call(t, p, c, actx, methodState, &api.StateChangeEvent{Event: api.Event_RUN_POD_SANDBOX}, &api.Empty{}, codes.OK, nil)
	if err := adm.Done(nil); err != nil {
		t.Fatalf("StateChange answer must count: %v", err)
	}

	// A timeout is recorded and names the cause when the conn closes.
	actx, adm, _ = p.Admit(ctx, Request{Event: EventCreateContainer, Pod: pod("d", "p", nil)})
	call(t, p, c, actx, "CreateContainer", &api.CreateContainerRequest{}, nil, codes.OK, context.DeadlineExceeded)
	if err := adm.Done(nil); !errors.Is(err, ErrPluginNotActed) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Done after timeout = %v", err)
	}
	p.trk.closed(c)
	st, _ = findState(p, "guard")
	if st.State != StateDisconnected || st.LastError == "" {
		t.Fatalf("after close: %+v", st)
	}
}

func TestInvalidRegistrationIsNotBound(t *testing.T) {
	p := mustNew(t, cfgOf("guard", nil))
	c := newConn(p)
	register(t, p, c, "bad name!", "10")
	register(t, p, c, "guard", "1")
	if c.registered != nil {
		t.Fatalf("invalid registration kept: %+v", c.registered)
	}
	call(t, p, c, context.Background(), methodConfigure, &api.ConfigureRequest{}, &api.ConfigureResponse{}, codes.OK, nil)
	if c.name.Load() != nil {
		t.Fatal("a Configure without a valid registration must not name the connection")
	}
}

// Registrations bind per connection (issue 11, item 5): a plugin that
// sends RegisterPlugin again, on its own connection, between another
// plugin's RegisterPlugin and Configure, neither renames that other
// connection nor itself.
func TestRegistrationBindsPerConnection(t *testing.T) {
	p := mustNew(t, cfgOf("guard", nil))
	ctx := context.Background()
	other := newConn(p)
	register(t, p, other, "other", "10")
	call(t, p, other, ctx, methodConfigure, &api.ConfigureRequest{}, &api.ConfigureResponse{}, codes.OK, nil)

	fresh := newConn(p)
	register(t, p, fresh, "fresh", "20")
	register(t, p, other, "guard", "10") // the re-registration, in between
	call(t, p, fresh, ctx, methodConfigure, &api.ConfigureRequest{}, &api.ConfigureResponse{}, codes.OK, nil)
	if id := fresh.name.Load(); id == nil || id.String() != "20-fresh" {
		t.Fatalf("fresh connection bound to %v, want 20-fresh", id)
	}
	if id := other.name.Load(); id == nil || id.String() != "10-other" {
		t.Fatalf("re-registering connection rebound to %v, want 10-other kept", id)
	}
	if st, _ := findState(p, "guard"); st.State != StateNotRegistered {
		t.Fatalf("guard must stay unregistered: %+v", st)
	}
}

// A server without a connection of ours (never expected from upstream)
// binds nothing: fail closed.
func TestServerWithoutConnBindsNothing(t *testing.T) {
	p := mustNew(t, cfgOf("guard", nil))
	register(t, p, nil, "guard", "10")
	if st, _ := findState(p, "guard"); st.State != StateNotRegistered {
		t.Fatalf("state %+v", st)
	}
}

// Closed connections of plugins the policy does not name, and their last
// errors, are forgotten (issue 11, item 6).
func TestForgetsGonePlugins(t *testing.T) {
	p := mustNew(t, cfgOf("guard", nil))
	for i := 0; i < 20; i++ {
		c := fakeConn(p, fmt.Sprintf("gone%d", i), "10", true, api.Event_CREATE_CONTAINER)
		p.trk.pluginError(fmt.Sprintf("10-gone%d", i), "CreateContainer", errors.New("boom"))
		p.trk.closed(c)
	}
	g := fakeConn(p, "guard", "10", true, api.Event_CREATE_CONTAINER)
	p.trk.pluginError("10-guard", "CreateContainer", errors.New("boom"))
	p.trk.closed(g)
	p.trk.pluginError("10-never", "CreateContainer", errors.New("late metrics of an unknown plugin"))
	p.trk.mu.Lock()
	conns, errs := len(p.trk.conns), len(p.trk.lastErr)
	_, guardErr := p.trk.lastErr["10-guard"]
	p.trk.mu.Unlock()
	if conns != 1 || errs != 1 || !guardErr {
		t.Fatalf("tracker keeps %d connections and %d last errors (guard's kept: %v), want 1 and 1 (guard's)", conns, errs, guardErr)
	}
	// A reload that drops guard forgets it too.
	if err := p.Reload(cfgOf("other", nil)); err != nil {
		t.Fatal(err)
	}
	p.trk.mu.Lock()
	conns, errs = len(p.trk.conns), len(p.trk.lastErr)
	p.trk.mu.Unlock()
	if conns != 0 || errs != 0 {
		t.Fatalf("after the reload: %d connections, %d last errors, want none", conns, errs)
	}
}

func TestRestartLoopKeepsOneClosedConn(t *testing.T) {
	p := mustNew(t, cfgOf("guard", nil))
	for i := 0; i < 50; i++ {
		p.trk.closed(fakeConn(p, "guard", "10", true, api.Event_CREATE_CONTAINER))
		p.trk.closed(newConn(p)) // a connection that never registered
	}
	if n := len(p.trk.conns); n != 1 {
		t.Fatalf("tracker keeps %d connections after a restart loop, want 1", n)
	}
}
