package nripolicy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"

	"github.com/nrigate/nrigate/pkg/nripolicy/internal/testrig"
)

// init silences upstream's global logger once for the whole test binary,
// through the same sync.Once the ginkgo suite uses: setting it again
// while an adaptation runs would be a data race.
func init() { testrig.QuietNRILog() }

// okPlugin is an in-process plugin that adjusts every container.
type okPlugin struct{ synced chan struct{} }

// Synchronize tells the rig that upstream is synchronizing the plugin: it
// holds its sync write lock from before this call until the plugin is in
// its relay list, so a BlockPluginSync after this returns once it is.
func (p okPlugin) Synchronize(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error) {
	close(p.synced)
	return nil, nil
}

func (okPlugin) CreateContainer(_ context.Context, _ *api.PodSandbox, _ *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	adj := &api.ContainerAdjustment{}
	adj.AddEnv("GUARD_ACTED", "1")
	return adj, nil, nil
}

// rig is a real upstream adaptation on a unix socket, with or without a policy.
type rig struct {
	sock string
	a    *adaptation.Adaptation
	p    *Policy
}

func newRig(tb testing.TB, p *Policy) *rig {
	tb.Helper()
	dir, err := os.MkdirTemp("", "nrig")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	r := &rig{sock: filepath.Join(dir, "nri.sock"), p: p}
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error { _, err := cb(ctx, nil, nil); return err }
	updFn := func(context.Context, []*adaptation.ContainerUpdate) ([]*adaptation.ContainerUpdate, error) {
		return nil, nil
	}
	opts := []adaptation.Option{adaptation.WithSocketPath(r.sock), adaptation.WithPluginPath(filepath.Join(dir, "none"))}
	if p != nil {
		opts = append(opts, p.AdaptationOptions(nil, nil, nil)...)
	}
	r.a, err = adaptation.New("nripolicy-test", "v0", syncFn, updFn, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	if p != nil {
		p.Attach(r.a)
	}
	if err := r.a.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.a.Stop)
	return r
}

// plugin starts okPlugin as idx-name and waits until upstream relays to it.
func (r *rig) plugin(tb testing.TB, name, idx string) stub.Stub {
	tb.Helper()
	synced := make(chan struct{})
	s, err := stub.New(okPlugin{synced: synced}, stub.WithSocketPath(r.sock), stub.WithPluginName(name), stub.WithPluginIdx(idx),
		stub.WithOnClose(func() {}))
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	select {
	case <-synced:
	case <-time.After(5 * time.Second):
		tb.Fatal("plugin not synchronized within 5s")
	}
	r.a.BlockPluginSync().Unblock()
	return s
}

func (r *rig) create(ctx context.Context, pod *api.PodSandbox, c *api.Container) (*api.CreateContainerResponse, error) {
	if r.p == nil {
		return r.a.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: c})
	}
	ctx, adm, err := r.p.Admit(ctx, Request{Event: EventCreateContainer, Pod: pod, Container: c})
	if err != nil {
		return nil, err
	}
	rsp, err := r.a.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: c})
	if err = adm.Done(err); err != nil {
		return nil, err
	}
	return rsp, nil
}

func acted(rsp *api.CreateContainerResponse) bool {
	for _, e := range rsp.GetAdjust().GetEnv() {
		if e.Key == "GUARD_ACTED" {
			return true
		}
	}
	return false
}

// TestWiringHappyPath runs the policy in a real adaptation with a real
// in-process plugin over a unix socket: a request waits for the plugin,
// is released when it synchronizes, the plugin acts, and after it stops
// the next request is refused and readiness drops.
func TestWiringHappyPath(t *testing.T) {
	p := mustNew(t, cfgOf("guard", func(pc *PluginConfig) { pc.RegistrationWait = Duration(5 * time.Second) }))
	r := newRig(t, p)
	pd, c := pod("default", "p1", nil), ctr("c1")

	type res struct {
		rsp *api.CreateContainerResponse
		err error
	}
	waits := waiting(p)
	done := make(chan res, 1)
	go func() { rsp, err := r.create(context.Background(), pd, c); done <- res{rsp, err} }()
	<-waits
	changed := p.Changed()
	s := r.plugin(t, "guard", "10")
	got := <-done
	if got.err != nil || !acted(got.rsp) {
		t.Fatalf("waiting create: err=%v acted=%v", got.err, acted(got.rsp))
	}
	select {
	case <-changed:
	default:
		t.Error("Changed did not close on registration")
	}
	if st, _ := findState(p, "guard"); st.State != StateReady || st.Index != "10" || len(st.Events) == 0 {
		t.Fatalf("state = %+v", st)
	}
	if cond := p.Conditions(); len(cond) != 1 || !cond[0].Status {
		t.Fatalf("conditions = %+v", cond)
	}

	changed = p.Changed()
	s.Stop()
	select {
	case <-changed:
	case <-time.After(time.Second):
		t.Fatal("no change within 1s of the plugin stopping")
	}
	deadline := time.Now().Add(time.Second)
	for {
		st, _ := findState(p, "guard")
		if st.State == StateDisconnected {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state after stop = %+v", st)
		}
		<-p.Changed()
	}
	if err := p.Reload(cfgOf("guard", nil)); err != nil {
		t.Fatal(err)
	}
	_, err := r.create(context.Background(), pd, ctr("c2"))
	if !errors.Is(err, ErrPluginNotReady) {
		t.Fatalf("create after stop = %v, want ErrPluginNotReady", err)
	}
	if cond := p.Conditions(); cond[0].Status {
		t.Fatalf("conditions after stop = %+v", cond)
	}
}

func findState(p *Policy, key string) (PluginState, bool) {
	for _, s := range p.Snapshot() {
		if s.Key == key {
			return s, true
		}
	}
	return PluginState{}, false
}
