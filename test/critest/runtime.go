package critest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ErrUnavailable is returned by Start when the runtime cannot run here for
// a missing prerequisite (binaries not built, tools not installed): a
// caller skips (or, under CI=true, fails).
var ErrUnavailable = errors.New("runtime not available")

// Options say which runtime Start starts and how.
type Options struct {
	// Repo is the repository root: test/e2e/runtime.sh and bin/ are there.
	Repo string
	// Runtime is "crio" or "containerd".
	Runtime string
	// Dir holds every path of the instance (short: unix socket paths).
	Dir string
	// Policy is the policy drop-in in CRI-O syntax; empty for none.
	Policy string
	// Image is hack/make-test-image.sh's busybox archive.
	Image string
	// BinDir holds the runtime's binaries (default Repo/bin).
	BinDir string
	// NRIOff turns NRI off in the runtime's config.
	NRIOff bool
	// Metrics serves the runtime's metrics (Runtime.MetricsURL).
	Metrics bool
	// Env is added to the runtime's environment (KEY=VALUE).
	Env []string
}

// Runtime is a patched CRI-O or containerd started by test/e2e/runtime.sh,
// that is with test/helpers.bash's start_runtime: the runtime's config
// script, the test and pause images. The Go suites and tools/nri-bench
// share it with the BATS suites so that each runtime's config exists once.
type Runtime struct {
	Name, Dir, CRISock, NRISock string
	// PID is the daemon's process ID.
	PID int
	// MetricsURL is the metrics endpoint when started with Options.Metrics.
	MetricsURL string
	Conn       *grpc.ClientConn
	RT         runtimeapi.RuntimeServiceClient
	script     string
}

