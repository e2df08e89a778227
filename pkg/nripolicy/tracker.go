package nripolicy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/ttrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

const (
	pluginService   = "nri.pkg.api.v1alpha1.Plugin"
	registerMethod  = "/nri.pkg.api.v1alpha1.Runtime/RegisterPlugin"
	methodConfigure = "Configure"
	methodSync      = "Synchronize"
	methodState     = "StateChange"
)

// ident is the name a plugin registered with.
type ident struct{ base, idx string }

func (i *ident) String() string { return i.idx + "-" + i.base }

// conn is one plugin connection as seen through its ttrpc client.
type conn struct {
	id uint64
	// name is set once, when upstream configures the connection.
	name atomic.Pointer[ident]
	// listed is set once Admit has passed a BlockPluginSync barrier after
	// the connection's synchronization: upstream has it in its relay list.
	listed atomic.Bool

	// guarded by tracker.mu
	// registered is the identity from this connection's own RegisterPlugin,
	// bound to name when upstream configures the connection.
	registered  *ident
	events      api.EventMask
	configured  bool
	synced      bool
	closed      bool
	since       time.Time
	closeReason string
	transport   error // last transport failure of a call on this conn
}

// connView is an immutable copy of a conn's state in a view.
type connView struct {
	c           *conn
	base, idx   string
	events      api.EventMask
	configured  bool
	synced      bool
	closed      bool
	since       time.Time
	closeReason string
}

// view is an immutable snapshot of every named connection. changed is
// closed when a newer view replaces it.
type view struct {
	gen     uint64
	changed chan struct{}
	conns   []connView
	byBase  map[string][]int
	lastErr map[string]string // by "idx-base"
}

// tracker follows plugin connections through the ttrpc options.
type tracker struct {
	p       *Policy
	created time.Time

	mu     sync.Mutex
	nextID uint64
	gen    uint64
	conns  []*conn
	// connecting is the connection whose ttrpc client upstream created
	// last; the ttrpc server upstream creates next belongs to it.
	connecting *conn
	lastErr    map[string]string

	cur atomic.Pointer[view]
}

func newTracker(p *Policy) *tracker {
	t := &tracker{p: p, created: time.Now(), lastErr: map[string]string{}}
	t.cur.Store(&view{changed: make(chan struct{})})
	return t
}

func (t *tracker) view() *view { return t.cur.Load() }

// publishLocked builds and swaps in a new view. Callers hold t.mu and
// call t.p.notifyReadiness after releasing it.
func (t *tracker) publishLocked() {
	t.gen++
	v := &view{gen: t.gen, changed: make(chan struct{}), byBase: map[string][]int{}, lastErr: make(map[string]string, len(t.lastErr))}
	for _, c := range t.conns {
		id := c.name.Load()
		if id == nil {
			continue
		}
		v.byBase[id.base] = append(v.byBase[id.base], len(v.conns))
		v.conns = append(v.conns, connView{c: c, base: id.base, idx: id.idx, events: c.events,
			configured: c.configured, synced: c.synced, closed: c.closed, since: c.since, closeReason: c.closeReason})
	}
	for k, e := range t.lastErr {
		v.lastErr[k] = e
	}
	old := t.cur.Swap(v)
	close(old.changed)
}

// change runs fn under the lock, publishes a new view and notifies.
func (t *tracker) change(fn func() bool) {
	t.mu.Lock()
	if !fn() {
		t.mu.Unlock()
		return
	}
	t.publishLocked()
	t.mu.Unlock()
	t.p.notifyReadiness()
}

// reloaded publishes a new view for a new policy, forgetting closed
// connections of plugins it no longer names.
func (t *tracker) reloaded() {
	t.change(func() bool { t.pruneLocked(nil); return true })
}

// clientOpt is the ttrpc.ClientOpts upstream applies to each new plugin
// connection (plugin.connect). It must not replace upstream's own close
// handler, so it never uses ttrpc.WithOnClose.
func (t *tracker) clientOpt(cl *ttrpc.Client) {
	t.mu.Lock()
	t.nextID++
	c := &conn{id: t.nextID, since: time.Now()}
	t.conns = append(t.conns, c)
	t.connecting = c
	t.mu.Unlock()
	ttrpc.WithChainUnaryClientInterceptor(func(ctx context.Context, req *ttrpc.Request, resp *ttrpc.Response, info *ttrpc.UnaryClientInfo, invoke ttrpc.Invoker) error {
		return t.intercept(c, ctx, req, resp, invoke)
	})(cl)
	go func() {
		// Returns once upstream's own close handler has run, so upstream
		// already treats the plugin as closed when we mark it so.
		_ = cl.UserOnCloseWait(context.Background())
		t.closed(c)
	}()
}

