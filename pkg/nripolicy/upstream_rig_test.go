package nripolicy_test

// Shared set-up for the upstream_*_test.go files. Those tests pin each
// behaviour of upstream NRI v0.12.5 that pkg/nripolicy relies on (DESIGN.md,
// "How the module sees plugins"), using the adaptation and real plugins
// without the policy, so that an upstream change fails a test that names the
// broken assumption rather than a fault-matrix case.

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"

	"github.com/nrigate/nrigate/pkg/nripolicy/internal/testrig"
)

const (
	upstreamRequestTimeout      = 300 * time.Millisecond
	upstreamRegistrationTimeout = 2 * time.Second
	readyTimeout                = 10 * time.Second
)

// upstreamRig is an adaptation started on a temporary socket.
type upstreamRig struct {
	t    *testing.T
	dir  string
	sock string
	a    *adaptation.Adaptation
}

// setTimeouts sets upstream's global timeouts for a test and restores them.
func setTimeouts(t *testing.T, request, registration time.Duration) {
	adaptation.SetPluginRequestTimeout(request)
	adaptation.SetPluginRegistrationTimeout(registration)
	t.Cleanup(func() {
		adaptation.SetPluginRequestTimeout(adaptation.DefaultPluginRequestTimeout)
		adaptation.SetPluginRegistrationTimeout(adaptation.DefaultPluginRegistrationTimeout)
	})
}

func newUpstreamRig(t *testing.T, syncCtx func(context.Context) context.Context, opts ...adaptation.Option) *upstreamRig {
	t.Helper()
	testrig.QuietNRILog()
	setTimeouts(t, upstreamRequestTimeout, upstreamRegistrationTimeout)
	dir, err := testrig.SocketDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) }) // registered first: runs last
	r := &upstreamRig{t: t, dir: dir, sock: filepath.Join(dir, "nri.sock")}
	r.a, err = testrig.NewAdaptation(r.sock, syncCtx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.a.Stop()
	})
	return r
}

// faulty starts nri-faulty as idx-name with extra flags and waits until it
// is ready and in the adaptation's relay list. The plugin prints "ready"
// inside its Synchronize handler, while the adaptation holds its plugin
// sync lock, so BlockPluginSync returns only once the plugin is registered
// (pinned by TestUpstreamBlockPluginSyncAfterSynchronize).
func (r *upstreamRig) faulty(name, idx string, args ...string) *testrig.Faulty {
	r.t.Helper()
	f := r.faultyNoWait(name, idx, args...)
	if _, err := f.WaitReady(readyTimeout); err != nil {
		r.t.Fatal(err)
	}
	r.a.BlockPluginSync().Unblock()
	return f
}

func (r *upstreamRig) faultyNoWait(name, idx string, args ...string) *testrig.Faulty {
	r.t.Helper()
	bin, err := testrig.FaultyBinary()
	if err != nil {
		r.t.Fatal(err)
	}
	f, err := testrig.StartFaulty(bin, r.dir, r.sock, name, idx, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(f.Kill)
	return f
}

func (r *upstreamRig) create(ctx context.Context, pod *api.PodSandbox) (*api.CreateContainerResponse, error) {
	return r.a.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: testrig.Container(pod, "ctr")})
}

// inProcStub is an in-process plugin whose Synchronize can be observed and delayed.
type inProcStub struct {
	name      string
	syncDelay time.Duration
	syncing   chan struct{} // closed when Synchronize starts
	synced    chan struct{} // closed just before Synchronize returns
	once      sync.Once
	done      sync.Once
}

func newInProcStub(name string, syncDelay time.Duration) *inProcStub {
	return &inProcStub{name: name, syncDelay: syncDelay, syncing: make(chan struct{}), synced: make(chan struct{})}
}

func (s *inProcStub) Synchronize(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error) {
	s.once.Do(func() { close(s.syncing) })
	time.Sleep(s.syncDelay)
	s.done.Do(func() { close(s.synced) })
	return nil, nil
}

func (s *inProcStub) CreateContainer(_ context.Context, _ *api.PodSandbox, _ *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	adj := &api.ContainerAdjustment{}
	adj.AddEnv(testrig.ActedEnv, s.name)
	return adj, nil, nil
}

// start runs the stub as plugin idx-name on the rig's socket.
func (r *upstreamRig) startStub(s *inProcStub, idx string) stub.Stub {
	r.t.Helper()
	st, err := stub.New(s, stub.WithPluginName(s.name), stub.WithPluginIdx(idx), stub.WithSocketPath(r.sock))
	if err != nil {
		r.t.Fatal(err)
	}
	errC := make(chan error, 1)
	go func() { errC <- st.Start(context.Background()) }()
	r.t.Cleanup(st.Stop)
	go func() {
		if err := <-errC; err != nil {
			r.t.Logf("stub %s-%s: %v", idx, s.name, err)
		}
	}()
	return st
}
