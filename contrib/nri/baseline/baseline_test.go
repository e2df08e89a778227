// Package baseline measures what released NRI v0.12.5 does, without the
// plugin policy series, when a plugin that its default validator requires
// (required_plugins = ["guard"]) is absent, crashes, hangs or is not
// subscribed: the "v0.12.5" column of the fault table in
// contrib/nri/README.md. It builds against the pristine module from the
// Go module proxy (no replace), with real pkg/stub plugins over a real
// socket. Each test fails if v0.12.5 behaves otherwise than the table
// says, so that the table cannot silently go stale.
package baseline

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	nri "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/log"
	"github.com/containerd/nri/pkg/stub"
	validator "github.com/containerd/nri/plugins/default-validator/builtin"
)

const requestTimeout = 200 * time.Millisecond

type quiet struct{}

func (quiet) Debugf(context.Context, string, ...any) {}
func (quiet) Infof(context.Context, string, ...any)  {}
func (quiet) Warnf(context.Context, string, ...any)  {}
func (quiet) Errorf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	log.Set(quiet{})
	nri.SetPluginRequestTimeout(requestTimeout)
	os.Exit(m.Run())
}

// runtime is a v0.12.5 adaptation whose default validator requires guard.
type runtime struct {
	t    *testing.T
	sock string
	a    *nri.Adaptation
}

func newRuntime(t *testing.T, validate bool) *runtime {
	t.Helper()
	dir, err := os.MkdirTemp("", "nri-base-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	opts := []nri.Option{
		nri.WithPluginPath(filepath.Join(dir, "plugins")),
		nri.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
		nri.WithSocketPath(filepath.Join(dir, "nri.sock")),
	}
	if validate {
		opts = append(opts, nri.WithDefaultValidator(&validator.DefaultValidatorConfig{
			Enable: true, RequiredPlugins: []string{"guard"},
		}))
	}
	a, err := nri.New("baseline", "0.12.5",
		func(ctx context.Context, cb nri.SyncCB) error { _, err := cb(ctx, nil, nil); return err },
		func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil },
		opts...)
	require.NoError(t, err)
	require.NoError(t, a.Start())
	t.Cleanup(a.Stop)
	return &runtime{t: t, sock: filepath.Join(dir, "nri.sock"), a: a}
}

// guard is the required plugin. It marks every container it acts on with
// an environment variable; its handler can crash, hang or fail.
type guard struct {
	stub     stub.Stub
	mask     stub.EventMask
	onCreate func(g *guard) error
	synced   chan struct{}
	once     sync.Once
}

func (g *guard) Configure(context.Context, string, string, string) (stub.EventMask, error) {
	return g.mask, nil
}

func (g *guard) Synchronize(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error) {
	g.once.Do(func() { close(g.synced) })
	return nil, nil
}

func (g *guard) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	if g.onCreate != nil {
		if err := g.onCreate(g); err != nil {
			return nil, nil, err
		}
	}
	adjust := &api.ContainerAdjustment{}
	adjust.AddEnv("GUARD_ACTED", "1")
	return adjust, nil, nil
}

func (g *guard) RunPodSandbox(context.Context, *api.PodSandbox) error { return nil }

// startGuard starts guard as idx-guard, subscribed to events, and waits
// until the runtime relays requests to it.
func (r *runtime) startGuard(idx, events string, onCreate func(*guard) error, opts ...stub.Option) *guard {
	r.t.Helper()
	mask, err := api.ParseEventMask(events)
	require.NoError(r.t, err)
	g := &guard{onCreate: onCreate, mask: mask, synced: make(chan struct{})}
	g.stub, err = stub.New(g, append(opts, stub.WithPluginName("guard"), stub.WithPluginIdx(idx),
		stub.WithSocketPath(r.sock), stub.WithOnClose(func() {}))...)
	require.NoError(r.t, err)
	require.NoError(r.t, g.stub.Start(context.Background()))
	r.t.Cleanup(g.stub.Stop)
	select {
	case <-g.synced:
	case <-time.After(5 * time.Second):
		r.t.Fatal("guard did not synchronize")
	}
	r.a.BlockPluginSync().Unblock() // the plugin is in the relay list once the sync lock is free
	return g
}

