package nri

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/oci"
	"github.com/nrigate/nrigate/internal/testenv"
	"github.com/nrigate/nrigate/pkg/config"
	"github.com/nrigate/nrigate/pkg/nripolicy"
	"github.com/nrigate/nrigate/server"
)

// publishingRuntime is a runtime whose containers the test publishes.
type publishingRuntime struct {
	mu   sync.Mutex
	ctrs []*server.Container
}

func (r *publishingRuntime) Sandboxes() []*server.Sandbox { return []*server.Sandbox{testSandbox()} }
func (r *publishingRuntime) Containers() []*server.Container {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*server.Container(nil), r.ctrs...)
}
func (r *publishingRuntime) ContainerState(context.Context, string) (runtimeapi.ContainerState, int32, error) {
	return runtimeapi.ContainerState_CONTAINER_CREATED, 0, nil
}
func (r *publishingRuntime) publish(c *server.Container) {
	r.mu.Lock()
	r.ctrs = append(r.ctrs, c)
	r.mu.Unlock()
}

// newTestNRI creates an NRI integration with pol and opts, not started, on
// a socket in a fresh directory (not t.TempDir: unix socket paths are
// short) removed when the test ends. It returns it with the socket path.
func newTestNRI(t *testing.T, pol *nripolicy.Config, opts ...Option) (*NRI, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "nrig")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "nri.sock")
	n, err := New(&config.NRIConfig{
		Enabled: true, SocketPath: sock, PluginPath: filepath.Join(dir, "p"), PluginConfigPath: filepath.Join(dir, "c"),
		PluginRegistrationTimeout: config.Duration(5 * time.Second), PluginRequestTimeout: config.Duration(2 * time.Second),
		Policy: *pol,
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return n, sock
}

// startNRI starts newTestNRI's integration with rt; it is stopped when the
// test ends.
func startNRI(t *testing.T, rt Runtime, pol *nripolicy.Config, opts ...Option) (*NRI, string) {
	t.Helper()
	n, sock := newTestNRI(t, pol, opts...)
	if err := n.Start(rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n, sock
}

type syncRecorder struct {
	synced chan []string
}

func (p *syncRecorder) Synchronize(_ context.Context, _ []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	var ids []string
	for _, c := range ctrs {
		ids = append(ids, c.GetId())
	}
	p.synced <- ids
	return nil, nil
}

func (p *syncRecorder) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	return nil, nil, nil
}

// TestPluginRegisteringDuringCreateIsSynchronizedWithIt registers a plugin
// while a create is between its relay and the container's publication (a
// slow runtime create): the plugin's synchronization waits for the
// publication and sees the container. Without BlockPluginSync held from
// the relay to the publication the plugin is synchronized at once, without
// the container, and is never told of it.
func TestPluginRegisteringDuringCreateIsSynchronizedWithIt(t *testing.T) {
	rt := &publishingRuntime{}
	n, sock := startNRI(t, rt, nripolicy.DefaultConfig())
	c := testContainer()
	finish, err := n.CreateContainer(context.Background(), testSandbox(), c, oci.NewGenerator())
	if err != nil {
		t.Fatal(err)
	}
	p := &syncRecorder{synced: make(chan []string, 1)}
	s, err := stub.New(p, stub.WithPluginName("late"), stub.WithPluginIdx("10"), stub.WithSocketPath(sock))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- s.Start(context.Background()) }()
	defer s.Stop()
	// The runtime's create takes a while; a synchronization now would
	// miss the container.
	select {
	case early := <-p.synced:
		t.Fatalf("plugin synchronized during the create, before the container was published (saw %v)", early)
	case <-time.After(500 * time.Millisecond):
	}
	rt.publish(c)
	finish(nil)
	select {
	case ids := <-p.synced:
		if len(ids) != 1 || ids[0] != c.ID {
			t.Fatalf("plugin synchronized with containers %v, want [%s]", ids, c.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("plugin not synchronized after the create finished")
	}
	if err := <-started; err != nil {
		t.Fatal(err)
	}
}

// faultyPlugin runs the real nri-faulty plugin on sock with args and
// returns its log file once it reported ready.
func faultyPlugin(t *testing.T, sock, name string, args ...string) string {
	t.Helper()
	testenv.SkipShort(t, "builds and runs nri-faulty")
	dir := t.TempDir()
	bin := testenv.BuildPlugin(t, "nri-faulty", dir)
	logf := filepath.Join(dir, "faulty.log")
	cmd := exec.Command(bin, append([]string{"--name", name, "--idx", "10", "--socket", sock, "--log-file", logf}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready") {
				close(ready)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		b, _ := os.ReadFile(logf)
		t.Fatalf("nri-faulty not ready:\n%s", b)
	}
	return logf
}

// waitLog waits until the plugin's log has every line (substring).
func waitLog(t *testing.T, logf string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(logf)
		missing := ""
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin log lacks %q:\n%s", missing, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCreateFailingAfterRelayIsUndoneForPlugins fails the runtime's create
// after the relay (finish with an error): the real nri-faulty plugin, which
// acted on the container and the pod, is sent StopContainer and
// RemoveContainer (StopPodSandbox and RemovePodSandbox for the pod).
func TestCreateFailingAfterRelayIsUndoneForPlugins(t *testing.T) {
	n, sock := startNRI(t, &publishingRuntime{}, nripolicy.DefaultConfig())
	logf := faultyPlugin(t, sock, "faulty", "--events",
		"RunPodSandbox,StopPodSandbox,RemovePodSandbox,CreateContainer,StopContainer,RemoveContainer")
	ctx := context.Background()
	runFailed := errors.New("runtime create failed")

	finish, err := n.CreateContainer(ctx, testSandbox(), testContainer(), oci.NewGenerator())
	if err != nil {
		t.Fatal(err)
	}
	finish(runFailed)
	finish(runFailed) // at most once
	pod := "pod=prod/web uid=u1"
	waitLog(t, logf, "acted CreateContainer "+pod+" container=app",
		"acted StopContainer "+pod+" container=app", "acted RemoveContainer "+pod+" container=app")

	sb := testSandbox()
	sb.Config.Metadata.Name = "web2"
	finish, err = n.RunPodSandbox(ctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	finish(runFailed)
	pod2 := "pod=prod/web2 uid=u1"
	waitLog(t, logf, "acted RunPodSandbox "+pod2, "acted StopPodSandbox "+pod2, "acted RemovePodSandbox "+pod2)
	b, _ := os.ReadFile(logf)
	if c := strings.Count(string(b), "acted StopContainer"); c != 1 {
		t.Errorf("%d StopContainer relays for one failed create, want 1:\n%s", c, b)
	}
	// A successful create is not undone.
	finish, err = n.CreateContainer(ctx, testSandbox(), &server.Container{ID: "ctr2", SandboxID: "pod1", Name: "k8s_ok",
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "ok"}}}, oci.NewGenerator())
	if err != nil {
		t.Fatal(err)
	}
	finish(nil)
	waitLog(t, logf, "acted CreateContainer "+pod+" container=ok")
	b, _ = os.ReadFile(logf)
	if strings.Contains(string(b), "acted StopContainer "+pod+" container=ok") {
		t.Errorf("a published container was undone:\n%s", b)
	}
}

// nriRig runs the CRI server with NRI as its hooks and the real nri-faulty
// plugin (named name, with args) on a private socket, pulls the test image
// and runs a host-network pod. It returns the server, the plugin's log and
// the pod's ID; everything is torn down when the test ends.
func nriRig(t *testing.T, name string, args ...string) (*server.Server, string, string) {
	t.Helper()
	dir, archive := testenv.ContainerRig(t, oci.DefaultRuntimePath, oci.DefaultMonitorPath)
	n, sock := startNRIDeferred(t)
	srv, err := server.New(server.Config{
		Listen: filepath.Join(dir, "cri.sock"), Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"),
		RuntimeRoot: filepath.Join(dir, "runc"),
	}, server.WithHooks(n))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	if err := n.Start(srv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	logf := faultyPlugin(t, sock, name, args...)

	ctx := context.Background()
	if _, err := srv.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "oci-archive:" + archive}}); err != nil {
		t.Fatal(err)
	}
	pod, err := srv.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "rig", Namespace: "ns", Uid: "rig-uid"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = srv.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: pod.PodSandboxId})
		_, _ = srv.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: pod.PodSandboxId})
	})
	return srv, logf, pod.PodSandboxId
}

