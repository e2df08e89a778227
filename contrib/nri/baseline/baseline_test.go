// Package baseline measures what released NRI v0.12.5 does, without the
// required plugins series, when a plugin that its default validator
// requires (required_plugins = ["guard"]) is absent, crashes, hangs or is
// not subscribed: the "v0.12.5" column of the table in
// contrib/nri/README.md. It builds against the pristine module from the Go
// module proxy (no replace), with real pkg/stub plugins over a real socket.
// Each test fails if v0.12.5 behaves otherwise than the table says, so
// that the table cannot silently go stale.
package baseline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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

// requires is the default validator requiring plugins, as a runtime
// configures it (required_plugins).
func requires(plugins ...string) *validator.DefaultValidatorConfig {
	return &validator.DefaultValidatorConfig{Enable: true, RequiredPlugins: plugins}
}

// runtime is a v0.12.5 adaptation, with the default validator cfg if it
// is not nil.
type runtime struct {
	t    *testing.T
	sock string
	a    *nri.Adaptation
}

func newRuntime(t *testing.T, cfg *validator.DefaultValidatorConfig) *runtime {
	t.Helper()
	dir, err := os.MkdirTemp("", "nri-base-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	opts := []nri.Option{
		nri.WithPluginPath(filepath.Join(dir, "plugins")),
		nri.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
		nri.WithSocketPath(filepath.Join(dir, "nri.sock")),
	}
	if cfg != nil {
		opts = append(opts, nri.WithDefaultValidator(cfg))
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

// plugin is a test plugin. It marks every container it acts on with the
// environment variable ACTED_<its name>, and counts the pods it set up and
// the containers it validated; each handler can crash, hang or fail.
type plugin struct {
	name       string
	stub       stub.Stub
	mask       stub.EventMask
	onRunPod   func(p *plugin) error
	onCreate   func(p *plugin) error
	onUpdate   func(p *plugin) error
	onValidate func(p *plugin) error
	synced     chan struct{}
	once       sync.Once
	// podsSetUp counts the RunPodSandbox requests the plugin completed,
	// validated the containers it validated, updated the updates it acted
	// on, while it ran: a plugin that crashed completes nothing.
	podsSetUp, validated, updated atomic.Int32
	crashed                       atomic.Bool
}

func (p *plugin) Configure(context.Context, string, string, string) (stub.EventMask, error) {
	return p.mask, nil
}

func (p *plugin) Synchronize(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error) {
	p.once.Do(func() { close(p.synced) })
	return nil, nil
}

// run runs a handler's fault, if any. It returns whether the request
// completes.
func run(handler func(*plugin) error, p *plugin) (bool, error) {
	if handler != nil {
		if err := handler(p); err != nil {
			return false, err
		}
	}
	return !p.crashed.Load(), nil
}

func (p *plugin) RunPodSandbox(context.Context, *api.PodSandbox) error {
	done, err := run(p.onRunPod, p)
	if done {
		p.podsSetUp.Add(1)
	}
	return err
}

func (p *plugin) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	if _, err := run(p.onCreate, p); err != nil {
		return nil, nil, err
	}
	adjust := &api.ContainerAdjustment{}
	adjust.AddEnv("ACTED_"+p.name, "1")
	return adjust, nil, nil
}

func (p *plugin) UpdateContainer(context.Context, *api.PodSandbox, *api.Container, *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	done, err := run(p.onUpdate, p)
	if done {
		p.updated.Add(1)
	}
	return nil, err
}

func (p *plugin) ValidateContainerAdjustment(context.Context, *api.ValidateContainerAdjustmentRequest) error {
	done, err := run(p.onValidate, p)
	if done {
		p.validated.Add(1)
	}
	return err
}

// start starts p as idx-name, subscribed to events, and waits until the
// runtime relays requests to it.
func (r *runtime) start(idx, name, events string, p *plugin, opts ...stub.Option) *plugin {
	r.t.Helper()
	mask, err := api.ParseEventMask(events)
	require.NoError(r.t, err)
	p.name, p.mask, p.synced = name, mask, make(chan struct{})
	p.stub, err = stub.New(p, append(opts, stub.WithPluginName(name), stub.WithPluginIdx(idx),
		stub.WithSocketPath(r.sock), stub.WithOnClose(func() {}))...)
	require.NoError(r.t, err)
	require.NoError(r.t, p.stub.Start(context.Background()))
	r.t.Cleanup(p.stub.Stop)
	select {
	case <-p.synced:
	case <-time.After(5 * time.Second):
		r.t.Fatalf("%s-%s did not synchronize", idx, name)
	}
	r.a.BlockPluginSync().Unblock() // the plugin is in the relay list once the sync lock is free
	return p
}

// startGuard starts guard as idx-guard.
func (r *runtime) startGuard(idx, events string, onCreate func(*plugin) error, opts ...stub.Option) *plugin {
	r.t.Helper()
	return r.start(idx, "guard", events, &plugin{onCreate: onCreate}, opts...)
}

func podIn(namespace string, annotations map[string]string) *api.PodSandbox {
	return &api.PodSandbox{Id: "pod", Name: "web", Uid: "uid", Namespace: namespace, Annotations: annotations}
}

// createIn relays a CreateContainer in pod as a runtime does and reports
// whether it was created and which plugins acted on it.
func (r *runtime) createIn(pod *api.PodSandbox) (created bool, actedBy map[string]bool) {
	ctr := &api.Container{Id: "ctr", PodSandboxId: pod.Id, Name: "app"}
	blk := r.a.BlockPluginSync()
	defer blk.Unblock()
	rpl, err := r.a.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod, Container: ctr})
	if err != nil {
		return false, nil
	}
	actedBy = map[string]bool{}
	for _, e := range rpl.GetAdjust().GetEnv() {
		if name, ok := strings.CutPrefix(e.Key, "ACTED_"); ok {
			actedBy[name] = true
		}
	}
	return true, actedBy
}

