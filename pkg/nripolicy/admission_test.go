package nripolicy

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/ttrpc"
)

func TestRefusalNotRegistered(t *testing.T) {
	rec := &recorder{}
	p := mustNew(t, cfgOf("guard", func(pc *PluginConfig) { pc.RegistrationWait = Duration(30 * time.Millisecond) }), WithDecisionHook(rec))
	start := time.Now()
	_, adm, err := p.Admit(context.Background(), Request{Event: EventCreateContainer, Pod: pod("default", "p1", nil), Container: ctr("c1")})
	if took := time.Since(start); took < 30*time.Millisecond || took > 500*time.Millisecond {
		t.Errorf("Admit took %v, want about registration_wait (30ms)", took)
	}
	if err == nil || adm != nil {
		t.Fatalf("Admit = %v, %v; want a refusal", adm, err)
	}
	if !errors.Is(err, ErrRefused) || !errors.Is(err, ErrPluginNotReady) || errors.Is(err, ErrPluginNotActed) {
		t.Fatalf("error does not wrap ErrRefused and ErrPluginNotReady only: %v", err)
	}
	var re *RefusalError
	if !errors.As(err, &re) || re.Plugin != "guard" || re.Event != EventCreateContainer || re.Namespace != "default" ||
		re.Pod != "p1" || re.Container != "c1" || re.Waited < 30*time.Millisecond {
		t.Fatalf("RefusalError fields wrong: %+v", re)
	}
	want := `nri: plugin "guard" is required for CreateContainer of container "c1" in pod default/p1 (fail_policy=fail) but is not registered; waited 30ms (registration_wait=30ms); start or fix the plugin, or exempt the pod with exclude_pod_selector / exclude_namespaces`
	re.Waited = 30 * time.Millisecond // the real wait is a little longer
	if got := re.Error(); got != want {
		t.Errorf("message:\n got %s\nwant %s", got, want)
	}
	d := rec.list()
	if len(d) != 1 || d[0].Outcome != OutcomeRefused || d[0].Plugin != "guard" || d[0].Waited < 30*time.Millisecond {
		t.Errorf("decisions = %+v", d)
	}
}

func TestRefusalRunPodSandboxMessage(t *testing.T) {
	p := mustNew(t, cfgOf("10-guard", func(pc *PluginConfig) { pc.Events = []Event{EventRunPodSandbox} }))
	fakeConn(p, "guard", "20", true, api.Event_RUN_POD_SANDBOX)
	_, _, err := p.Admit(context.Background(), Request{Event: EventRunPodSandbox, Pod: pod("ns", "p", nil)})
	if err == nil {
		t.Fatal("a plugin registered under another index must not satisfy 10-guard")
	}
	msg := err.Error()
	for _, s := range []string{`plugin "10-guard" is required for RunPodSandbox of pod ns/p`, "not registered", "20-guard"} {
		if !strings.Contains(msg, s) {
			t.Errorf("message lacks %q: %s", s, msg)
		}
	}
	if strings.Contains(msg, "container") {
		t.Errorf("RunPodSandbox message names a container: %s", msg)
	}
}

func TestAdmitStates(t *testing.T) {
	cases := []struct {
		name   string
		setup  func(p *Policy)
		reason string // empty: admitted
	}{
		{"ready", func(p *Policy) { fakeConn(p, "guard", "10", true, api.Event_CREATE_CONTAINER) }, ""},
		{"registered, not synchronized", func(p *Policy) { fakeConn(p, "guard", "10", false, api.Event_CREATE_CONTAINER) }, "not synchronized"},
		{"not subscribed", func(p *Policy) { fakeConn(p, "guard", "10", true, api.Event_STOP_CONTAINER) }, "not subscribed"},
		{"disconnected", func(p *Policy) { p.trk.closed(fakeConn(p, "guard", "10", true, api.Event_CREATE_CONTAINER)) }, "disconnected at"},
		{"restart overlap: one ready conn counts", func(p *Policy) {
			p.trk.closed(fakeConn(p, "guard", "10", true, api.Event_CREATE_CONTAINER))
			fakeConn(p, "guard", "10", true, api.Event_CREATE_CONTAINER)
		}, ""},
		{"other plugin only", func(p *Policy) { fakeConn(p, "other", "10", true, api.Event_CREATE_CONTAINER) }, "not registered"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := mustNew(t, cfgOf("guard", nil))
			tc.setup(p)
			_, adm, err := p.Admit(context.Background(), Request{Event: EventCreateContainer, Pod: pod("d", "p", nil), Container: ctr("c")})
			if tc.reason == "" {
				if err != nil || adm == nil {
					t.Fatalf("Admit = %v, want admitted", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrPluginNotReady) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("Admit error = %v, want ErrPluginNotReady with %q", err, tc.reason)
			}
		})
	}
}