func (t *tracker) intercept(c *conn, ctx context.Context, req *ttrpc.Request, resp *ttrpc.Response, invoke ttrpc.Invoker) error {
	if req.Service != pluginService {
		return invoke(ctx, req, resp)
	}
	switch req.Method {
	case "RunPodSandbox", "CreateContainer", "UpdateContainer":
		adm, _ := ctx.Value(admissionKey{}).(*Admission)
		err := invoke(ctx, req, resp)
		if err != nil {
			t.transportFailure(c, err)
		}
		if adm != nil && string(adm.event) == req.Method {
			if err == nil && req.Method == "RunPodSandbox" && resp.Status != nil && resp.Status.Code == int32(codes.Unimplemented) {
				// An old plugin: upstream retries over StateChange.
				return err
			}
			adm.record(c, err, resp)
		}
		return err
	case methodState:
		adm, _ := ctx.Value(admissionKey{}).(*Admission)
		err := invoke(ctx, req, resp)
		if err != nil {
			t.transportFailure(c, err)
		}
		if adm != nil && adm.event == EventRunPodSandbox {
			var ev api.StateChangeEvent
			if proto.Unmarshal(req.Payload, &ev) == nil && ev.Event == api.Event_RUN_POD_SANDBOX {
				adm.record(c, err, resp)
			}
		}
		return err
	case methodConfigure:
		t.configuring(c)
		err := invoke(ctx, req, resp)
		if err == nil && statusOK(resp) {
			var rpl api.ConfigureResponse
			if proto.Unmarshal(resp.Payload, &rpl) == nil {
				events := api.EventMask(rpl.Events)
				if events == 0 {
					events = api.ValidEvents // as upstream does
				}
				t.change(func() bool { c.events, c.configured = events, true; return true })
			}
		}
		return err
	case methodSync:
		err := invoke(ctx, req, resp)
		if err == nil && statusOK(resp) {
			var rpl api.SynchronizeResponse
			if proto.Unmarshal(resp.Payload, &rpl) == nil && !rpl.More {
				t.change(func() bool {
					if c.closed || c.synced {
						return false
					}
					c.synced, c.since = true, time.Now()
					return true
				})
			}
		}
		return err
	}
	return invoke(ctx, req, resp)
}

func statusOK(resp *ttrpc.Response) bool {
	return resp.Status == nil || resp.Status.Code == int32(codes.OK)
}

// configuring binds the connection's own registration to it. Upstream
// configures a connection only after its RegisterPlugin answered.
func (t *tracker) configuring(c *conn) {
	t.change(func() bool {
		id := c.registered
		if id == nil || c.name.Load() != nil {
			return false
		}
		c.name.Store(id)
		c.since = time.Now()
		return true
	})
}

func (t *tracker) transportFailure(c *conn, err error) {
	t.mu.Lock()
	c.transport = err
	t.mu.Unlock()
}

// closed marks c disconnected. The tracker keeps, per identity, only the
// last closed connection of a configured plugin (for readiness: since
// when, and why), so a restart loop does not grow the list.
func (t *tracker) closed(c *conn) {
	t.change(func() bool {
		c.closed = true
		c.since = time.Now()
		c.closeReason = "connection closed"
		if c.transport != nil {
			c.closeReason = "connection dropped after: " + c.transport.Error()
		}
		t.pruneLocked(c)
		return c.name.Load() != nil
	})
}

// pruneLocked forgets closed connections that readiness no longer needs:
// older closed connections of the same identity as latest, closed
// connections of plugins the policy does not name, and the last errors of
// identities without a connection left.
func (t *tracker) pruneLocked(latest *conn) {
	pol := t.p.cur.Load()
	var lid *ident
	if latest != nil {
		lid = latest.name.Load()
	}
	keep := t.conns[:0]
	for _, o := range t.conns {
		on := o.name.Load()
		switch {
		case !o.closed:
		case on == nil || !pol.names(on):
			continue
		case o != latest && lid != nil && *on == *lid:
			continue
		}
		keep = append(keep, o)
	}
	for i := len(keep); i < len(t.conns); i++ {
		t.conns[i] = nil
	}
	t.conns = keep
	for name := range t.lastErr {
		if !t.hasConnLocked(name) {
			delete(t.lastErr, name)
		}
	}
}

func (t *tracker) hasConnLocked(name string) bool {
	for _, o := range t.conns {
		if id := o.name.Load(); id != nil && id.String() == name {
			return true
		}
	}
	return false
}

// serverOpt is the ttrpc.ServerOpt upstream applies to the ttrpc server of
// each plugin connection. Upstream creates a connection's server right
// after its client, in the same call (plugin.connect), and sets up one
// connection at a time; so the server belongs to the connection created
// last, and its interceptor sees that connection's RegisterPlugin only.
func (t *tracker) serverOpt() ttrpc.ServerOpt {
	return perServer(func() ttrpc.ServerOpt {
		t.mu.Lock()
		c := t.connecting
		t.connecting = nil
		t.mu.Unlock()
		return ttrpc.WithChainUnaryServerInterceptor(func(ctx context.Context, unmarshal ttrpc.Unmarshaler, info *ttrpc.UnaryServerInfo, method ttrpc.Method) (any, error) {
			return t.serverIntercept(c, ctx, unmarshal, info, method)
		})
	})
}