// Start starts the runtime and connects to its CRI socket; the runtime's
// log is Dir/daemon.log, runtime.sh's own messages go to stderr.
func Start(o Options, stderr io.Writer) (*Runtime, error) {
	r := &Runtime{Name: o.Runtime, Dir: o.Dir, script: filepath.Join(o.Repo, "test/e2e/runtime.sh")}
	policy := filepath.Join(o.Dir, "policy.in.toml")
	if err := os.WriteFile(policy, []byte(o.Policy), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(r.script, "start", o.Dir, policy)
	cmd.Env = append(os.Environ(), "RUNTIME="+o.Runtime, "TEST_IMAGE="+o.Image, "REPO_ROOT="+o.Repo)
	if o.BinDir != "" {
		cmd.Env = append(cmd.Env, "RUNTIME_BINDIR="+o.BinDir)
	}
	if o.NRIOff {
		cmd.Env = append(cmd.Env, "ENABLE_NRI=false")
	}
	if o.Metrics {
		cmd.Env = append(cmd.Env, "RUNTIME_METRICS=1")
	}
	cmd.Env = append(cmd.Env, o.Env...)
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
		return nil, fmt.Errorf("%s: %w (see the log above)", o.Runtime, ErrUnavailable)
	}
	if err != nil {
		r.Stop()
		return nil, fmt.Errorf("runtime.sh start %s: %w", o.Runtime, err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	r.CRISock, r.NRISock, r.MetricsURL = env["CRI_SOCK"], env["NRI_SOCK"], env["METRICS_URL"]
	if r.PID, err = strconv.Atoi(env["DAEMON_PID"]); err != nil {
		r.Stop()
		return nil, fmt.Errorf("runtime.sh start printed no DAEMON_PID: %q", out)
	}
	r.Conn, err = grpc.NewClient("unix://"+r.CRISock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		r.Stop()
		return nil, err
	}
	r.RT = runtimeapi.NewRuntimeServiceClient(r.Conn)
	return r, nil
}

// Stop removes the pods and containers, stops the runtime and removes what
// it left (runtime.sh stop); the directory itself stays the caller's.
func (r *Runtime) Stop() error {
	if r.Conn != nil {
		_ = r.Conn.Close()
	}
	out, err := exec.Command(r.script, "stop", r.Dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("runtime.sh stop: %v: %s", err, out)
	}
	return nil
}

// RunPod runs PodConfig(name) with its logs under the runtime's directory.
func (r *Runtime) RunPod(name string) (string, *runtimeapi.PodSandboxConfig, error) {
	return r.RunPodIn(name, "default")
}

// RunPodIn runs PodConfig(name) in namespace instead of default.
func (r *Runtime) RunPodIn(name, namespace string) (string, *runtimeapi.PodSandboxConfig, error) {
	cfg := PodConfig(name, filepath.Join(r.Dir, "logs"))
	cfg.Metadata.Namespace = namespace
	resp, err := r.RT.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		return "", nil, err
	}
	return resp.PodSandboxId, cfg, nil
}

// Plugin is a running bin/nri-faulty.
type Plugin struct {
	Cmd *exec.Cmd
	// Ready is the time stamp of its "ready" line (printed right after
	// Synchronize).
	Ready   time.Time
	drained chan struct{}
	once    sync.Once
}

// StartPlugin starts nri-faulty with args on nriSock, logging to logFile,
// and returns once it printed "ready" (it is synchronized with the
// runtime), or an error after timeout or if it exits first.
func StartPlugin(bin, nriSock, logFile string, timeout time.Duration, args ...string) (*Plugin, error) {
	cmd := exec.Command(bin, append([]string{"--socket", nriSock, "--log-file", logFile}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Plugin{Cmd: cmd, drained: make(chan struct{})}
	ready := make(chan time.Time, 1)
	go func() {
		defer close(p.drained)
		s := bufio.NewScanner(out)
		for s.Scan() {
			if ts, ok := strings.CutPrefix(s.Text(), "ready "); ok {
				t, _ := time.Parse(time.RFC3339Nano, ts)
				ready <- t
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case p.Ready = <-ready:
		return p, nil
	case <-p.drained:
		_ = p.Wait()
		return nil, fmt.Errorf("nri-faulty %v exited before it was ready (log %s)", args, logFile)
	case <-time.After(timeout):
		p.Kill()
		return nil, fmt.Errorf("nri-faulty %v not ready after %v (log %s)", args, timeout, logFile)
	}
}

// Wait waits for the plugin to exit (its stdout read to the end first, as
// exec.Cmd.Wait requires).
func (p *Plugin) Wait() error {
	<-p.drained
	var err error
	p.once.Do(func() { err = p.Cmd.Wait() })
	return err
}

// Kill kills the plugin and waits for it.
func (p *Plugin) Kill() {
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	_ = p.Wait()
}

// createLogged is the line each runtime logs (at info level) when a
// CreateContainer request reaches it, before any NRI call (CREATE_LOGGED
// of test/helpers.bash).
var createLogged = map[string]string{
	"crio":       "Creating container: ",
	"containerd": "CreateContainer within sandbox",
}

// CreatesLogged counts the CreateContainer requests the runtime logged
// having received (Dir/daemon.log): a caller that must know a create is in
// flight waits for the count to grow.
func (r *Runtime) CreatesLogged() (int, error) {
	b, err := os.ReadFile(filepath.Join(r.Dir, "daemon.log"))
	if err != nil {
		return 0, err
	}
	return strings.Count(string(b), createLogged[r.Name]), nil
}

// Condition returns the status of the CRI condition typ and whether the
// runtime reports it at all.
func (r *Runtime) Condition(typ string) (status, found bool, err error) {
	resp, err := r.RT.Status(context.Background(), &runtimeapi.StatusRequest{})
	if err != nil {
		return false, false, err
	}
	for _, c := range resp.GetStatus().GetConditions() {
		if c.GetType() == typ {
			return c.GetStatus(), true, nil
		}
	}
	return false, false, nil
}

// Await polls cond every 20 ms until it is true, fails or timeout passes.
func Await(timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