// create relays a CreateContainer in a pod of the default namespace and
// reports whether it was created and whether guard acted on it.
func (r *runtime) create() (created, acted bool) {
	created, actedBy := r.createIn(podIn("default", nil))
	return created, actedBy["guard"]
}

func hang(release chan struct{}) func(*plugin) error {
	return func(*plugin) error { <-release; return nil }
}

// crash stops the plugin in the middle of a request: its connection
// closes before it answers.
func crash(p *plugin) error {
	p.crashed.Store(true)
	p.stub.Stop()
	return nil
}

// Row "not running": refused at CreateContainer only.

func TestAbsentIsRefused(t *testing.T) {
	created, _ := newRuntime(t, requires("guard")).create()
	require.False(t, created)
}

func TestRunPodSandboxNeverChecked(t *testing.T) {
	r := newRuntime(t, requires("guard"))
	require.NoError(t, r.a.RunPodSandbox(context.Background(), &api.RunPodSandboxRequest{Pod: podIn("default", nil)}))
}

// Row "crashes or hangs in RunPodSandbox (#316)": containerd/nri#316,
// kubernetes-sigs/dranet#310. dranet, required by the default validator,
// hangs in RunPodSandbox past the request timeout: v0.12.5 drops it and
// the pod is created without its network. Its containers are refused
// until dranet is back; then they are created, in a pod dranet never set
// up.
func TestRunPodSandboxHangDropsRequiredPlugin(t *testing.T) {
	r := newRuntime(t, requires("dranet"))
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hung := r.start("10", "dranet", "RunPodSandbox,CreateContainer", &plugin{onRunPod: hang(release)})

	pod := podIn("default", nil)
	require.NoError(t, r.a.RunPodSandbox(context.Background(), &api.RunPodSandboxRequest{Pod: pod}),
		"v0.12.5 now fails a RunPodSandbox that a required plugin did not answer")
	require.Zero(t, hung.podsSetUp.Load(), "dranet set up the pod")

	created, _ := r.createIn(pod)
	require.False(t, created, "dropped, dranet is not present for the default validator")

	restarted := r.start("10", "dranet", "RunPodSandbox,CreateContainer", &plugin{})
	created, actedBy := r.createIn(pod)
	require.True(t, created && actedBy["dranet"], "the restarted dranet does not let the pod's container through")
	require.Zero(t, hung.podsSetUp.Load()+restarted.podsSetUp.Load(), "no dranet instance ever set up the pod")
}

