package nri

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	nrigen "github.com/containerd/nri/pkg/runtime-tools/generate"
	"github.com/containerd/nri/pkg/stub"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/oci"
	"github.com/nrigate/nrigate/pkg/config"
	"github.com/nrigate/nrigate/pkg/nripolicy"
	"github.com/nrigate/nrigate/server"
)

func testSandbox() *server.Sandbox {
	return &server.Sandbox{
		ID: "pod1", RuntimeHandler: "runc", NetNSPath: "/run/netns/x",
		Config: &runtimeapi.PodSandboxConfig{
			Metadata:    &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "prod", Uid: "u1"},
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{"a": "b"},
		},
	}
}

func testContainer() *server.Container {
	return &server.Container{
		ID: "ctr1", SandboxID: "pod1", Name: "k8s_app",
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			Labels:   map[string]string{"l": "1"},
		},
	}
}

func TestConvertPodAndContainer(t *testing.T) {
	pod := podToAPI(testSandbox())
	if pod.Namespace != "prod" || pod.Name != "web" || pod.Uid != "u1" || pod.RuntimeHandler != "runc" ||
		pod.Labels["app"] != "web" || pod.Annotations["a"] != "b" {
		t.Fatalf("pod %v", pod)
	}
	if len(pod.Linux.Namespaces) != 1 || pod.Linux.Namespaces[0].Type != "network" || pod.Linux.Namespaces[0].Path != "/run/netns/x" {
		t.Fatalf("pod namespaces %v", pod.Linux.Namespaces)
	}
	g := oci.NewGenerator()
	g.Config.Process.Args = []string{"sleep", "1"}
	g.Config.Annotations = map[string]string{"io.kubernetes.x": "y"}
	ctr := containerToAPI(testContainer(), g.Config, api.ContainerState_CONTAINER_CREATED)
	if ctr.Name != "app" || ctr.PodSandboxId != "pod1" || ctr.State != api.ContainerState_CONTAINER_CREATED ||
		!slices.Equal(ctr.Args, []string{"sleep", "1"}) || ctr.Annotations["io.kubernetes.x"] != "y" || len(ctr.Mounts) == 0 {
		t.Fatalf("container %v", ctr)
	}
	if len(ctr.Linux.GetNamespaces()) == 0 {
		t.Fatal("container namespaces missing")
	}
}

func TestAdjustmentAppliesToSpec(t *testing.T) {
	g := oci.NewGenerator()
	adj := &api.ContainerAdjustment{}
	adj.AddEnv("NRI_X", "1")
	adj.AddAnnotation("nri.example/acted", "yes")
	adj.AddMount(&api.Mount{Destination: "/data", Source: "/tmp", Type: "bind", Options: []string{"rbind"}})
	adj.RemoveMount("/dev/mqueue")
	adj.SetLinuxCPUShares(512)
	adj.SetLinuxMemoryLimit(1 << 20)
	if err := nrigen.SpecGenerator(g).Adjust(adj); err != nil {
		t.Fatal(err)
	}
	s := g.Config
	if !slices.Contains(s.Process.Env, "NRI_X=1") {
		t.Errorf("env %v", s.Process.Env)
	}
	if s.Annotations["nri.example/acted"] != "yes" {
		t.Errorf("annotations %v", s.Annotations)
	}
	var dests []string
	for _, m := range s.Mounts {
		dests = append(dests, m.Destination)
	}
	if !slices.Contains(dests, "/data") || slices.Contains(dests, "/dev/mqueue") {
		t.Errorf("mounts %v", dests)
	}
	if r := s.Linux.Resources; r.CPU == nil || *r.CPU.Shares != 512 || *r.Memory.Limit != 1<<20 {
		t.Errorf("resources %+v", r)
	}
}

func TestResourcesRoundTrip(t *testing.T) {
	in := &runtimeapi.LinuxContainerResources{CpuShares: 256, CpuQuota: 5000, CpuPeriod: 10000,
		MemoryLimitInBytes: 1 << 24, CpusetCpus: "0", HugepageLimits: []*runtimeapi.HugepageLimit{{PageSize: "2MB", Limit: 4}}}
	out := &runtimeapi.LinuxContainerResources{}
	mergeResources(out, resourcesToAPI(in))
	if out.CpuShares != 256 || out.CpuQuota != 5000 || out.CpuPeriod != 10000 || out.MemoryLimitInBytes != 1<<24 ||
		out.CpusetCpus != "0" || len(out.HugepageLimits) != 1 || out.HugepageLimits[0].Limit != 4 {
		t.Fatalf("round trip %v", out)
	}
	// Only what the plugins set replaces the request.
	req := &runtimeapi.LinuxContainerResources{CpuShares: 2, MemoryLimitInBytes: 3}
	mergeResources(req, &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(uint64(9))}})
	if req.CpuShares != 9 || req.MemoryLimitInBytes != 3 {
		t.Fatalf("merge %v", req)
	}
}

