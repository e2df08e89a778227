// Package oci runs containers with an OCI runtime (runc) supervised by
// conmon, the way CRI-O does, and generates their OCI specs from CRI configs.
package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
)

// Defaults for Config fields left empty.
const (
	// DefaultRuntimePath is the OCI runtime used when none is configured.
	DefaultRuntimePath = "/usr/sbin/runc"
	// DefaultMonitorPath is the conmon binary used when none is configured.
	DefaultMonitorPath = "/usr/bin/conmon"
	// DefaultRuntimeRoot is runc's state root used when none is configured.
	DefaultRuntimeRoot = "/run/nrigate/runc"
	// DefaultCreateTimeout bounds how long conmon may take to create a container.
	DefaultCreateTimeout = 60 * time.Second
)

// Status is a container's OCI runtime state.
type Status string

// Container states as runc reports them.
const (
	StatusCreated Status = "created"
	StatusRunning Status = "running"
	StatusStopped Status = "stopped"
	StatusPaused  Status = "paused"
	// StatusUnknown means the runtime no longer knows the container and no
	// exit file exists.
	StatusUnknown Status = "unknown"
)

// Sentinel errors; callers match them with errors.Is.
var (
	// ErrNotFound means the runtime does not know the container.
	ErrNotFound = errors.New("container not known to the runtime")
	// ErrExecTimeout means an ExecSync command outlived its timeout.
	ErrExecTimeout = errors.New("exec timed out")
)

// Config selects the binaries and directories of a Runtime.
type Config struct {
	// RuntimePath is the OCI runtime binary (runc).
	RuntimePath string
	// MonitorPath is the conmon binary.
	MonitorPath string
	// RuntimeRoot is passed to the runtime as --root.
	RuntimeRoot string
	// StateDir holds bundles, pid files, exit files and attach sockets.
	StateDir string
	// Logger receives runtime events; nil means logrus' standard logger.
	Logger logrus.FieldLogger
}

// Runtime creates and controls containers through conmon and runc.
type Runtime struct {
	cfg Config
	log logrus.FieldLogger
}

// New returns a Runtime for cfg, creating its directories.
func New(cfg Config) (*Runtime, error) {
	if cfg.RuntimePath == "" {
		cfg.RuntimePath = DefaultRuntimePath
	}
	if cfg.MonitorPath == "" {
		cfg.MonitorPath = DefaultMonitorPath
	}
	if cfg.RuntimeRoot == "" {
		cfg.RuntimeRoot = DefaultRuntimeRoot
	}
	if cfg.StateDir == "" {
		return nil, errors.New("oci: state dir must be set")
	}
	if cfg.Logger == nil {
		cfg.Logger = logrus.StandardLogger()
	}
	for _, d := range []string{cfg.RuntimeRoot, cfg.StateDir, exitDir(cfg), socketDir(cfg)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("oci: %w", err)
		}
	}
	return &Runtime{cfg: cfg, log: cfg.Logger}, nil
}

func exitDir(cfg Config) string   { return filepath.Join(cfg.StateDir, "exits") }
func socketDir(cfg Config) string { return filepath.Join(cfg.StateDir, "s") }

// ExitDir is where conmon writes a container's exit file, named by its ID
// and holding the exit code, when the container's process exits.
func (r *Runtime) ExitDir() string { return exitDir(r.cfg) }

// Config returns the effective configuration.
func (r *Runtime) Config() Config { return r.cfg }

// BundleDir is where the container's config.json and pid files live.
func (r *Runtime) BundleDir(id string) string {
	return filepath.Join(r.cfg.StateDir, "containers", id)
}

// CreateOptions describe a container to create.
type CreateOptions struct {
	// ID is the container ID (also runc's ID).
	ID string
	// Name is a human-readable name for conmon.
	Name string
	// Spec is written as the bundle's config.json.
	Spec *rspec.Spec
	// LogPath is the CRI log file conmon writes; empty means /dev/null.
	LogPath string
}

// syncMessage is what conmon writes on the sync pipe.
type syncMessage struct {
	Pid     *int   `json:"pid"`
	Data    *int   `json:"data"`
	Message string `json:"message"`
}