// Row "crashes or hangs in CreateContainer": created without it.

func TestCrashDuringCreateEscapes(t *testing.T) {
	r := newRuntime(t, requires("guard"))
	r.startGuard("10", "CreateContainer", crash)
	created, acted := r.create()
	require.True(t, created && !acted, "v0.12.5 now refuses a container its required plugin crashed on")
}

func TestHangEscapes(t *testing.T) {
	r := newRuntime(t, requires("guard"))
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	r.startGuard("10", "CreateContainer", hang(release))
	created, acted := r.create()
	require.True(t, created && !acted, "v0.12.5 now refuses a container its required plugin hung on")
}

// Row "registered, not subscribed to the request": "present".

func TestUnsubscribedSatisfiesTheCheck(t *testing.T) {
	r := newRuntime(t, requires("guard"))
	r.startGuard("10", "RunPodSandbox", nil)
	created, acted := r.create()
	require.True(t, created && !acted, "v0.12.5 now refuses a container its required plugin is not subscribed to")
}

// Row "two instances, one hung": created with the other only.

func TestOneOfTwoInstancesHungEscapes(t *testing.T) {
	r := newRuntime(t, requires("guard"))
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	r.startGuard("10", "CreateContainer", hang(release))
	r.startGuard("20", "CreateContainer", nil)
	created, acted := r.create()
	// Created with 20-guard's adjustment only: 10-guard never acted on it.
	require.True(t, created && acted, "v0.12.5 now refuses a container one of two instances hung on")
}

// Row "a required validator (image policy) absent, crashed, unsubscribed"
// (confidential-dot-ai/c8s#683): image-policy validates every container
// (ValidateContainerAdjustment) and the default validator requires it.
func TestRequiredValidator(t *testing.T) {
	const events = "CreateContainer,ValidateContainerAdjustment"
	for _, tc := range []struct {
		name string
		// start starts image-policy, or not (nil).
		start func(r *runtime, release chan struct{}) *plugin
		// created is what v0.12.5 does; a created container is never
		// validated by image-policy.
		created bool
	}{
		{
			name:  "absent: refused",
			start: func(*runtime, chan struct{}) *plugin { return nil },
		},
		{
			// A validator only: whether or not NRI has noticed that it
			// is gone, the default validator finds it missing or its
			// validation fails. (One also subscribed to CreateContainer
			// that exits just before the request escapes while NRI has
			// not noticed: TestCrashJustBeforeEscapes.)
			name: "exited before the request: refused",
			start: func(r *runtime, _ chan struct{}) *plugin {
				p := r.start("10", "image-policy", "ValidateContainerAdjustment", &plugin{})
				p.stub.Stop()
				return p
			},
		},
		{
			name: "crashes in CreateContainer: created without validation",
			start: func(r *runtime, _ chan struct{}) *plugin {
				return r.start("10", "image-policy", events, &plugin{onCreate: crash})
			},
			created: true,
		},
		{
			name: "hangs in CreateContainer past the timeout (c8s#683): created without validation",
			start: func(r *runtime, release chan struct{}) *plugin {
				return r.start("10", "image-policy", events, &plugin{onCreate: hang(release)})
			},
			created: true,
		},
		{
			name: "crashes in ValidateContainerAdjustment: refused",
			start: func(r *runtime, _ chan struct{}) *plugin {
				return r.start("10", "image-policy", events, &plugin{onValidate: crash})
			},
		},
		{
			name: "hangs in ValidateContainerAdjustment: refused",
			start: func(r *runtime, release chan struct{}) *plugin {
				return r.start("10", "image-policy", events, &plugin{onValidate: hang(release)})
			},
		},
		{
			name: "not subscribed to ValidateContainerAdjustment: created without validation",
			start: func(r *runtime, _ chan struct{}) *plugin {
				return r.start("10", "image-policy", "CreateContainer", &plugin{})
			},
			created: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRuntime(t, requires("image-policy"))
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			p := tc.start(r, release)
			created, _ := r.createIn(podIn("default", nil))
			require.Equal(t, tc.created, created, "v0.12.5 changed")
			if p != nil {
				require.Zero(t, p.validated.Load(), "image-policy validated a container")
			}
		})
	}

	// A validator that nothing requires: absent, containers are created
	// without validation.
	t.Run("not required, absent: created without validation", func(t *testing.T) {
		r := newRuntime(t, requires())
		created, _ := r.createIn(podIn("default", nil))
		require.True(t, created, "v0.12.5 changed")
	})
}