func TestRefusalCodes(t *testing.T) {
	ref := &nripolicy.RefusalError{Plugin: "guard", Event: nripolicy.EventCreateContainer, Namespace: "prod", Pod: "web",
		Container: "app", Reason: "is not registered", Err: nripolicy.ErrPluginNotReady}
	st, _ := status.FromError(refusal(ref))
	if st.Code() != codes.FailedPrecondition || st.Message() != ref.Error() {
		t.Fatalf("refusal %v", st)
	}
	st, _ = status.FromError(refusal(errors.New("plugin said no")))
	if st.Code() != codes.Unknown || st.Message() != "nri: plugin said no" {
		t.Fatalf("plugin error %v", st)
	}
	in := status.Error(codes.Unavailable, "x")
	if refusal(in) != in {
		t.Fatal("status errors must pass through")
	}
}

func TestDisabledIsNoop(t *testing.T) {
	n, err := New(&config.NRIConfig{Enabled: false})
	if err != nil {
		t.Fatal(err)
	}
	if n.Enabled() || n.Conditions() != nil {
		t.Fatal("disabled NRI must add no condition")
	}
	g := oci.NewGenerator()
	if finish, err := n.CreateContainer(context.Background(), testSandbox(), testContainer(), g); err != nil || finish != nil {
		t.Fatalf("disabled NRI: finish %v, err %v; want none", finish != nil, err)
	}
	if n.VerboseInfo()[VerboseInfoKey] != `{"enabled":false,"plugins":[]}` {
		t.Fatalf("info %v", n.VerboseInfo())
	}
	if err := n.Reload(nripolicy.DefaultConfig()); !errors.Is(err, ErrDisabled) {
		t.Fatalf("reload %v", err)
	}
}

type fakeRuntime struct{}

func (fakeRuntime) Sandboxes() []*server.Sandbox    { return []*server.Sandbox{testSandbox()} }
func (fakeRuntime) Containers() []*server.Container { return nil }
func (fakeRuntime) ContainerState(context.Context, string) (runtimeapi.ContainerState, int32, error) {
	return runtimeapi.ContainerState_CONTAINER_RUNNING, 0, nil
}

type envPlugin struct{ synced chan int }

func (p *envPlugin) Synchronize(_ context.Context, pods []*api.PodSandbox, _ []*api.Container) ([]*api.ContainerUpdate, error) {
	p.synced <- len(pods)
	return nil, nil
}

func (p *envPlugin) CreateContainer(_ context.Context, _ *api.PodSandbox, _ *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	adj := &api.ContainerAdjustment{}
	adj.AddEnv("GUARD_ACTED", "1")
	return adj, nil, nil
}

