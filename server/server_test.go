package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/oci"
	"go.podman.io/storage/pkg/reexec"
)

func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	os.Exit(m.Run())
}

// bareServer has no storage or runtime: enough for requests that must be
// rejected before either is touched.
func bareServer() *Server {
	return &Server{
		cfg: Config{RuntimeName: "runc"}, log: logrus.New(), hooks: NoopHooks{},
		sandboxes: map[string]*Sandbox{}, containers: map[string]*Container{}, names: map[string]string{},
	}
}

func wantCode(t *testing.T, what string, err error, code codes.Code, msg string) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: code %v (%v), want %v", what, status.Code(err), err, code)
		return
	}
	if msg != "" && !strings.Contains(err.Error(), msg) {
		t.Errorf("%s: message %q lacks %q", what, err, msg)
	}
}

func podConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "ns", Uid: name + "-uid"}}
}

func TestRequestValidation(t *testing.T) {
	s := bareServer()
	ctx := context.Background()
	_, err := s.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{})
	wantCode(t, "run without config", err, codes.InvalidArgument, "config is required")
	_, err = s.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{}})
	wantCode(t, "run without metadata", err, codes.InvalidArgument, "metadata is required")
	_, err = s.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Uid: "u"}}})
	wantCode(t, "run without namespace", err, codes.InvalidArgument, "metadata.namespace")
	_, err = s.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("p"), RuntimeHandler: "kata"})
	wantCode(t, "run with unknown handler", err, codes.InvalidArgument, `"kata" is not configured`)
	slice := podConfig("p")
	slice.Linux = &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "kubepods.slice"}
	_, err = s.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: slice})
	wantCode(t, "run with a systemd slice parent", err, codes.InvalidArgument, "cgroupfs cgroup manager")

	_, err = s.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "nope"})
	wantCode(t, "status of unknown pod", err, codes.NotFound, `"nope" not found`)
	_, err = s.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{})
	wantCode(t, "status without id", err, codes.InvalidArgument, "must not be empty")
	if _, err := s.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: "nope"}); err != nil {
		t.Errorf("stop of unknown pod: %v, want idempotent success", err)
	}
	if _, err := s.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: "nope"}); err != nil {
		t.Errorf("remove of unknown pod: %v, want idempotent success", err)
	}

	cc := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}}
	_, err = s.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: "nope", Config: cc})
	wantCode(t, "create in unknown pod", err, codes.NotFound, "not found")
	_, err = s.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: "nope"})
	wantCode(t, "create without config", err, codes.InvalidArgument, "container config is required")
	_, err = s.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: "nope", Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}}})
	wantCode(t, "create without image", err, codes.InvalidArgument, "image.image")
	bad := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "x"}, LogPath: "/abs.log"}
	_, err = s.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: "nope", Config: bad})
	wantCode(t, "create with absolute log path", err, codes.InvalidArgument, "relative")

	// A pod that is not ready refuses containers.
	s.sandboxes["pod1"] = &Sandbox{ID: "pod1", Config: podConfig("p"), State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}
	_, err = s.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: "pod1", Config: cc})
	wantCode(t, "create in stopped pod", err, codes.FailedPrecondition, "not ready")

	for name, call := range map[string]func() error{
		"start": func() error {
			_, e := s.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: "nope"})
			return e
		},
		"stop": func() error {
			_, e := s.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: "nope"})
			return e
		},
		"status": func() error {
			_, e := s.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "nope"})
			return e
		},
		"exec": func() error {
			_, e := s.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: "nope", Cmd: []string{"true"}})
			return e
		},
		"update": func() error {
			_, e := s.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: "nope"})
			return e
		},
	} {
		wantCode(t, name+" of unknown container", call(), codes.NotFound, `container "nope" not found`)
	}
	if _, err := s.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: "nope"}); err != nil {
		t.Errorf("remove of unknown container: %v, want idempotent success", err)
	}
	_, err = s.Exec(ctx, &runtimeapi.ExecRequest{})
	wantCode(t, "exec streaming", err, codes.Unimplemented, "ExecSync")
	_, err = s.PullImage(ctx, &runtimeapi.PullImageRequest{})
	wantCode(t, "pull without image", err, codes.InvalidArgument, "must not be empty")
}