// Create writes the bundle and has conmon run `runc create`. It returns the
// container's init pid. On failure nothing is left behind.
func (r *Runtime) Create(ctx context.Context, o CreateOptions) (pid int, retErr error) {
	if o.ID == "" || o.Spec == nil {
		return 0, errors.New("oci: create needs an ID and a spec")
	}
	bundle := r.BundleDir(o.ID)
	if err := os.MkdirAll(filepath.Join(bundle, "persist"), 0o700); err != nil {
		return 0, fmt.Errorf("oci: bundle: %w", err)
	}
	defer func() {
		if retErr != nil {
			_ = r.runtime(context.Background(), nil, "delete", "--force", o.ID)
			_ = os.RemoveAll(bundle)
			_ = os.Remove(filepath.Join(exitDir(r.cfg), o.ID))
		}
	}()
	b, err := json.Marshal(o.Spec)
	if err != nil {
		return 0, fmt.Errorf("oci: marshal spec: %w", err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		return 0, fmt.Errorf("oci: write spec: %w", err)
	}
	logPath := o.LogPath
	if logPath == "" {
		logPath = filepath.Join(bundle, "ctr.log")
	} else if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return 0, fmt.Errorf("oci: log dir: %w", err)
	}
	name := o.Name
	if name == "" {
		name = o.ID
	}
	args := []string{
		"--api-version", "1",
		"-b", bundle,
		"-c", o.ID,
		"-u", o.ID,
		"-n", name,
		"-r", r.cfg.RuntimePath,
		"--runtime-arg", "--root=" + r.cfg.RuntimeRoot,
		"--exit-dir", exitDir(r.cfg),
		"-l", "k8s-file:" + logPath,
		"-P", filepath.Join(bundle, "conmon.pid"),
		"-p", filepath.Join(bundle, "pidfile"),
		"--persist-dir", filepath.Join(bundle, "persist"),
		"--socket-dir-path", socketDir(r.cfg),
		"--log-level", "info",
	}
	syncR, syncW, err := os.Pipe()
	if err != nil {
		return 0, fmt.Errorf("oci: sync pipe: %w", err)
	}
	defer syncR.Close()
	startR, startW, err := os.Pipe()
	if err != nil {
		syncW.Close()
		return 0, fmt.Errorf("oci: start pipe: %w", err)
	}
	cmd := exec.Command(r.cfg.MonitorPath, args...)
	cmd.Dir = bundle
	cmd.ExtraFiles = []*os.File{syncW, startR}
	cmd.Env = append(os.Environ(), "_OCI_SYNCPIPE=3", "_OCI_STARTPIPE=4")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	// conmon must outlive the daemon: its own session, so signals sent to the
	// daemon's process group do not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	syncW.Close()
	startR.Close()
	if err != nil {
		startW.Close()
		return 0, fmt.Errorf("oci: start conmon %s: %w", r.cfg.MonitorPath, err)
	}
	// Releasing the start pipe lets conmon go on to run `runc create`.
	_, _ = startW.Write([]byte{0})
	startW.Close()
	waitErr := cmd.Wait()

	msgCh := make(chan syncMessage, 1)
	errCh := make(chan error, 1)
	go func() {
		var m syncMessage
		if err := json.NewDecoder(syncR).Decode(&m); err != nil {
			errCh <- err
			return
		}
		msgCh <- m
	}()
	timer := time.NewTimer(DefaultCreateTimeout)
	defer timer.Stop()
	select {
	case m := <-msgCh:
		p := -1
		if m.Pid != nil {
			p = *m.Pid
		} else if m.Data != nil {
			p = *m.Data
		}
		if p <= 0 {
			msg := m.Message
			if msg == "" {
				msg = readRuntimeLog(bundle)
			}
			return 0, fmt.Errorf("oci: create container %s: %s", o.ID, strings.TrimSpace(msg))
		}
		r.log.WithFields(logrus.Fields{"id": o.ID, "pid": p}).Debug("container created")
		return p, nil
	case err := <-errCh:
		return 0, fmt.Errorf("oci: create container %s: conmon exited (%v) without reporting a pid (%v): %s", o.ID, waitErr, err, strings.TrimSpace(stderr.String()))
	case <-timer.C:
		return 0, fmt.Errorf("oci: create container %s: conmon gave no answer within %s", o.ID, DefaultCreateTimeout)
	case <-ctx.Done():
		return 0, fmt.Errorf("oci: create container %s: %w", o.ID, ctx.Err())
	}
}

func readRuntimeLog(bundle string) string {
	b, _ := os.ReadFile(filepath.Join(bundle, "persist", "oci-log"))
	return string(b)
}

// runtime runs the OCI runtime with --root and the given arguments.
func (r *Runtime) runtime(ctx context.Context, stdin io.Reader, args ...string) error {
	_, err := r.runtimeOutput(ctx, stdin, args...)
	return err
}

func (r *Runtime) runtimeOutput(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	full := append([]string{"--root", r.cfg.RuntimeRoot}, args...)
	cmd := exec.CommandContext(ctx, r.cfg.RuntimePath, full...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "does not exist") || strings.Contains(msg, "not found") {
			return nil, fmt.Errorf("%w: %s %s: %s", ErrNotFound, filepath.Base(r.cfg.RuntimePath), args[0], msg)
		}
		return nil, fmt.Errorf("oci: %s %s: %v: %s", filepath.Base(r.cfg.RuntimePath), strings.Join(args, " "), err, msg)
	}
	return stdout.Bytes(), nil
}

// Start runs the created container's process.
func (r *Runtime) Start(ctx context.Context, id string) error {
	return r.runtime(ctx, nil, "start", id)
}