// Partial subscription (issue 11, item 1): a plugin required for two
// events that subscribes to one is not ready for the other, and not ready
// as a whole. Before the fix Admit let RunPodSandbox through here.
func TestPartialSubscription(t *testing.T) {
	for _, tc := range []struct {
		subscribed api.Event
		refused    Event
		admitted   Event
	}{
		{api.Event_CREATE_CONTAINER, EventRunPodSandbox, EventCreateContainer},
		{api.Event_RUN_POD_SANDBOX, EventCreateContainer, EventRunPodSandbox},
	} {
		t.Run("subscribed to "+string(tc.admitted), func(t *testing.T) {
			p := mustNew(t, cfgOf("guard", func(pc *PluginConfig) { pc.Events = []Event{EventRunPodSandbox, EventCreateContainer} }))
			fakeConn(p, "guard", "10", true, tc.subscribed)
			_, _, err := p.Admit(context.Background(), Request{Event: tc.refused, Pod: pod("d", "p", nil), Container: ctr("c")})
			want := "is not subscribed to " + string(tc.refused)
			if !errors.Is(err, ErrPluginNotReady) || !strings.Contains(err.Error(), want) {
				t.Fatalf("Admit(%s) = %v, want ErrPluginNotReady with %q", tc.refused, err, want)
			}
			ctx, adm, err := p.Admit(context.Background(), Request{Event: tc.admitted, Pod: pod("d", "p", nil), Container: ctr("c")})
			if err != nil || ctx.Value(admissionKey{}) != adm {
				t.Fatalf("Admit(%s) = %v, want admitted with the plugin to answer", tc.admitted, err)
			}
			conds := p.Conditions()
			if len(conds) != 1 || conds[0].Status || !strings.Contains(conds[0].Message, want) {
				t.Fatalf("conditions = %+v, want NRIPluginsReady=false saying %q", conds, want)
			}
			if st, _ := findState(p, "guard"); st.State != StateNotSubscribed {
				t.Fatalf("snapshot state %q, want %q", st.State, StateNotSubscribed)
			}
		})
	}
}

// Several instances of one plugin (issue 11, item 2): every connected,
// synchronized instance that subscribes to the event must answer. Before
// the fix one answering instance satisfied the key.
func TestEveryInstanceMustAnswer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		key      string
		idxA     string
		idxB     string
		instance string
	}{
		{"key without index, two indices", "guard", "10", "20", "10-guard"},
		{"key with index, same name twice", "10-guard", "10", "10", "10-guard"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustNew(t, cfgOf(tc.key, nil))
			hung := fakeConn(p, "guard", tc.idxA, true, api.Event_CREATE_CONTAINER)
			ok := fakeConn(p, "guard", tc.idxB, true, api.Event_CREATE_CONTAINER)
			_, adm, err := p.Admit(context.Background(), Request{Event: EventCreateContainer, Pod: pod("d", "p", nil), Container: ctr("c")})
			if err != nil {
				t.Fatal(err)
			}
			if len(adm.acts) != 2 {
				t.Fatalf("%d instances must answer, want 2", len(adm.acts))
			}
			adm.record(ok, nil, okResp)
			adm.record(hung, context.DeadlineExceeded, nil)
			err = adm.Done(nil)
			if !errors.Is(err, ErrPluginNotActed) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "instance "+tc.instance) {
				t.Fatalf("Done = %v, want a refusal naming instance %s", err, tc.instance)
			}
			// Both answering is an admission; an instance still
			// synchronizing does not have to answer.
			fakeConn(p, "guard", tc.idxA, false, api.Event_CREATE_CONTAINER)
			_, adm, err = p.Admit(context.Background(), Request{Event: EventCreateContainer, Pod: pod("d", "p", nil), Container: ctr("c")})
			if err != nil {
				t.Fatal(err)
			}
			adm.record(ok, nil, okResp)
			adm.record(hung, nil, okResp)
			if err := adm.Done(nil); err != nil {
				t.Fatalf("Done with every instance answering = %v", err)
			}
			if n := len(p.Snapshot()); n != 3 {
				t.Fatalf("snapshot has %d entries, want one per instance (3): %+v", n, p.Snapshot())
			}
		})
	}
}