func TestStatusConditionsAndVerbose(t *testing.T) {
	s := bareServer()
	s.effective = map[string]string{"listen": "/x.sock"}
	s.conditions = func() []*runtimeapi.RuntimeCondition {
		return []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.NetworkReady, Status: false, Reason: "NRIPluginNotReady"},
			{Type: "NRIPluginsReady", Status: true},
		}
	}
	s.verboseInfo = func() map[string]string { return map[string]string{"nri": `{"plugins":[]}`} }
	resp, err := s.Status(context.Background(), &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*runtimeapi.RuntimeCondition{}
	for _, c := range resp.Status.Conditions {
		got[c.Type] = c
	}
	if len(resp.Status.Conditions) != 3 || !got[runtimeapi.RuntimeReady].Status || got[runtimeapi.NetworkReady].Status || got["NRIPluginsReady"] == nil {
		t.Errorf("conditions %v", resp.Status.Conditions)
	}
	if resp.Info["config"] != `{"listen":"/x.sock"}` || resp.Info["nri"] == "" {
		t.Errorf("verbose info %v", resp.Info)
	}
}

// TestCRIEndToEnd drives the server over its socket like crictl does.
func TestCRIEndToEnd(t *testing.T) {
	dir, archive := runtimeRig(t)
	hooks := &recordingHooks{}
	srv, err := New(rigConfig(dir), WithHooks(hooks))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	defer func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	conn, err := grpc.NewClient("unix://"+srv.Config().Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc, ic := runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var ver *runtimeapi.VersionResponse
	for i := 0; i < 100; i++ {
		if ver, err = rc.Version(ctx, &runtimeapi.VersionRequest{}); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || ver.RuntimeName != RuntimeName {
		t.Fatalf("Version = %v, %v", ver, err)
	}
	pull, err := ic.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "oci-archive:" + archive}})
	if err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	ist, err := ic.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "localhost/busybox"}})
	if err != nil || ist.GetImage().GetId() != pull.ImageRef || ist.GetImage().GetSize() == 0 {
		t.Errorf("ImageStatus = %v, %v", ist, err)
	}
	ist, err = ic.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "localhost/absent:1"}})
	if err != nil || ist.GetImage() != nil {
		t.Errorf("ImageStatus of a missing image = %v, %v; want no image and no error", ist, err)
	}
	il, err := ic.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: "localhost/absent:1"}}})
	if err != nil || len(il.GetImages()) != 0 {
		t.Errorf("ListImages filtered on a missing image = %v, %v", il, err)
	}
	il, err = ic.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil || len(il.GetImages()) != 1 {
		t.Errorf("ListImages = %v, %v; want the pulled image", il, err)
	}
	fsi, err := ic.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil || len(fsi.GetImageFilesystems()) != 1 || fsi.ImageFilesystems[0].GetUsedBytes().GetValue() == 0 {
		t.Errorf("ImageFsInfo = %v, %v", fsi, err)
	}
	pod, err := rc.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "e2e", Namespace: "ns", Uid: "e2e-uid"}, LogDirectory: filepath.Join(dir, "logs"),
		Hostname: "e2ehost",
	}})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	// Whatever a failing test left: every pod goes, with its netns.
	defer func() {
		pods, _ := rc.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
		for _, p := range pods.GetItems() {
			_, _ = rc.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Id})
		}
	}()
	_, err = rc.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "e2e", Namespace: "ns", Uid: "e2e-uid"}}})
	wantCode(t, "duplicate pod", err, codes.AlreadyExists, "already reserved")

	mk := func(name string, cmd ...string) string {
		t.Helper()
		r, err := rc.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod.PodSandboxId, Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: "localhost/busybox:latest"},
			Command: cmd, LogPath: name + ".log",
		}})
		if err != nil {
			t.Fatalf("CreateContainer %s: %v", name, err)
		}
		return r.ContainerId
	}
	id := mk("sleeper", "sh", "-c", "echo started; hostname; exec sleep 1000")
	if _, err := rc.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	_, err = rc.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	wantCode(t, "second start", err, codes.FailedPrecondition, "only be started once")
	ex, err := rc.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sh", "-c", "ip -o link show lo; exit 4"}, Timeout: 5})
	if err != nil || ex.ExitCode != 4 || !strings.Contains(string(ex.Stdout), "UP") {
		t.Errorf("ExecSync = %v, %v (want exit 4 and lo UP)", ex, err)
	}
	if _, err := rc.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id,
		Linux: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 128 << 20}}); err != nil {
		t.Errorf("UpdateContainerResources: %v", err)
	}
	if hooks.calls["CreateContainer"] != 1 || hooks.calls["StartContainer"] != 1 || hooks.calls["RunPodSandbox"] != 1 || hooks.calls["UpdateContainer"] != 1 {
		t.Errorf("hook calls %v", hooks.calls)
	}
	// Status and list calls run while a stop waits out its timeout (and
	// under -race show that they do not touch fields unguarded).
	stopDone := make(chan struct{})
	go func() {
		defer close(stopDone)
		for i := 0; i < 20; i++ {
			_, _ = rc.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
			_, _ = rc.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			_, _ = rc.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
			time.Sleep(20 * time.Millisecond)
		}
	}()
	stopStart := time.Now()
	if _, err := rc.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	<-stopDone
	if d := time.Since(stopStart); d < time.Second {
		t.Errorf("stop of a process ignoring SIGTERM returned after %s, before its 1s timeout", d)
	}
	st, err := rc.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil || st.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Status.ExitCode != 137 {
		t.Errorf("status after stop = %v, %v", st, err)
	}
	logb, err := os.ReadFile(filepath.Join(dir, "logs", "sleeper.log"))
	if err != nil || !strings.Contains(string(logb), "stdout F started") || !strings.Contains(string(logb), "stdout F e2ehost") {
		t.Errorf("log %q, %v", logb, err)
	}

	id7 := mk("exit7", "sh", "-c", "exit 7")
	if _, err := rc.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id7}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err = rc.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id7})
		if err == nil && st.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st.GetStatus().GetExitCode() != 7 || st.GetStatus().GetReason() != "Error" {
		t.Errorf("exit7 status = %v, %v", st, err)
	}

	// A failed create leaves nothing behind.
	_, err = rc.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "badmount"}, Image: &runtimeapi.ImageSpec{Image: "localhost/busybox:latest"},
		Mounts: []*runtimeapi.Mount{{ContainerPath: "/x", HostPath: "/nonexistent/nrigate"}},
	}})
	wantCode(t, "create with missing mount source", err, codes.InvalidArgument, "/nonexistent/nrigate")
	_, err = rc.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "noimage"}, Image: &runtimeapi.ImageSpec{Image: "localhost/nothere:1"},
	}})
	wantCode(t, "create with unknown image", err, codes.NotFound, "pull it first")
	// A create that fails in the runtime after the hook hands the error to
	// the hook's finish, which undoes the relay for the plugins.
	_, err = rc.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "nobinary"}, Image: &runtimeapi.ImageSpec{Image: "localhost/busybox:latest"},
		Command: []string{"/nonexistent/nrigate-binary"},
	}})
	wantCode(t, "create with a missing binary", err, codes.Internal, "nobinary")
	hooks.mu.Lock()
	if hooks.finished["CreateContainer ok"] != 2 || hooks.finished["CreateContainer error"] != 1 || hooks.finished["RunPodSandbox ok"] != 1 {
		t.Errorf("hook finish calls %v, want 2 creates ok, 1 create error, 1 pod ok", hooks.finished)
	}
	hooks.mu.Unlock()
	// A hook refusing the container undoes everything and its error code
	// reaches the client unchanged.
	_, err = rc.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "refused"}, Image: &runtimeapi.ImageSpec{Image: "localhost/busybox:latest"},
		Command: []string{"true"},
	}})
	wantCode(t, "create refused by hook", err, codes.PermissionDenied, "plugin guard refused")
	_, err = rc.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "refusedpod", Namespace: "ns", Uid: "r-uid"}}})
	wantCode(t, "pod refused by hook", err, codes.PermissionDenied, "plugin guard refused")
	if hooks.refusedPodNetNS == "" {
		t.Error("refused pod had no netns when the hook ran")
	} else if _, err := os.Stat(hooks.refusedPodNetNS); !os.IsNotExist(err) {
		t.Errorf("refused pod left its netns %s: %v", hooks.refusedPodNetNS, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "run", "nrigate", "records", "pod-"+pod.PodSandboxId+".json")); err != nil {
		t.Errorf("pod record missing: %v", err)
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, "run", "nrigate", "records", "pod-*.json")); len(ents) != 1 {
		t.Errorf("pod records after a refused pod: %v, want only the running pod's", ents)
	}
	pods, _ := rc.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if len(pods.GetItems()) != 1 {
		t.Errorf("pods after a refused one: %d, want 1", len(pods.GetItems()))
	}
	if b, err := os.ReadFile(filepath.Join(dir, "root", "overlay-containers", "containers.json")); err != nil || strings.Count(string(b), `"id"`) != 2 {
		t.Errorf("storage containers after refusals: %s, %v; want the 2 created", b, err)
	}

	list, err := rc.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(list.Containers) != 2 {
		t.Errorf("ListContainers = %d, %v; want the 2 created", len(list.GetContainers()), err)
	}
	if _, err := rc.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Errorf("RemoveContainer: %v", err)
	}
	if _, err := rc.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: pod.PodSandboxId}); err != nil {
		t.Errorf("StopPodSandbox: %v", err)
	}
	if _, err := os.Stat(filepath.Join(oci.NetNSDir, oci.NetNSName(pod.PodSandboxId))); !os.IsNotExist(err) {
		t.Errorf("netns left after stop: %v", err)
	}
	if _, err := rc.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: pod.PodSandboxId}); err != nil {
		t.Errorf("RemovePodSandbox: %v", err)
	}
	// Both containers (one stopped, one exited by itself) were reported
	// stopped and removed exactly once.
	hooks.mu.Lock()
	if hooks.calls["StopContainer"] != 2 || hooks.calls["RemoveContainer"] != 2 {
		t.Errorf("stop/remove hook calls %v, want 2 each", hooks.calls)
	}
	hooks.mu.Unlock()
	pods, _ = rc.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if len(pods.GetItems()) != 0 {
		t.Errorf("pods left: %v", pods.GetItems())
	}
	if _, err := ic.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: pull.ImageRef}}); err != nil {
		t.Errorf("RemoveImage: %v", err)
	}
	if _, err := ic.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: pull.ImageRef}}); err != nil {
		t.Errorf("second RemoveImage: %v, want idempotent success", err)
	}
}