// TestRuntimeCreateFailureIsUndoneForPlugins: through the real server, a
// container whose runc create fails after the NRI relay (its binary is
// missing) is sent StopContainer and RemoveContainer, which the real
// nri-faulty plugin logs; the server keeps no trace of it.
func TestRuntimeCreateFailureIsUndoneForPlugins(t *testing.T) {
	srv, logf, podID := nriRig(t, "faulty")
	ctx := context.Background()
	_, err := srv.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "nobinary"},
		Image:    &runtimeapi.ImageSpec{Image: "localhost/busybox:latest"}, Command: []string{"/nonexistent/nrigate-binary"},
	}})
	if err == nil {
		t.Fatal("create with a missing binary succeeded")
	}
	pod := "pod=ns/rig uid=rig-uid container=nobinary"
	waitLog(t, logf, "acted CreateContainer "+pod, "acted StopContainer "+pod, "acted RemoveContainer "+pod)
	if l, _ := srv.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); len(l.GetContainers()) != 0 {
		t.Errorf("failed create left containers %v", l.GetContainers())
	}
}

// TestConcurrentStopsWithRebalancingPlugin stops two running containers at
// once with the real nri-faulty plugin answering every StopContainer with
// an update of the other container. Applying that update under the stopped
// container's lock deadlocks: each stop holds its own container's lock and
// waits for the other's.
func TestConcurrentStopsWithRebalancingPlugin(t *testing.T) {
	srv, logf, podID := nriRig(t, "rebalancer", "--update-others-on-stop")
	ctx := context.Background()
	for round := 0; round < 2; round++ {
		var ids []string
		for _, name := range []string{"a", "b"} {
			r, err := srv.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, Config: &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: fmt.Sprintf("%s%d", name, round)},
				Image:    &runtimeapi.ImageSpec{Image: "localhost/busybox:latest"}, Command: []string{"sleep", "1000"},
			}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := srv.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: r.ContainerId}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.ContainerId)
		}
		errs := make(chan error, len(ids))
		for _, id := range ids {
			go func(id string) {
				_, err := srv.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id})
				errs <- err
			}(id)
		}
		for range ids {
			select {
			case err := <-errs:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(30 * time.Second):
				b, _ := os.ReadFile(logf)
				t.Fatalf("round %d: concurrent stops did not return in 30s (deadlock); plugin log:\n%s", round, b)
			}
		}
		for _, id := range ids {
			if _, err := srv.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitLog(t, logf, "update-others on stop of a0: 1 containers")
}

// startNRIDeferred creates an NRI integration without a policy and leaves
// it to the caller to start it with its runtime.
func startNRIDeferred(t *testing.T) (*NRI, string) {
	t.Helper()
	return newTestNRI(t, nripolicy.DefaultConfig())
}
