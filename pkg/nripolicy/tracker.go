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

	mu      sync.Mutex
	nextID  uint64
	gen     uint64
	conns   []*conn
	pending *ident
	lastErr map[string]string

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

// bump publishes a new view without a state change (after a Reload).
func (t *tracker) bump() { t.change(func() bool { return true }) }

// clientOpt is the ttrpc.ClientOpts upstream applies to each new plugin
// connection (plugin.connect). It must not replace upstream's own close
// handler, so it never uses ttrpc.WithOnClose.
func (t *tracker) clientOpt(cl *ttrpc.Client) {
	t.mu.Lock()
	t.nextID++
	c := &conn{id: t.nextID, since: time.Now()}
	t.conns = append(t.conns, c)
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

// configuring binds the pending registration to c. Upstream registers and
// configures plugins strictly one at a time, so the Configure call that
// follows a RegisterPlugin belongs to that registration.
func (t *tracker) configuring(c *conn) {
	t.change(func() bool {
		id := t.pending
		t.pending = nil
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

// closed marks c disconnected and forgets older closed connections of the
// same plugin, so a restart loop does not grow the list.
func (t *tracker) closed(c *conn) {
	t.change(func() bool {
		c.closed = true
		c.since = time.Now()
		c.closeReason = "connection closed"
		if c.transport != nil {
			c.closeReason = "connection dropped after: " + c.transport.Error()
		}
		id := c.name.Load()
		keep := t.conns[:0]
		for _, o := range t.conns {
			if o == c {
				if id != nil {
					keep = append(keep, o)
				}
				continue
			}
			if on := o.name.Load(); o.closed && id != nil && on != nil && *on == *id {
				continue
			}
			keep = append(keep, o)
		}
		for i := len(keep); i < len(t.conns); i++ {
			t.conns[i] = nil
		}
		t.conns = keep
		return id != nil
	})
}

// serverInterceptor sees the plugin's RegisterPlugin request and remembers
// its name and index as the pending registration.
func (t *tracker) serverInterceptor(ctx context.Context, unmarshal ttrpc.Unmarshaler, info *ttrpc.UnaryServerInfo, method ttrpc.Method) (any, error) {
	if info.FullMethod != registerMethod {
		return method(ctx, unmarshal)
	}
	var id *ident
	res, err := method(ctx, func(v any) error {
		err := unmarshal(v)
		if r, ok := v.(*api.RegisterPluginRequest); ok && err == nil &&
			api.CheckPluginName(r.PluginName) == nil && api.CheckPluginIndex(r.PluginIdx) == nil {
			// Before the handler runs: it wakes upstream's start, which
			// configures the plugin right away.
			id = &ident{base: r.PluginName, idx: r.PluginIdx}
			t.mu.Lock()
			t.pending = id
			t.mu.Unlock()
		}
		return err
	})
	if err != nil && id != nil {
		t.mu.Lock()
		if t.pending == id {
			t.pending = nil
		}
		t.mu.Unlock()
	}
	return res, err
}

// pluginError records the last error upstream reported for a plugin.
func (t *tracker) pluginError(name, op string, err error) {
	msg := fmt.Sprintf("%s %s: %v", time.Now().UTC().Format(time.RFC3339), op, err)
	t.change(func() bool { t.lastErr[name] = msg; return true })
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
	sopts := append(append([]ttrpc.ServerOpt(nil), serverOpts...), ttrpc.WithChainUnaryServerInterceptor(p.trk.serverInterceptor))
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