// State is a container's runtime state.
type State struct {
	Status   Status
	Pid      int
	ExitCode int32
	// Finished is when the exit file was written (zero while running).
	Finished time.Time
}

// State returns the container's state; a container whose process exited
// carries the exit code conmon recorded.
func (r *Runtime) State(ctx context.Context, id string) (*State, error) {
	out, err := r.runtimeOutput(ctx, nil, "state", id)
	st := &State{Status: StatusUnknown}
	if err == nil {
		var s struct {
			Status string `json:"status"`
			Pid    int    `json:"pid"`
		}
		if jerr := json.Unmarshal(out, &s); jerr != nil {
			return nil, fmt.Errorf("oci: parse state of %s: %w", id, jerr)
		}
		st.Status, st.Pid = Status(s.Status), s.Pid
	} else if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if code, fin, ok := r.ExitCode(id); ok {
		st.Status, st.ExitCode, st.Finished = StatusStopped, code, fin
	} else if st.Status == StatusStopped {
		// runc saw the process go but conmon has not written the file yet.
		st.Status = StatusRunning
	}
	return st, nil
}

// ExitCode reads the exit file conmon wrote for id.
func (r *Runtime) ExitCode(id string) (int32, time.Time, bool) {
	p := filepath.Join(exitDir(r.cfg), id)
	b, err := os.ReadFile(p)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return 0, time.Time{}, false
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, time.Time{}, false
	}
	var fin time.Time
	if fi, err := os.Stat(p); err == nil {
		fin = fi.ModTime()
	}
	return int32(code), fin, true
}

// Stop sends SIGTERM (or the image's stop signal), waits up to timeout for
// the exit file and then kills the container.
func (r *Runtime) Stop(ctx context.Context, id string, timeout time.Duration, signal string) error {
	if _, _, ok := r.ExitCode(id); ok {
		return nil
	}
	if signal == "" {
		signal = "TERM"
	}
	if timeout > 0 {
		if err := r.runtime(ctx, nil, "kill", id, signal); err != nil && !errors.Is(err, ErrNotFound) {
			r.log.WithError(err).WithField("id", id).Warn("stop signal failed, killing")
		} else if r.waitExit(ctx, id, timeout) {
			return nil
		}
	}
	if err := r.runtime(ctx, nil, "kill", "--all", id, "KILL"); err != nil {
		if errors.Is(err, ErrNotFound) {
			// Deleted already: nothing is left to stop.
			return nil
		}
		return err
	}
	if !r.waitExit(ctx, id, 10*time.Second) {
		return fmt.Errorf("oci: container %s did not exit after SIGKILL", id)
	}
	return nil
}

func (r *Runtime) waitExit(ctx context.Context, id string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if _, _, ok := r.ExitCode(id); ok {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// Delete removes the container from the runtime and deletes its bundle.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	if err := r.runtime(ctx, nil, "delete", "--force", id); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	_ = os.Remove(filepath.Join(exitDir(r.cfg), id))
	// conmon makes a directory per container for its attach socket; it
	// would pile up under the runroot without this.
	_ = os.RemoveAll(filepath.Join(socketDir(r.cfg), id))
	return os.RemoveAll(r.BundleDir(id))
}

// ExecResult is the outcome of ExecSync.
type ExecResult struct {
	Stdout, Stderr []byte
	ExitCode       int32
}

// ExecSync runs cmd in the container and waits for it, up to timeout (0 means
// no limit).
func (r *Runtime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (*ExecResult, error) {
	if len(cmd) == 0 {
		return nil, errors.New("oci: exec needs a command")
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	pidFile, err := os.CreateTemp(r.BundleDir(id), "exec-*.pid")
	if err != nil {
		return nil, fmt.Errorf("oci: exec in %s: %w", id, err)
	}
	pidFile.Close()
	defer os.Remove(pidFile.Name())
	args := append([]string{"--root", r.cfg.RuntimeRoot, "exec", "--pid-file", pidFile.Name(), id}, cmd...)
	c := exec.CommandContext(ctx, r.cfg.RuntimePath, args...)
	// On timeout kill the exec'd process itself: killing runc alone would
	// leave it running inside the container.
	c.Cancel = func() error {
		if b, err := os.ReadFile(pidFile.Name()); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		return c.Process.Kill()
	}
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err = c.Run()
	res := &ExecResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if ctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("%w after %s: %v", ErrExecTimeout, timeout, cmd)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.ExitCode = int32(ee.ExitCode())
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("oci: exec in %s: %w", id, err)
	}
	return res, nil
}

// Update applies new resources with `runc update --resources -`.
func (r *Runtime) Update(ctx context.Context, id string, res *rspec.LinuxResources) error {
	b, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("oci: marshal resources: %w", err)
	}
	return r.runtime(ctx, bytes.NewReader(b), "update", "--resources", "-", id)
}