// TestGatedCreateWithRealAdaptation runs the real adaptation and a stub
// plugin: the policy refuses while the plugin is absent, then the plugin's
// adjustment reaches the spec and the status shows it ready.
func TestGatedCreateWithRealAdaptation(t *testing.T) {
	pol := nripolicy.DefaultConfig()
	pc := nripolicy.DefaultPluginConfig()
	pol.Plugins = map[string]*nripolicy.PluginConfig{"guard": pc}
	n, sock := startNRI(t, fakeRuntime{}, pol)

	ctx := context.Background()
	_, err := n.CreateContainer(ctx, testSandbox(), testContainer(), oci.NewGenerator())
	if st, _ := status.FromError(err); st.Code() != codes.FailedPrecondition {
		t.Fatalf("absent plugin: want FailedPrecondition, got %v", err)
	}
	if c := n.Conditions(); len(c) == 0 || c[0].Type != nripolicy.ConditionNRIPluginsReady || c[0].Status {
		t.Fatalf("conditions %v", c)
	}

	p := &envPlugin{synced: make(chan int, 1)}
	s, err := stub.New(p, stub.WithPluginName("guard"), stub.WithPluginIdx("10"), stub.WithSocketPath(sock))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	select {
	case pods := <-p.synced:
		if pods != 1 {
			t.Fatalf("synchronized %d pods, want 1", pods)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("plugin not synchronized")
	}
	deadline := time.Now().Add(2 * time.Second)
	for !n.Conditions()[0].Status {
		if time.Now().After(deadline) {
			t.Fatalf("NRIPluginsReady stayed false: %v", n.Conditions())
		}
		time.Sleep(10 * time.Millisecond)
	}
	g := oci.NewGenerator()
	finish, err := n.CreateContainer(ctx, testSandbox(), testContainer(), g)
	if err != nil {
		t.Fatal(err)
	}
	finish(nil)
	if !slices.Contains(g.Config.Process.Env, "GUARD_ACTED=1") {
		t.Fatalf("adjustment not applied: %v", g.Config.Process.Env)
	}
}

type updatingRuntime struct {
	fakeRuntime
	mu      sync.Mutex
	applied map[string]*runtimeapi.LinuxContainerResources
}

func (r *updatingRuntime) UpdateResources(_ context.Context, id string, res *runtimeapi.LinuxContainerResources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id != "ctr1" {
		return errors.New("no such container")
	}
	r.applied[id] = res
	return nil
}

// TestUnsolicitedUpdates checks that a plugin's UpdateContainers reaches
// the runtime's update path and that failures come back to the plugin.
func TestUnsolicitedUpdates(t *testing.T) {
	rt := &updatingRuntime{applied: map[string]*runtimeapi.LinuxContainerResources{}}
	_, sock := startNRI(t, rt, nripolicy.DefaultConfig())
	p := &envPlugin{synced: make(chan int, 1)}
	s, err := stub.New(p, stub.WithPluginName("upd"), stub.WithPluginIdx("20"), stub.WithSocketPath(sock))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	upd := func(id string) *api.ContainerUpdate {
		u := &api.ContainerUpdate{ContainerId: id}
		u.SetLinuxCPUShares(123)
		return u
	}
	select {
	case <-p.synced:
	case <-time.After(5 * time.Second):
		t.Fatal("plugin not synchronized")
	}
	failed, err := s.UpdateContainers([]*api.ContainerUpdate{upd("ctr1"), upd("gone")})
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed[0].ContainerId != "gone" {
		t.Fatalf("failed updates %v", failed)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if r := rt.applied["ctr1"]; r == nil || r.CpuShares != 123 {
		t.Fatalf("applied %v", rt.applied)
	}
}

// The spec the runtime generates and the plugins adjust is edited by one
// implementation: oci.Generator is runtime-tools' generator, which NRI's
// adjustment code takes as it is (before, internal/nri had a generator of
// its own whose AddMount appended while internal/oci's replaced).
var _ nrigen.UnderlyingGenerator = oci.NewGenerator()

// TestOneGeneratorMountSemantics: a CRI mount and a plugin's mount on a
// default destination both replace it, through the same generator.
func TestOneGeneratorMountSemantics(t *testing.T) {
	in := oci.SpecInput{
		ID: "ctr1", SandboxID: "pod1", RootFS: "/rootfs",
		Container: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Command: []string{"sh"},
			Mounts: []*runtimeapi.Mount{{ContainerPath: "/dev/shm", HostPath: os.TempDir()}}},
		Sandbox: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "prod", Uid: "u1"}},
	}
	g, err := oci.GenerateSpec(in)
	if err != nil {
		t.Fatal(err)
	}
	count := func(dest string) (n int, src string) {
		for _, m := range g.Config.Mounts {
			if m.Destination == dest {
				n, src = n+1, m.Source
			}
		}
		return n, src
	}
	if n, src := count("/dev/shm"); n != 1 || src != os.TempDir() {
		t.Fatalf("CRI mount on /dev/shm: %d mounts, source %q; want 1 from %s", n, src, os.TempDir())
	}
	adj := &api.ContainerAdjustment{}
	adj.AddMount(&api.Mount{Destination: "/dev/mqueue", Source: "/tmp", Type: "bind", Options: []string{"rbind"}})
	adj.AddEnv("PATH", "/nri/bin")
	if err := nrigen.SpecGenerator(g).Adjust(adj); err != nil {
		t.Fatal(err)
	}
	if n, src := count("/dev/mqueue"); n != 1 || src != "/tmp" {
		t.Fatalf("NRI mount on /dev/mqueue: %d mounts, source %q; want 1 from /tmp", n, src)
	}
	var paths []string
	for _, e := range g.Config.Process.Env {
		if strings.HasPrefix(e, "PATH=") {
			paths = append(paths, e)
		}
	}
	if len(paths) != 1 || paths[0] != "PATH=/nri/bin" {
		t.Fatalf("PATH after the adjustment: %v, want only the plugin's", paths)
	}
}