// A plugin that restarted between Admit and the relay answers on a new
// connection with the same identity; that answer counts for the closed
// instance, but never for another admitted instance.
func TestRestartedInstanceAnswerCounts(t *testing.T) {
	p := mustNew(t, cfgOf("guard", nil))
	old := fakeConn(p, "guard", "10", true, api.Event_CREATE_CONTAINER)
	_, adm, err := p.Admit(context.Background(), Request{Event: EventCreateContainer, Pod: pod("d", "p", nil), Container: ctr("c")})
	if err != nil {
		t.Fatal(err)
	}
	p.trk.closed(old)
	restarted := fakeConn(p, "guard", "10", true, api.Event_CREATE_CONTAINER)
	adm.record(restarted, nil, okResp)
	if err := adm.Done(nil); err != nil {
		t.Fatalf("the restarted plugin acted: Done = %v", err)
	}
}

// Attach forgotten (issue 11, item 6): Admit fails closed for requests a
// plugin is required for, and lets the others through.
func TestAdmitWithoutAttachFailsClosed(t *testing.T) {
	p := mustNewDetached(t, cfgOf("guard", func(pc *PluginConfig) { pc.Namespaces = []string{"prod"} }))
	fakeConn(p, "guard", "10", true, api.Event_CREATE_CONTAINER)
	if _, _, err := p.Admit(context.Background(), Request{Event: EventCreateContainer, Pod: pod("prod", "p", nil)}); !errors.Is(err, ErrNotAttached) {
		t.Fatalf("Admit = %v, want ErrNotAttached", err)
	}
	if _, adm, err := p.Admit(context.Background(), Request{Event: EventCreateContainer, Pod: pod("dev", "p", nil)}); err != nil || adm.Done(nil) != nil {
		t.Fatalf("a pod out of scope must pass: %v", err)
	}
}

// The default runtime handler (issue 11, item 3): a pod that names no
// handler runs with the runtime's default, and runtime_handlers match it.
func TestDefaultRuntimeHandlerInScope(t *testing.T) {
	cfg := cfgOf("guard", func(pc *PluginConfig) { pc.RuntimeHandlers = []string{"runc"} })
	for _, tc := range []struct {
		name    string
		opts    []Option
		handler string
		refused bool
	}{
		{"no handler, default runc", []Option{WithDefaultRuntimeHandler("runc")}, "", true},
		{"runc named", []Option{WithDefaultRuntimeHandler("runc")}, "runc", true},
		{"other handler", []Option{WithDefaultRuntimeHandler("runc")}, "kata", false},
		{"no handler, default crun", []Option{WithDefaultRuntimeHandler("crun")}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustNew(t, cfg, tc.opts...)
			pd := pod("d", "p", nil)
			pd.RuntimeHandler = tc.handler
			_, _, err := p.Admit(context.Background(), Request{Event: EventCreateContainer, Pod: pd})
			if (err != nil) != tc.refused {
				t.Fatalf("Admit = %v, want refused=%v", err, tc.refused)
			}
		})
	}
}