// After the validator crashed in CreateContainer, the next container:
// image-policy is gone, and the default validator refuses it.
func TestRequiredValidatorGoneAfterItsCrash(t *testing.T) {
	r := newRuntime(t, requires("image-policy"))
	p := r.start("10", "image-policy", "CreateContainer,ValidateContainerAdjustment", &plugin{onCreate: crash})
	created, _ := r.createIn(podIn("default", nil))
	require.True(t, created, "the first container, which image-policy crashed on")
	require.Zero(t, p.validated.Load(), "image-policy validated it")
	created, _ = r.createIn(podIn("default", nil))
	require.False(t, created, "the next container")
}

// Row "UpdateContainer": never checked, neither absent nor crashed.
func TestUpdateContainerNeverChecked(t *testing.T) {
	update := func(r *runtime) error {
		pod := podIn("default", nil)
		_, err := r.a.UpdateContainer(context.Background(), &api.UpdateContainerRequest{Pod: pod,
			Container: &api.Container{Id: "ctr", PodSandboxId: pod.Id, Name: "app"}, LinuxResources: &api.LinuxResources{}})
		return err
	}
	r := newRuntime(t, requires("guard"))
	require.NoError(t, update(r), "absent")
	g := r.start("10", "guard", "UpdateContainer", &plugin{onUpdate: crash})
	require.NoError(t, update(r), "crashed during UpdateContainer")
	require.Zero(t, g.updated.Load())
}

// Row "the plugin's own DaemonSet pod, static pods": refused unless the
// pod carries the tolerate annotation, which any pod author can set.
func TestTolerateAnnotationIsThePodAuthors(t *testing.T) {
	const tolerate = "example.com/tolerate-missing-plugins"
	r := newRuntime(t, &validator.DefaultValidatorConfig{Enable: true, RequiredPlugins: []string{"guard"},
		TolerateMissingAnnotation: tolerate})
	for _, tc := range []struct {
		name    string
		pod     *api.PodSandbox
		created bool
	}{
		{"static pod", podIn("kube-system", map[string]string{"kubernetes.io/config.source": "file"}), false},
		{"the plugin's DaemonSet pod", podIn("nri-plugins", nil), false},
		{"any pod with the annotation", podIn("default", map[string]string{tolerate: "true"}), true},
	} {
		created, _ := r.createIn(tc.pod)
		require.Equal(t, tc.created, created, "%s: v0.12.5 changed", tc.name)
	}
}

// Row "the plugin's fail_request": applies.
func TestPluginDeclaredFailRequestRefusesItsCrash(t *testing.T) {
	r := newRuntime(t, nil)
	r.startGuard("10", "CreateContainer", crash, stub.WithFailurePolicy(&api.FailurePolicy{FailRequest: true}))
	created, _ := r.create()
	require.False(t, created)
}

// Row "restarting in a loop under concurrent requests": TestCrashJustBeforeEscapes
// stops guard at a jittered moment around the request: the containers
// created without it are the escapes. It fails if none of the rounds
// escapes.
func TestCrashJustBeforeEscapes(t *testing.T) {
	const rounds = 20
	escaped, refused, acted := 0, 0, 0
	for i := 0; i < rounds; i++ {
		r := newRuntime(t, requires("guard"))
		g := r.startGuard("10", "CreateContainer", nil)
		stopped := make(chan struct{})
		go func() {
			// Jitter, not synchronization: the crash is to land at a
			// different moment of each request.
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