type recordingHooks struct {
	NoopHooks
	mu              sync.Mutex
	calls           map[string]int
	refusedPodNetNS string
	// finished counts finish calls by "Event ok" or "Event error".
	finished map[string]int
}

func (h *recordingHooks) finish(ev string) func(error) {
	return func(err error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.finished == nil {
			h.finished = map[string]int{}
		}
		k := ev + " ok"
		if err != nil {
			k = ev + " error"
		}
		h.finished[k]++
	}
}

func (h *recordingHooks) count(n string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = map[string]int{}
	}
	h.calls[n]++
}

func (h *recordingHooks) RunPodSandbox(_ context.Context, sb *Sandbox) (func(error), error) {
	if sb.Config.Metadata.Name == "refusedpod" {
		h.refusedPodNetNS = sb.NetNSPath
		return nil, status.Error(codes.PermissionDenied, "plugin guard refused the pod")
	}
	h.count("RunPodSandbox")
	return h.finish("RunPodSandbox"), nil
}

func (h *recordingHooks) CreateContainer(_ context.Context, _ *Sandbox, c *Container, g *oci.Generator) (func(error), error) {
	if c.Config.Metadata.Name == "refused" {
		return nil, status.Error(codes.PermissionDenied, "plugin guard refused the container")
	}
	h.count("CreateContainer")
	g.AddAnnotation("hooked", "yes")
	return h.finish("CreateContainer"), nil
}
func (h *recordingHooks) StopContainer(context.Context, *Sandbox, *Container) (func(), error) {
	h.count("StopContainer")
	return nil, nil
}

func (h *recordingHooks) RemoveContainer(context.Context, *Sandbox, *Container) error {
	h.count("RemoveContainer")
	return nil
}

func (h *recordingHooks) StartContainer(context.Context, *Sandbox, *Container) error {
	h.count("StartContainer")
	return nil
}
func (h *recordingHooks) UpdateContainer(context.Context, *Sandbox, *Container, *runtimeapi.LinuxContainerResources) error {
	h.count("UpdateContainer")
	return nil
}