func admitReady(t *testing.T, p *Policy) (context.Context, *Admission, *conn) {
	t.Helper()
	c := fakeConn(p, "guard", "10", true, api.Event_CREATE_CONTAINER)
	ctx, adm, err := p.Admit(context.Background(), Request{Event: EventCreateContainer, Pod: pod("d", "p", nil), Container: ctr("c")})
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Value(admissionKey{}) != adm {
		t.Fatal("the returned ctx must carry the admission for the interceptors")
	}
	return ctx, adm, c
}

func TestDone(t *testing.T) {
	plugErr := errors.New("plugin 10-guard: no")
	cases := []struct {
		name    string
		policy  FailPolicy
		answer  func(a *Admission, c *conn)
		relay   error
		wantErr error // nil: Done returns nil
		reason  string
	}{
		{"answered", FailPolicyFail, func(a *Admission, c *conn) { a.record(c, nil, okResp) }, nil, nil, ""},
		{"skipped", FailPolicyFail, func(*Admission, *conn) {}, nil, ErrPluginNotActed, "skipped"},
		{"timed out", FailPolicyFail, func(a *Admission, c *conn) { a.record(c, context.DeadlineExceeded, okResp) }, nil, context.DeadlineExceeded, "request timeout"},
		{"lost connection", FailPolicyFail, func(a *Admission, c *conn) { a.record(c, ttrpc.ErrClosed, okResp) }, nil, ttrpc.ErrClosed, "lost its connection"},
		{"protocol error", FailPolicyFail, func(a *Admission, c *conn) { a.record(c, ttrpc.ErrProtocol, okResp) }, nil, ttrpc.ErrProtocol, "protocol"},
		{"plugin's own error fails the relay", FailPolicyFail, func(a *Admission, c *conn) { a.record(c, nil, errResp(2)) }, plugErr, plugErr, ""},
		{"plugin's own error, ignore policy", FailPolicyIgnore, func(a *Admission, c *conn) { a.record(c, nil, errResp(2)) }, plugErr, plugErr, ""},
		{"ignore: skipped proceeds", FailPolicyIgnore, func(*Admission, *conn) {}, nil, nil, ""},
		{"ignore: timeout proceeds", FailPolicyIgnore, func(a *Admission, c *conn) { a.record(c, context.DeadlineExceeded, okResp) }, nil, nil, ""},
		{"answer from another plugin does not count", FailPolicyFail, func(a *Admission, _ *conn) {
			a.record(&conn{}, nil, okResp)
		}, nil, ErrPluginNotActed, "skipped"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec, log := &recorder{}, &logRec{}
			p := mustNew(t, cfgOf("guard", func(pc *PluginConfig) { pc.FailPolicy = tc.policy }), WithDecisionHook(rec), WithLogger(log))
			_, adm, c := admitReady(t, p)
			tc.answer(adm, c)
			err := adm.Done(tc.relay)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("Done = %v, want nil", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("Done = %v, want %v", err, tc.wantErr)
			}
			if tc.relay == nil && tc.wantErr != nil {
				if !errors.Is(err, ErrRefused) || !errors.Is(err, ErrPluginNotActed) || !strings.Contains(err.Error(), tc.reason) {
					t.Fatalf("Done = %v, want ErrRefused+ErrPluginNotActed with %q", err, tc.reason)
				}
			}
			if tc.policy == FailPolicyIgnore && tc.relay == nil && strings.Contains(tc.name, "proceeds") {
				d := rec.list()
				if len(d) != 1 || d[0].Outcome != OutcomeIgnored || len(log.warns) != 1 {
					t.Fatalf("ignored miss must be counted and logged: %+v, %d warnings", d, len(log.warns))
				}
			}
		})
	}
}

func TestDoneNilAndTrivial(t *testing.T) {
	var a *Admission
	e := errors.New("x")
	if a.Done(nil) != nil || a.Done(e) != e {
		t.Fatal("nil admission must return the relay error")
	}
	p := mustNew(t, nil)
	ctx, adm, err := p.Admit(context.Background(), Request{Event: EventCreateContainer, Pod: pod("d", "p", nil)})
	if err != nil || adm.Done(nil) != nil || adm.Done(e) != e || ctx != context.Background() {
		t.Fatal("no policy must be a no-op")
	}
	if len(p.Conditions()) != 0 {
		t.Fatal("no plugins configured: no conditions")
	}
}