// create relays a CreateContainer as a runtime does and reports whether
// it was created and whether guard acted on it.
func (r *runtime) create() (created, acted bool) {
	pod := &api.PodSandbox{Id: "pod", Name: "web", Uid: "uid", Namespace: "default"}
	ctr := &api.Container{Id: "ctr", PodSandboxId: "pod", Name: "app"}
	blk := r.a.BlockPluginSync()
	defer blk.Unblock()
	rpl, err := r.a.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod, Container: ctr})
	if err != nil {
		return false, false
	}
	for _, e := range rpl.GetAdjust().GetEnv() {
		if e.Key == "GUARD_ACTED" {
			return true, true
		}
	}
	return true, false
}

func TestAbsentIsRefused(t *testing.T) {
	created, _ := newRuntime(t, true).create()
	require.False(t, created)
}

func TestCrashDuringCreateEscapes(t *testing.T) {
	r := newRuntime(t, true)
	r.startGuard("10", "CreateContainer", func(g *guard) error { g.stub.Stop(); return nil })
	created, acted := r.create()
	require.True(t, created && !acted, "v0.12.5 now refuses a container its required plugin crashed on")
}

func TestHangEscapes(t *testing.T) {
	r := newRuntime(t, true)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	r.startGuard("10", "CreateContainer", func(*guard) error { <-release; return nil })
	created, acted := r.create()
	require.True(t, created && !acted, "v0.12.5 now refuses a container its required plugin hung on")
}

func TestUnsubscribedSatisfiesTheCheck(t *testing.T) {
	r := newRuntime(t, true)
	r.startGuard("10", "RunPodSandbox", nil)
	created, acted := r.create()
	require.True(t, created && !acted, "v0.12.5 now refuses a container its required plugin is not subscribed to")
}

func TestOneOfTwoInstancesHungEscapes(t *testing.T) {
	r := newRuntime(t, true)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	r.startGuard("10", "CreateContainer", func(*guard) error { <-release; return nil })
	r.startGuard("20", "CreateContainer", nil)
	created, acted := r.create()
	// Created with 20-guard's adjustment only: 10-guard never acted on it.
	require.True(t, created && acted, "v0.12.5 now refuses a container one of two instances hung on")
}

func TestRunPodSandboxNeverChecked(t *testing.T) {
	r := newRuntime(t, true)
	pod := &api.PodSandbox{Id: "pod", Name: "web", Uid: "uid", Namespace: "default"}
	require.NoError(t, r.a.RunPodSandbox(context.Background(), &api.RunPodSandboxRequest{Pod: pod}))
}

func TestPluginDeclaredFailRequestRefusesItsCrash(t *testing.T) {
	r := newRuntime(t, false)
	r.startGuard("10", "CreateContainer", func(g *guard) error { g.stub.Stop(); return nil },
		stub.WithFailurePolicy(&api.FailurePolicy{FailRequest: true}))
	created, _ := r.create()
	require.False(t, created)
}

// TestCrashJustBeforeEscapes stops guard at a jittered moment around the
// request: the containers created without it are the escapes. It fails if
// none of the rounds escapes.
func TestCrashJustBeforeEscapes(t *testing.T) {
	const rounds = 20
	escaped, refused, acted := 0, 0, 0
	for i := 0; i < rounds; i++ {
		r := newRuntime(t, true)
		g := r.startGuard("10", "CreateContainer", nil)
		stopped := make(chan struct{})
		go func() {
			time.Sleep(time.Duration(i%5) * 200 * time.Microsecond)
			g.stub.Stop()
			close(stopped)
		}()
		created, ok := r.create()
		<-stopped
		switch {
		case !created:
			refused++
		case ok:
			acted++
		default:
			escaped++
		}
	}
	t.Logf("crash just before CreateContainer, %d rounds: %d escaped, %d refused, %d acted", rounds, escaped, refused, acted)
	require.NotZero(t, escaped, "no round escaped: v0.12.5 now refuses a plugin that crashed just before the request")
}
