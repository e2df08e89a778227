// Package testrig runs real NRI plugins against a real upstream adaptation
// for the pkg/nripolicy tests: it builds and starts the nri-faulty plugin as
// a subprocess, records the adaptation's metrics calls and builds requests.
// It imports only the standard library, NRI and ttrpc.
package testrig

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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"
)

const (
	// ActedEnv is the env var nri-faulty injects into containers it acted on.
	ActedEnv = "NRI_FAULTY_ACTED"
	// ActedAnnotation is the annotation nri-faulty injects into containers it acted on.
	ActedAnnotation = "nri-faulty.nrigate.io/acted"
)

type discardLogger struct{}

func (discardLogger) Debugf(context.Context, string, ...any) {}
func (discardLogger) Infof(context.Context, string, ...any)  {}
func (discardLogger) Warnf(context.Context, string, ...any)  {}
func (discardLogger) Errorf(context.Context, string, ...any) {}

var quietOnce sync.Once

// QuietNRILog silences upstream NRI's logging, unless NRIGATE_TEST_NRILOG
// is set. Upstream's logger is a global without a lock: it is set once,
// before the first adaptation starts.
func QuietNRILog() {
	quietOnce.Do(func() {
		if os.Getenv("NRIGATE_TEST_NRILOG") == "" {
			nrilog.Set(discardLogger{})
		}
	})
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// FaultyBinary returns the nri-faulty plugin binary: $NRI_FAULTY_BIN if
// set (make builds bin/nri-faulty), otherwise it builds
// contrib/plugins/nri-faulty of the repository that holds this module,
// once per test process.
func FaultyBinary() (string, error) {
	if bin := os.Getenv("NRI_FAULTY_BIN"); bin != "" {
		return bin, nil
	}
	buildOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			buildErr = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		// This module is pkg/nripolicy of the nrigate repository; the
		// plugin belongs to the root module two levels up.
		root := filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "..", "..")
		dir, err := os.MkdirTemp("", "nri-faulty-bin")
		if err != nil {
			buildErr = err
			return
		}
		bin := filepath.Join(dir, "nri-faulty")
		cmd := exec.Command("go", "build", "-o", bin, "./contrib/plugins/nri-faulty")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building nri-faulty in %s: %v\n%s", root, err, out)
			return
		}
		buildBin = bin
	})
	return buildBin, buildErr
}

// RemoveBuilt removes the nri-faulty binary FaultyBinary built, if any.
// Test mains call it once every test has run.
func RemoveBuilt() {
	if buildBin != "" {
		_ = os.RemoveAll(filepath.Dir(buildBin))
	}
}

// SocketDir returns a new short temporary directory for unix sockets
// (socket paths must be shorter than 108 bytes).
func SocketDir() (string, error) { return os.MkdirTemp("", "nrig") }

// Faulty is a running nri-faulty subprocess.
type Faulty struct {
	Name    string
	Idx     string
	Log     string
	Control string
	Cmd     *exec.Cmd

	readyC  chan time.Time
	exitedC chan struct{}
	readyAt atomic.Pointer[time.Time]
	err     error
}

// StartFaulty starts bin as plugin idx-name on sock with extra flags.
// Logs and the control file live in dir. It does not wait for readiness.
func StartFaulty(bin, dir, sock, name, idx string, args ...string) (*Faulty, error) {
	f := &Faulty{
		Name:    name,
		Idx:     idx,
		Log:     filepath.Join(dir, fmt.Sprintf("%s-%s.log", idx, name)),
		Control: filepath.Join(dir, fmt.Sprintf("%s-%s.control", idx, name)),
		readyC:  make(chan time.Time, 1),
		exitedC: make(chan struct{}),
	}
	argv := append([]string{"--name", name, "--idx", idx, "--socket", sock,
		"--log-file", f.Log, "--control", f.Control}, args...)
	f.Cmd = exec.Command(bin, argv...)
	stdout, err := f.Cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := f.Cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if ts, ok := strings.CutPrefix(line, "ready "); ok {
				t, err := time.Parse(time.RFC3339Nano, ts)
				if err != nil {
					t = time.Now()
				}
				f.readyAt.Store(&t)
				select {
				case f.readyC <- t:
				default:
				}
			}
		}
		f.err = f.Cmd.Wait()
		close(f.exitedC)
	}()
	return f, nil
}

// WaitReady waits until the plugin printed "ready" after its Synchronize
// and returns the time it printed, taken just before it answered.
func (f *Faulty) WaitReady(timeout time.Duration) (time.Time, error) {
	select {
	case t := <-f.readyC:
		f.readyC <- t
		return t, nil
	case <-f.exitedC:
		return time.Time{}, fmt.Errorf("plugin %s-%s exited before ready (%v); log:\n%s", f.Idx, f.Name, f.err, f.LogText())
	case <-time.After(timeout):
		return time.Time{}, fmt.Errorf("plugin %s-%s not ready after %s; log:\n%s", f.Idx, f.Name, timeout, f.LogText())
	}
}

