package oci

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/testenv"
)

// needRuntime skips unless we are root with runc and conmon installed.
func needRuntime(t *testing.T) *Runtime {
	t.Helper()
	testenv.SkipShort(t, "runs real containers")
	testenv.RequireRoot(t, "running containers")
	testenv.RequireFiles(t, DefaultRuntimePath, DefaultMonitorPath, "/bin/busybox")
	dir, err := os.MkdirTemp("", "nrig")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	r, err := New(Config{StateDir: filepath.Join(dir, "state"), RuntimeRoot: filepath.Join(dir, "runc")})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func busyboxRootfs(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "rootfs")
	for _, d := range []string{"bin", "proc", "sys", "dev", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("cp", "/bin/busybox", filepath.Join(root, "bin", "busybox")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	for _, a := range []string{"sh", "sleep", "echo", "cat"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func createCtr(t *testing.T, r *Runtime, id string, args []string, logPath string) {
	t.Helper()
	in := baseInput()
	in.ID, in.RootFS, in.NetNSPath, in.Image = id, busyboxRootfs(t), "", nil
	in.Container.Command = args
	g, err := GenerateSpec(in)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pid, err := r.Create(ctx, CreateOptions{ID: id, Name: id, Spec: g.Config, LogPath: logPath})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if pid <= 0 {
		t.Fatalf("pid %d", pid)
	}
	t.Cleanup(func() { _ = r.Stop(ctx, id, 0, ""); _ = r.Delete(ctx, id) })
}

func TestRuntimeLifecycle(t *testing.T) {
	r := needRuntime(t)
	ctx := context.Background()
	logPath := filepath.Join(t.TempDir(), "logs", "c.log")
	createCtr(t, r, "life1", []string{"sh", "-c", "echo hello; trap 'exit 0' TERM; while true; do sleep 0.1; done"}, logPath)
	st, err := r.State(ctx, "life1")
	if err != nil || st.Status != StatusCreated {
		t.Fatalf("state after create = %+v, %v", st, err)
	}
	if err := r.Start(ctx, "life1"); err != nil {
		t.Fatalf("Start: %v", err)
	}
	st, err = r.State(ctx, "life1")
	if err != nil || st.Status != StatusRunning {
		t.Fatalf("state after start = %+v, %v", st, err)
	}
	res, err := r.ExecSync(ctx, "life1", []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, 5*time.Second)
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "out" || strings.TrimSpace(string(res.Stderr)) != "err" || res.ExitCode != 3 {
		t.Fatalf("ExecSync = %+v, %v", res, err)
	}
	if _, err := r.ExecSync(ctx, "life1", []string{"sh", "-c", "echo $$ > /tmp/exec.pid; exec sleep 30"}, 300*time.Millisecond); !errors.Is(err, ErrExecTimeout) {
		t.Errorf("ExecSync past its timeout = %v, want ErrExecTimeout", err)
	}
	// The timed-out process is gone from the container.
	res, err = r.ExecSync(ctx, "life1", []string{"sh", "-c", "s=$(grep State /proc/$(cat /tmp/exec.pid)/status 2>/dev/null); case $s in ''|*Z*) echo gone;; *) echo alive: $s;; esac"}, 5*time.Second)
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "gone" {
		t.Errorf("timed-out exec process: %+v, %v; want gone", res, err)
	}
	mem := int64(64 << 20)
	res2, _ := LinuxResources(&runtimeapi.LinuxContainerResources{MemoryLimitInBytes: mem})
	if err := r.Update(ctx, "life1", res2); err != nil {
		t.Errorf("Update: %v", err)
	}
	start := time.Now()
	if err := r.Stop(ctx, "life1", 10*time.Second, ""); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stop took %s: SIGTERM was not honoured", d)
	}
	st, err = r.State(ctx, "life1")
	if err != nil || st.Status != StatusStopped || st.ExitCode != 0 {
		t.Fatalf("state after stop = %+v, %v", st, err)
	}
	b, err := os.ReadFile(logPath)
	if err != nil || !strings.Contains(string(b), " stdout F hello") {
		t.Errorf("CRI log %q, %v", b, err)
	}
	if err := r.Delete(ctx, "life1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := os.Stat(r.BundleDir("life1")); !os.IsNotExist(err) {
		t.Errorf("bundle left behind: %v", err)
	}
}

func TestRuntimeExitCodeAndKill(t *testing.T) {
	r := needRuntime(t)
	ctx := context.Background()
	createCtr(t, r, "exit7", []string{"sh", "-c", "exit 7"}, "")
	if err := r.Start(ctx, "exit7"); err != nil {
		t.Fatal(err)
	}
	if !r.waitExit(ctx, "exit7", 10*time.Second) {
		t.Fatal("no exit file")
	}
	st, err := r.State(ctx, "exit7")
	if err != nil || st.Status != StatusStopped || st.ExitCode != 7 || st.Finished.IsZero() {
		t.Fatalf("state = %+v, %v; want stopped with exit code 7", st, err)
	}

	// A process that ignores SIGTERM is killed after the timeout.
	createCtr(t, r, "stubborn", []string{"sh", "-c", "trap '' TERM; while true; do sleep 0.1; done"}, "")
	if err := r.Start(ctx, "stubborn"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := r.Stop(ctx, "stubborn", 500*time.Millisecond, ""); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Errorf("killed after %s, before the timeout", d)
	}
	st, _ = r.State(ctx, "stubborn")
	if st.Status != StatusStopped || st.ExitCode != 137 {
		t.Errorf("state = %+v, want stopped with 137", st)
	}
}

func TestRuntimeCreateFailureLeavesNothing(t *testing.T) {
	r := needRuntime(t)
	in := baseInput()
	in.RootFS, in.NetNSPath, in.Image = busyboxRootfs(t), "", nil
	in.Container.Command = []string{"/no/such/binary"}
	g, err := GenerateSpec(in)
	if err != nil {
		t.Fatal(err)
	}
	// runc create succeeds for a missing binary only at start on some
	// versions; a missing netns fails create on all of them.
	g.AddOrReplaceLinuxNamespace("network", "/var/run/netns/nrigate-does-not-exist")
	if _, err := r.Create(context.Background(), CreateOptions{ID: "bad1", Spec: g.Config}); err == nil {
		t.Fatal("Create with a missing netns succeeded")
	}
	if _, err := os.Stat(r.BundleDir("bad1")); !os.IsNotExist(err) {
		t.Errorf("bundle left behind: %v", err)
	}
	if st, err := r.State(context.Background(), "bad1"); err != nil || st.Status != StatusUnknown {
		t.Errorf("state = %+v, %v; want unknown", st, err)
	}
}

func TestNetNS(t *testing.T) {
	testenv.SkipShort(t, "creates network namespaces")
	testenv.RequireRoot(t, "netns")
	testenv.RequireCommands(t, "ip")
	p, err := CreateNetNS("testpod0123456789")
	if err != nil {
		t.Fatal(err)
	}
	defer DeleteNetNS("testpod0123456789")
	out, err := exec.Command("ip", "-n", NetNSName("testpod0123456789"), "-o", "link", "show", "lo").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "UP") {
		t.Errorf("lo not up in %s: %s %v", p, out, err)
	}
	if err := DeleteNetNS("testpod0123456789"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("netns still there: %v", err)
	}
	if err := DeleteNetNS("testpod0123456789"); err != nil {
		t.Errorf("second delete: %v", err)
	}
}