func TestAdmitWaitsAndReleasesPromptly(t *testing.T) {
	rec := &recorder{}
	p := mustNew(t, cfgOf("guard", func(pc *PluginConfig) { pc.RegistrationWait = Duration(5 * time.Second) }), WithDecisionHook(rec))
	c := fakeConn(p, "guard", "10", false, api.Event_CREATE_CONTAINER)
	waits := waiting(p)
	type res struct {
		err error
		at  time.Time
	}
	done := make(chan res, 1)
	go func() {
		_, _, err := p.Admit(context.Background(), Request{Event: EventCreateContainer, Pod: pod("d", "p", nil), Container: ctr("c")})
		done <- res{err, time.Now()}
	}()
	<-waits
	select {
	case r := <-done:
		t.Fatalf("Admit returned before the plugin was ready: %v", r.err)
	default:
	}
	synced := time.Now()
	syncConn(p, c)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.at.Before(synced) {
		t.Errorf("released at %v, before the synchronization at %v", r.at, synced)
	}
	d := rec.list()
	if len(d) != 1 || d[0].Outcome != OutcomeAllowed || d[0].Waited <= 0 {
		t.Errorf("decisions = %+v, want one allowed-after-wait", d)
	}
}

func TestAdmitContextCancelled(t *testing.T) {
	p := mustNew(t, cfgOf("guard", func(pc *PluginConfig) { pc.RegistrationWait = Duration(time.Minute) }))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := p.Admit(ctx, Request{Event: EventCreateContainer, Pod: pod("d", "p", nil)})
	if time.Since(start) > time.Second {
		t.Fatal("Admit did not give up on ctx")
	}
	if !errors.Is(err, ErrRefused) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a refusal wrapping the ctx error", err)
	}
}

func TestIgnoreNeverRefuses(t *testing.T) {
	rec, log := &recorder{}, &logRec{}
	p := mustNew(t, cfgOf("guard", func(pc *PluginConfig) {
		pc.FailPolicy = FailPolicySkip
		pc.RegistrationWait = Duration(10 * time.Millisecond)
	}), WithDecisionHook(rec), WithLogger(log))
	_, adm, err := p.Admit(context.Background(), Request{Event: EventCreateContainer, Pod: pod("d", "p", nil)})
	if err != nil || adm.Done(nil) != nil {
		t.Fatalf("ignore policy refused: %v", err)
	}
	d := rec.list()
	if len(d) != 1 || d[0].Outcome != OutcomeIgnored || d[0].Waited < 10*time.Millisecond || len(log.warns) != 1 {
		t.Fatalf("decisions = %+v warnings=%d", d, len(log.warns))
	}
	if c := p.Conditions(); len(c) != 1 || !c[0].Status {
		t.Fatalf("ignore plugins do not lower NRIPluginsReady: %+v", c)
	}
}

func TestReloadKeepsInFlightAdmission(t *testing.T) {
	p := mustNew(t, cfgOf("guard", nil))
	_, adm, _ := admitReady(t, p)
	if err := p.Reload(cfgOf("guard", func(pc *PluginConfig) { pc.FailPolicy = FailPolicyIgnore })); err != nil {
		t.Fatal(err)
	}
	// The in-flight admission still has fail_policy=fail: the skipped plugin refuses.
	if err := adm.Done(nil); !errors.Is(err, ErrPluginNotActed) {
		t.Fatalf("in-flight admission lost its policy: %v", err)
	}
	_, adm2, err := p.Admit(context.Background(), Request{Event: EventCreateContainer, Pod: pod("d", "p", nil)})
	if err != nil || adm2.Done(nil) != nil {
		t.Fatalf("new admission must use the reloaded ignore policy: %v", err)
	}
	bad := cfgOf("guard", func(pc *PluginConfig) { pc.FailPolicy = "maybe" })
	if err := p.Reload(bad); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Reload(bad) = %v", err)
	}
	if p.Config().Plugins["guard"].Policy() != FailPolicyIgnore {
		t.Fatal("a bad reload must keep the old policy")
	}
}

