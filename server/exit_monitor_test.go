package server

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestExitMonitorReportsStop checks that a container exiting by itself is
// reported to the StopContainer hook when it exits, once, and not again when
// it is removed.
func TestExitMonitorReportsStop(t *testing.T) {
	dir, archive := runtimeRig(t)
	hooks := &recordingHooks{}
	srv, err := New(rigConfig(dir), WithHooks(hooks))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := srv.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "oci-archive:" + archive}}); err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	pod, err := srv.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "exits", Namespace: "ns", Uid: "exits-uid"}, LogDirectory: filepath.Join(dir, "logs"),
	}})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	defer func() {
		_, _ = srv.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: pod.PodSandboxId})
	}()
	cr, err := srv.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "exit3"}, Image: &runtimeapi.ImageSpec{Image: "localhost/busybox:latest"},
		Command: []string{"sh", "-c", "exit 3"}, LogPath: "exit3.log",
	}})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	id := cr.ContainerId
	stops := func() int {
		hooks.mu.Lock()
		defer hooks.mu.Unlock()
		return hooks.calls["StopContainer"]
	}
	if _, err := srv.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for stops() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := stops(); n != 1 {
		t.Fatalf("StopContainer hook calls within 2s of the exit: %d, want 1", n)
	}
	st, err := srv.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil || st.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Status.ExitCode != 3 || st.Status.FinishedAt == 0 {
		t.Errorf("status after the exit = %v, %v; want EXITED with code 3 and a finish time", st, err)
	}
	// The record carries the exit the monitor saw.
	b, err := os.ReadFile(filepath.Join(srv.recordDir(), "ctr-"+id+".json"))
	var rec struct {
		ExitCode   *int32    `json:"exit_code"`
		FinishedAt time.Time `json:"finished_at"`
	}
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil || rec.ExitCode == nil || *rec.ExitCode != 3 || rec.FinishedAt.IsZero() {
		t.Errorf("record %s, %v; want exit_code 3 and finished_at", b, err)
	}
	// Neither a stop nor the remove reports the stop again.
	if _, err := srv.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Errorf("StopContainer: %v", err)
	}
	if _, err := srv.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	if n := stops(); n != 1 {
		t.Errorf("StopContainer hook calls after stop and remove: %d, want still 1", n)
	}
	hooks.mu.Lock()
	if hooks.calls["RemoveContainer"] != 1 {
		t.Errorf("RemoveContainer hook calls %d, want 1", hooks.calls["RemoveContainer"])
	}
	hooks.mu.Unlock()
}
