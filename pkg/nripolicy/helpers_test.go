package nripolicy

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/ttrpc"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/nrigate/nrigate/pkg/nripolicy/internal/testrig"
)

// fakeConn drives the tracker the way the interceptors do, without a
// socket: register, configure with events, and optionally synchronize.
func fakeConn(p *Policy, base, idx string, synced bool, events ...api.Event) *conn {
	t := p.trk
	t.mu.Lock()
	t.nextID++
	c := &conn{id: t.nextID, since: time.Now(), registered: &ident{base: base, idx: idx}}
	t.conns = append(t.conns, c)
	t.mu.Unlock()
	t.configuring(c)
	var m api.EventMask
	m.Set(events...)
	t.change(func() bool { c.events, c.configured = m, true; return true })
	if synced {
		syncConn(p, c)
	}
	return c
}

func syncConn(p *Policy, c *conn) {
	c.listed.Store(true)
	p.trk.change(func() bool { c.synced, c.since = true, time.Now(); return true })
}

var okResp = &ttrpc.Response{}

func errResp(code int32) *ttrpc.Response {
	return &ttrpc.Response{Status: &rpcstatus.Status{Code: code, Message: "plugin says no"}}
}

// mustNew returns a policy attached to an adaptation that is never
// started: the tests drive the tracker themselves.
func mustNew(t testing.TB, cfg *Config, opts ...Option) *Policy {
	t.Helper()
	p := mustNewDetached(t, cfg, opts...)
	attach(t, p)
	return p
}

// attach attaches p to a new adaptation that is never started.
func attach(t testing.TB, p *Policy) {
	t.Helper()
	a, err := testrig.NewAdaptation(filepath.Join(t.TempDir(), "nri.sock"), nil, p.AdaptationOptions(nil, nil, nil)...)
	if err != nil {
		t.Fatalf("adaptation.New: %v", err)
	}
	p.Attach(a)
}

// mustNewDetached returns a policy that was never attached.
func mustNewDetached(t testing.TB, cfg *Config, opts ...Option) *Policy {
	t.Helper()
	p, err := New(cfg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// cfgOf builds a config with one plugin key and a mutator.
func cfgOf(key string, mut func(*PluginConfig)) *Config {
	pc := DefaultPluginConfig()
	if mut != nil {
		mut(pc)
	}
	c := DefaultConfig()
	c.Plugins = map[string]*PluginConfig{key: pc}
	return c
}

func pod(ns, name string, lbl map[string]string) *api.PodSandbox {
	return &api.PodSandbox{Id: ns + "-" + name, Namespace: ns, Name: name, Uid: "uid-" + name, Labels: lbl}
}

func ctr(name string) *api.Container { return &api.Container{Id: "c-" + name, Name: name} }

type recorder struct {
	mu  sync.Mutex
	all []Decision
}

func (r *recorder) Decided(d Decision) {
	r.mu.Lock()
	r.all = append(r.all, d)
	r.mu.Unlock()
}

func (r *recorder) list() []Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Decision(nil), r.all...)
}

type logRec struct {
	mu    sync.Mutex
	warns []string
}

func (l *logRec) Debugf(string, ...any) {}
func (l *logRec) Infof(string, ...any)  {}
func (l *logRec) Warnf(f string, a ...any) {
	l.mu.Lock()
	l.warns = append(l.warns, f)
	l.mu.Unlock()
}
func (l *logRec) Errorf(string, ...any) {}

// waiting returns a channel that receives each event an Admit of p starts
// waiting for.
func waiting(p *Policy) <-chan Event {
	c := make(chan Event, 16)
	OnWait(p, func(ev Event) { c <- ev })
	return c
}