func TestConditionsAndSnapshot(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Plugins = map[string]*PluginConfig{"guard": DefaultPluginConfig(), "net": DefaultPluginConfig(), "quiet": DefaultPluginConfig(), "soft": DefaultPluginConfig()}
	cfg.Plugins["net"].Readiness = ReadinessNetwork
	cfg.Plugins["quiet"].Readiness = ReadinessNone
	cfg.Plugins["soft"].FailPolicy = FailPolicyIgnore
	hook := &readinessRec{}
	p := mustNew(t, cfg, WithReadinessHook(hook))
	cond := p.Conditions()
	if len(cond) != 2 || cond[0].Type != ConditionNRIPluginsReady || cond[0].Status || cond[0].Reason != ReasonNRIPluginsNotReady ||
		cond[1].Type != ConditionNetworkReady || cond[1].Status || cond[1].Reason != ReasonNRIPluginNotReady {
		t.Fatalf("conditions = %+v", cond)
	}
	for _, s := range []string{`"guard" is not registered`, `"net" is not registered`} {
		if !strings.Contains(cond[0].Message, s) {
			t.Errorf("message lacks %q: %s", s, cond[0].Message)
		}
	}
	if strings.Contains(cond[0].Message, "quiet") || strings.Contains(cond[0].Message, "soft") || strings.Contains(cond[1].Message, "guard") {
		t.Errorf("wrong plugins listed: %+v", cond)
	}
	ch := p.Changed()
	g := fakeConn(p, "guard", "10", false, api.Event_CREATE_CONTAINER)
	select {
	case <-ch:
	default:
		t.Fatal("Changed must close on a registration")
	}
	if !strings.Contains(p.Conditions()[0].Message, `"guard" is registered as 10-guard but not synchronized`) {
		t.Errorf("message: %s", p.Conditions()[0].Message)
	}
	syncConn(p, g)
	n := fakeConn(p, "net", "20", true, api.Event_CREATE_CONTAINER)
	cond = p.Conditions()
	if len(cond) != 1 || !cond[0].Status {
		t.Fatalf("all fail plugins ready: %+v", cond)
	}
	p.trk.closed(n)
	cond = p.Conditions()
	if len(cond) != 2 || !strings.Contains(cond[1].Message, `"net" is disconnected at`) {
		t.Fatalf("after disconnect: %+v", cond)
	}
	fakeConn(p, "extra", "90", true, api.Event_CREATE_CONTAINER)
	snap := p.Snapshot()
	var keys []string
	for _, s := range snap {
		keys = append(keys, s.Key+"="+string(s.State))
	}
	want := "90-extra=ready guard=ready net=disconnected quiet=not registered soft=not registered"
	if strings.Join(keys, " ") != want {
		t.Fatalf("snapshot = %v, want %s", keys, want)
	}
	if s := snap[1]; s.Index != "10" || s.Name != "guard" || !s.Configured || s.FailPolicy != FailPolicyFail ||
		len(s.Events) != 1 || s.Events[0] != "CreateContainer" || s.Since.IsZero() {
		t.Errorf("guard state = %+v", s)
	}
	if s := snap[2]; s.LastError == "" {
		t.Errorf("a disconnected plugin says why: %+v", s)
	}
	deadline := time.Now().Add(time.Second)
	for {
		last := hook.last()
		if len(last) == len(snap) && last[0].Key == "90-extra" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readiness hook did not get the latest snapshot: %+v", last)
		}
		time.Sleep(time.Millisecond)
	}
}

type readinessRec struct {
	mu     sync.Mutex
	busy   bool
	states [][]PluginState
}

func (r *readinessRec) ReadinessChanged(s []PluginState) {
	r.mu.Lock()
	if r.busy {
		panic("ReadinessHook calls must be serialized")
	}
	r.busy = true
	r.mu.Unlock()
	time.Sleep(100 * time.Microsecond)
	r.mu.Lock()
	r.busy = false
	r.states = append(r.states, s)
	r.mu.Unlock()
}

func (r *readinessRec) last() []PluginState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.states) == 0 {
		return nil
	}
	return r.states[len(r.states)-1]
}