// perServer returns a server option that calls mk for every server it is
// applied to. ttrpc.ServerOpt takes an unexported type, so the option is
// built through type inference instead of a named parameter.
func perServer[O ~func(C) error, C any](mk func() O) O {
	return func(cfg C) error { return mk()(cfg) }
}

// serverIntercept sees RegisterPlugin on connection c (nil: a server
// without a client of ours, whose registrations are never bound) and
// records the plugin's name and index on c. A connection keeps the
// identity it was configured with: a later RegisterPlugin on it is
// logged and ignored, so it can neither rebind itself nor others.
func (t *tracker) serverIntercept(c *conn, ctx context.Context, unmarshal ttrpc.Unmarshaler, info *ttrpc.UnaryServerInfo, method ttrpc.Method) (any, error) {
	if info.FullMethod != registerMethod || c == nil {
		return method(ctx, unmarshal)
	}
	return method(ctx, func(v any) error {
		err := unmarshal(v)
		r, ok := v.(*api.RegisterPluginRequest)
		if !ok || err != nil || api.CheckPluginName(r.PluginName) != nil || api.CheckPluginIndex(r.PluginIdx) != nil {
			return err
		}
		id := &ident{base: r.PluginName, idx: r.PluginIdx}
		// Before the handler runs: it wakes upstream's start, which
		// configures the plugin right away.
		t.mu.Lock()
		bound := c.name.Load()
		if bound == nil {
			c.registered = id
		}
		t.mu.Unlock()
		if bound != nil && *bound != *id {
			t.p.log.Warnf("nri: plugin %s registered again as %s on the same connection; the policy keeps %s", bound, id, bound)
		}
		return err
	})
}

// pluginError records the last error upstream reported for a plugin.
func (t *tracker) pluginError(name, op string, err error) {
	msg := fmt.Sprintf("%s %s: %v", time.Now().UTC().Format(time.RFC3339), op, err)
	t.change(func() bool {
		if !t.hasConnLocked(name) {
			return false // a plugin already forgotten
		}
		t.lastErr[name] = msg
		return true
	})
}

// metrics wraps the runtime's metrics.
type metrics struct {
	t    *tracker
	next adaptation.Metrics
}

func (m *metrics) RecordPluginInvocation(name, op string, err error) {
	m.next.RecordPluginInvocation(name, op, err)
	if err != nil {
		m.t.pluginError(name, op, err)
	}
}

func (m *metrics) RecordPluginLatency(name, op string, d time.Duration) {
	m.next.RecordPluginLatency(name, op, d)
}

func (m *metrics) RecordPluginAdjustments(name, op string, adj *adaptation.ContainerAdjustment, updates, evicts int) {
	m.next.RecordPluginAdjustments(name, op, adj, updates, evicts)
}

func (m *metrics) UpdatePluginCount(n int) { m.next.UpdatePluginCount(n) }

type nopMetrics struct{}

func (nopMetrics) RecordPluginInvocation(string, string, error)      {}
func (nopMetrics) RecordPluginLatency(string, string, time.Duration) {}
func (nopMetrics) RecordPluginAdjustments(string, string, *adaptation.ContainerAdjustment, int, int) {
}
func (nopMetrics) UpdatePluginCount(int) {}

// AdaptationOptions returns the options to pass to adaptation.New. They
// wrap, never replace, the runtime's own metrics (nil for none) and ttrpc
// options: the runtime must not pass WithMetrics or WithTTRPCOptions
// itself. One Policy serves one Adaptation.
func (p *Policy) AdaptationOptions(runtimeMetrics adaptation.Metrics, clientOpts []ttrpc.ClientOpts, serverOpts []ttrpc.ServerOpt) []adaptation.Option {
	if runtimeMetrics == nil {
		runtimeMetrics = nopMetrics{}
	}
	copts := append(append([]ttrpc.ClientOpts(nil), clientOpts...), p.trk.clientOpt)
	sopts := append(append([]ttrpc.ServerOpt(nil), serverOpts...), p.trk.serverOpt())
	return []adaptation.Option{
		adaptation.WithMetrics(&metrics{t: p.trk, next: runtimeMetrics}),
		adaptation.WithTTRPCOptions(copts, sopts),
	}
}

// isTransport reports whether err is a transport failure of a plugin call.
func isTransport(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ttrpc.ErrClosed) ||
		errors.Is(err, ttrpc.ErrServerClosed) || errors.Is(err, ttrpc.ErrProtocol)
}
