package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/oci"
)

// TestRecoveryAfterRestart checks that a server started on the root and
// runroot of a previous one recovers its pod and containers with their real
// states, reports the exit of a container that exited while no server ran
// once to the StopContainer hook (and not again the exit reported before),
// keeps the names reserved, can exec in, stop and remove the recovered
// containers, and cleans up half-finished creates instead of listing them.
func TestRecoveryAfterRestart(t *testing.T) {
	dir, archive := runtimeRig(t)
	cfg := rigConfig(dir)
	hooks1 := &recordingHooks{}
	srv, err := New(cfg, WithHooks(hooks1))
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	// Whatever a failing test left: the current server removes every pod
	// it knows (with its containers and netns) before it stops.
	defer func() {
		if stopped {
			return
		}
		pods, _ := srv.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
		for _, p := range pods.GetItems() {
			_, _ = srv.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Id})
		}
		srv.Stop()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := srv.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "oci-archive:" + archive}}); err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	podCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "recover", Namespace: "ns", Uid: "recover-uid"},
		LogDirectory: filepath.Join(dir, "logs"), Labels: map[string]string{"app": "recover"},
	}
	pod, err := srv.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	gateDir := filepath.Join(dir, "gate")
	if err := os.Mkdir(gateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(name string, cmd ...string) string {
		t.Helper()
		cr, err := srv.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod.PodSandboxId, Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: "localhost/busybox:latest"},
			Command: cmd, LogPath: name + ".log", Labels: map[string]string{"ctr": name},
			Mounts: []*runtimeapi.Mount{{ContainerPath: "/gate", HostPath: gateDir, Readonly: true}},
		}})
		if err != nil {
			t.Fatalf("CreateContainer %s: %v", name, err)
		}
		if _, err := srv.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
			t.Fatalf("StartContainer %s: %v", name, err)
		}
		return cr.ContainerId
	}
	running := run("sleeper", "sleep", "1000")
	exited := run("exit3", "sh", "-c", "exit 3")
	// exitLater exits while no server runs: it waits for a file created
	// after the first server stopped.
	later := run("exit5", "sh", "-c", "while [ ! -e /gate/open ]; do sleep 0.1; done; exit 5")
	created, err := srv.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "idle"}, Image: &runtimeapi.ImageSpec{Image: "localhost/busybox:latest"},
		Command: []string{"true"},
	}})
	if err != nil {
		t.Fatalf("CreateContainer idle: %v", err)
	}
	waitFor(t, "the exit3 container's stop hook", func() bool { return hooks1.n("StopContainer") == 1 })

	// Half-finished creates, as a daemon killed in the middle leaves them:
	// a creating container record with its root filesystem mounted, and a
	// creating pod record with its network namespace.
	img, err := srv.store.ImageStatus(ctx, "localhost/busybox:latest")
	if err != nil {
		t.Fatal(err)
	}
	halfCtr, halfPod := newID(), newID()
	if err := srv.writeRecordErr(recordContainer, halfCtr, ctrRecord{ID: halfCtr, SandboxID: pod.PodSandboxId, Name: "k8s_half", Creating: true}); err != nil {
		t.Fatal(err)
	}
	if err := srv.store.CreateContainer(halfCtr, "k8s_half", img.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.store.Mount(halfCtr); err != nil {
		t.Fatal(err)
	}
	if err := srv.writeRecordErr(recordPod, halfPod, podRecord{ID: halfPod, Name: "k8s_halfpod", Config: podConfig("halfpod"), Creating: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := oci.CreateNetNS(halfPod); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = oci.DeleteNetNS(halfPod) }()

	// The first server goes; its containers stay.
	srv.Stop()
	stopped = true
	if err := os.WriteFile(filepath.Join(gateDir, "open"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rt, err := oci.New(oci.Config{RuntimeRoot: cfg.RuntimeRoot, StateDir: filepath.Join(cfg.RunRoot, "nrigate")})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the exit5 container's exit while no server runs", func() bool { _, _, ok := rt.ExitCode(later); return ok })

	hooks2 := &recordingHooks{}
	srv, err = New(cfg, WithHooks(hooks2))
	if err != nil {
		t.Fatalf("second New: %v", err)
	}
	stopped = false

	pods, err := srv.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Id != pod.PodSandboxId ||
		pods.Items[0].State != runtimeapi.PodSandboxState_SANDBOX_READY || pods.Items[0].Labels["app"] != "recover" {
		t.Fatalf("ListPodSandbox after restart = %v, %v; want the one ready pod with its labels", pods, err)
	}
	want := map[string]runtimeapi.ContainerState{
		running: runtimeapi.ContainerState_CONTAINER_RUNNING, exited: runtimeapi.ContainerState_CONTAINER_EXITED,
		later: runtimeapi.ContainerState_CONTAINER_EXITED, created.ContainerId: runtimeapi.ContainerState_CONTAINER_CREATED,
	}
	ctrs, err := srv.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(ctrs.Containers) != len(want) {
		t.Fatalf("ListContainers after restart = %v, %v; want %d containers", ctrs, err, len(want))
	}
	for _, c := range ctrs.Containers {
		if c.State != want[c.Id] || c.PodSandboxId != pod.PodSandboxId || c.Labels["ctr"] != c.Metadata.GetName() && c.Metadata.GetName() != "idle" {
			t.Errorf("container %s (%s) after restart: state %v, pod %s, labels %v; want %v", c.Metadata.GetName(), c.Id, c.State, c.PodSandboxId, c.Labels, want[c.Id])
		}
	}
	for id, code := range map[string]int32{exited: 3, later: 5} {
		st, err := srv.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err != nil || st.Status.ExitCode != code || st.Status.FinishedAt == 0 || st.Status.StartedAt == 0 || st.Status.LogPath == "" {
			t.Errorf("status of %s after restart = %v, %v; want exit code %d, times and log path", id, st, err, code)
		}
	}
	// Only the exit nobody had heard of reaches the hook, once.
	waitFor(t, "the exit5 container's stop hook", func() bool { return hooks2.n("StopContainer") >= 1 })
	time.Sleep(200 * time.Millisecond)
	if n := hooks2.n("StopContainer"); n != 1 {
		t.Errorf("StopContainer hook calls after restart: %d, want 1 (exit5 only)", n)
	}
	// What NRI synchronizes reconnecting plugins with: the recovered pod
	// and containers, with their specs.
	if sbs := srv.Sandboxes(); len(sbs) != 1 || sbs[0].Config.GetMetadata().GetName() != "recover" {
		t.Errorf("Sandboxes() after restart = %v", sbs)
	}
	for _, c := range srv.Containers() {
		if c.Spec == nil || c.Spec.Process == nil || c.Config.GetMetadata() == nil {
			t.Errorf("container %s recovered without its spec or config", c.ID)
		}
	}
	if state, code, err := srv.ContainerState(ctx, later); err != nil || state != runtimeapi.ContainerState_CONTAINER_EXITED || code != 5 {
		t.Errorf("ContainerState(exit5) = %v, %d, %v", state, code, err)
	}
	// Names stay reserved.
	_, err = srv.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	wantCode(t, "pod with the recovered pod's name", err, codes.AlreadyExists, "already reserved")
	_, err = srv.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "sleeper"}, Image: &runtimeapi.ImageSpec{Image: "localhost/busybox:latest"},
	}})
	wantCode(t, "container with a recovered container's name", err, codes.AlreadyExists, "already reserved")

	// Half-finished creates are gone, with what they made.
	if srv.store.ContainerExists(halfCtr) {
		t.Errorf("half-created container's root filesystem is left")
	}
	if _, err := os.Stat(filepath.Join(oci.NetNSDir, oci.NetNSName(halfPod))); !os.IsNotExist(err) {
		t.Errorf("half-created pod's netns is left: %v", err)
	}
	for _, p := range []string{recordContainer + "-" + halfCtr, recordPod + "-" + halfPod} {
		if _, err := os.Stat(filepath.Join(srv.recordDir(), p+".json")); !os.IsNotExist(err) {
			t.Errorf("record %s is left: %v", p, err)
		}
	}

	// The running container still works.
	ex, err := srv.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: running, Cmd: []string{"echo", "alive"}, Timeout: 10})
	if err != nil || strings.TrimSpace(string(ex.Stdout)) != "alive" || ex.ExitCode != 0 {
		t.Errorf("ExecSync after restart = %v, %v", ex, err)
	}
	if _, err := srv.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: running, Timeout: 1}); err != nil {
		t.Errorf("StopContainer after restart: %v", err)
	}
	if st, err := srv.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: running}); err != nil || st.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("status after stop = %v, %v", st, err)
	}
	if _, err := srv.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: pod.PodSandboxId}); err != nil {
		t.Fatalf("RemovePodSandbox after restart: %v", err)
	}
	for id := range want {
		if srv.store.ContainerExists(id) {
			t.Errorf("root filesystem of %s left after the pod's removal", id)
		}
	}
	if ents, _ := os.ReadDir(srv.recordDir()); len(ents) != 0 {
		t.Errorf("records left after the pod's removal: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(oci.NetNSDir, oci.NetNSName(pod.PodSandboxId))); !os.IsNotExist(err) {
		t.Errorf("pod netns left after removal: %v", err)
	}
}

func (h *recordingHooks) n(call string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[call]
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