// ReadyAt returns when the plugin reported ready, or the zero time.
func (f *Faulty) ReadyAt() time.Time {
	if t := f.readyAt.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

// Exited is closed when the process has exited and was reaped.
func (f *Faulty) Exited() <-chan struct{} { return f.exitedC }

// Kill kills the process with SIGKILL and waits until it was reaped.
func (f *Faulty) Kill() {
	_ = f.Cmd.Process.Signal(syscall.SIGKILL)
	<-f.exitedC
}

// SetMode writes the control file ("ok", "hang 2s", "crash-during", ...).
func (f *Faulty) SetMode(mode string) error {
	tmp := f.Control + ".tmp"
	if err := os.WriteFile(tmp, []byte(mode+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, f.Control)
}

// LogText returns the plugin's log so far.
func (f *Faulty) LogText() string {
	b, _ := os.ReadFile(f.Log)
	return string(b)
}

// ActedOn reports whether the plugin logged that it acted on event for the pod uid.
func (f *Faulty) ActedOn(event, uid string) bool {
	return containsLine(f.LogText(), "acted "+event+" ", "uid="+uid+" ")
}

func containsLine(text, a, b string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, a) && strings.Contains(l, b) {
			return true
		}
	}
	return false
}

// Acted reports whether a CreateContainer response carries plugin name's
// NRI_FAULTY_ACTED env adjustment.
func Acted(rsp *api.CreateContainerResponse, name string) bool {
	for _, e := range rsp.GetAdjust().GetEnv() {
		if e.GetKey() == ActedEnv && e.GetValue() == name {
			return true
		}
	}
	return false
}

var seq atomic.Int64

// Pod returns a pod with a unique name and uid in namespace ns.
func Pod(ns string, labels, annotations map[string]string) *api.PodSandbox {
	n := seq.Add(1)
	return &api.PodSandbox{
		Id:          fmt.Sprintf("pod-%d", n),
		Name:        fmt.Sprintf("pod-%d", n),
		Uid:         fmt.Sprintf("uid-%d", n),
		Namespace:   ns,
		Labels:      labels,
		Annotations: annotations,
	}
}

// Container returns a container of pod with a unique id.
func Container(pod *api.PodSandbox, name string) *api.Container {
	n := seq.Add(1)
	return &api.Container{
		Id:           fmt.Sprintf("ctr-%d", n),
		PodSandboxId: pod.GetId(),
		Name:         name,
	}
}

// NewAdaptation creates an adaptation named "test" on sock with a sync
// function that reports no pods and containers, passing ctx values of
// syncCtx (if not nil) to the sync callback. It is not started.
func NewAdaptation(sock string, syncCtx func(context.Context) context.Context, opts ...adaptation.Option) (*adaptation.Adaptation, error) {
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error {
		if syncCtx != nil {
			ctx = syncCtx(ctx)
		}
		_, err := cb(ctx, nil, nil)
		return err
	}
	updateFn := func(context.Context, []*adaptation.ContainerUpdate) ([]*adaptation.ContainerUpdate, error) {
		return nil, nil
	}
	return adaptation.New("test", "v0.0.1", syncFn, updateFn,
		append([]adaptation.Option{adaptation.WithSocketPath(sock)}, opts...)...)
}

// Call is one call to the Metrics interface.
type Call struct {
	Kind   string // "latency", "invocation", "adjustments", "count"
	Plugin string
	Op     string
	Err    error
	Count  int
	At     time.Time
}

// Recorder is an adaptation.Metrics that records every call.
type Recorder struct {
	mu    sync.Mutex
	calls []Call
}

var _ adaptation.Metrics = (*Recorder)(nil)

func (r *Recorder) add(c Call) {
	c.At = time.Now()
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

// RecordPluginInvocation implements adaptation.Metrics.
func (r *Recorder) RecordPluginInvocation(plugin, op string, err error) {
	r.add(Call{Kind: "invocation", Plugin: plugin, Op: op, Err: err})
}

// RecordPluginLatency implements adaptation.Metrics.
func (r *Recorder) RecordPluginLatency(plugin, op string, _ time.Duration) {
	r.add(Call{Kind: "latency", Plugin: plugin, Op: op})
}

// RecordPluginAdjustments implements adaptation.Metrics.
func (r *Recorder) RecordPluginAdjustments(plugin, op string, _ *adaptation.ContainerAdjustment, _, _ int) {
	r.add(Call{Kind: "adjustments", Plugin: plugin, Op: op})
}

// UpdatePluginCount implements adaptation.Metrics.
func (r *Recorder) UpdatePluginCount(n int) { r.add(Call{Kind: "count", Count: n}) }

// Calls returns a copy of the recorded calls.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// Reset forgets the recorded calls.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.calls = nil
	r.mu.Unlock()
}

// Filter returns the recorded calls of kind for plugin and op ("" matches any).
func (r *Recorder) Filter(kind, plugin, op string) []Call {
	var out []Call
	for _, c := range r.Calls() {
		if (kind == "" || c.Kind == kind) && (plugin == "" || c.Plugin == plugin) && (op == "" || c.Op == op) {
			out = append(out, c)
		}
	}
	return out
}

// Eventually polls cond every 2 ms until it holds or timeout passes.
func Eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ErrTimeout is returned by helpers that gave up waiting.
var ErrTimeout = errors.New("testrig: timed out")
