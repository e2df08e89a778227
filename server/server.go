// Package server implements the CRI RuntimeService and ImageService of
// nrigate on internal/oci (conmon + runc) and internal/storage, one file per
// call group as in CRI-O.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/oci"
	"github.com/nrigate/nrigate/internal/storage"
)

// Defaults for Config fields left empty.
const (
	// DefaultListen is the CRI socket.
	DefaultListen = "/var/run/nrigate/nrigate.sock"
	// DefaultRuntimeName is the runtime handler name of the default runtime.
	DefaultRuntimeName = "runc"
	// RuntimeName is what Version reports.
	RuntimeName = "nrigate"
	// RuntimeAPIVersion is the CRI API version served.
	RuntimeAPIVersion = "v1"
	// DefaultShutdownGrace is how long Stop lets in-flight requests finish.
	DefaultShutdownGrace = 5 * time.Second
)

// Config is what the CRI server needs from the daemon configuration.
type Config struct {
	// Listen is the unix socket path of the CRI API.
	Listen string `json:"listen"`
	// Root and RunRoot are the persistent and transient state directories.
	Root    string `json:"root"`
	RunRoot string `json:"runroot"`
	// StorageDriver forces a graph driver; empty means overlay, falling back to vfs.
	StorageDriver  string   `json:"storage_driver"`
	StorageOptions []string `json:"storage_option"`
	// RuntimeName is the default runtime handler; "" is accepted as it too.
	RuntimeName string `json:"default_runtime"`
	// RuntimePath, MonitorPath and RuntimeRoot select runc, conmon and runc's --root.
	RuntimePath string `json:"runtime_path"`
	MonitorPath string `json:"monitor_path"`
	RuntimeRoot string `json:"runtime_root"`
	// Version is reported by Version.
	Version string `json:"-"`
}

// Option configures a Server.
type Option func(*Server) error

// WithHooks installs hooks called around pod and container lifecycle events.
func WithHooks(h Hooks) Option {
	return func(s *Server) error {
		if h == nil {
			return errors.New("server: nil hooks")
		}
		s.hooks = h
		return nil
	}
}

// WithStatusConditions adds runtime conditions to Status. A returned
// condition whose type is RuntimeReady or NetworkReady replaces the default.
func WithStatusConditions(f func() []*runtimeapi.RuntimeCondition) Option {
	return func(s *Server) error { s.conditions = f; return nil }
}

// WithVerboseInfo adds entries to the verbose Status info (values are JSON).
func WithVerboseInfo(f func() map[string]string) Option {
	return func(s *Server) error { s.verboseInfo = f; return nil }
}

// WithEffectiveConfig sets what verbose Status reports under "config"
// (marshalled as JSON); by default it is the server Config.
func WithEffectiveConfig(v any) Option {
	return func(s *Server) error { s.effective = v; return nil }
}

// WithLogger sets the logger.
func WithLogger(l logrus.FieldLogger) Option {
	return func(s *Server) error { s.log = l; return nil }
}

// Server is the CRI server.
type Server struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	cfg         Config
	log         logrus.FieldLogger
	hooks       Hooks
	conditions  func() []*runtimeapi.RuntimeCondition
	verboseInfo func() map[string]string
	effective   any

	store   *storage.Store
	runtime *oci.Runtime

	mu         sync.RWMutex
	sandboxes  map[string]*Sandbox
	containers map[string]*Container
	names      map[string]string // reserved pod and container names -> ID

	grpc     *grpc.Server
	listener net.Listener
	// exits reports containers exiting by themselves to the hooks.
	exits *exitMonitor
}

// New opens storage and the runtime and returns a Server ready to Serve.
func New(cfg Config, opts ...Option) (*Server, error) {
	s := &Server{
		cfg: cfg, log: logrus.StandardLogger(), hooks: NoopHooks{},
		sandboxes: map[string]*Sandbox{}, containers: map[string]*Container{}, names: map[string]string{},
	}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	if s.cfg.Listen == "" {
		s.cfg.Listen = DefaultListen
	}
	if s.cfg.RuntimeName == "" {
		s.cfg.RuntimeName = DefaultRuntimeName
	}
	if s.cfg.Root == "" || s.cfg.RunRoot == "" {
		return nil, errors.New("server: root and runroot must be set")
	}
	if s.effective == nil {
		s.effective = s.cfg
	}
	st, err := storage.Open(storage.Options{
		Root: s.cfg.Root, RunRoot: s.cfg.RunRoot, Driver: s.cfg.StorageDriver,
		DriverOptions: s.cfg.StorageOptions, Logger: s.log,
	})
	if err != nil {
		return nil, err
	}
	rt, err := oci.New(oci.Config{
		RuntimePath: s.cfg.RuntimePath, MonitorPath: s.cfg.MonitorPath, RuntimeRoot: s.cfg.RuntimeRoot,
		StateDir: filepath.Join(s.cfg.RunRoot, "nrigate"), Logger: s.log,
	})
	if err != nil {
		_ = st.Shutdown()
		return nil, err
	}
	s.store, s.runtime = st, rt
	if err := os.MkdirAll(s.recordDir(), 0o700); err != nil {
		_ = st.Shutdown()
		return nil, fmt.Errorf("server: %w", err)
	}
	// Recovery comes before the exit monitor, whose first scan then reports
	// the recovered containers that exited while no daemon ran.
	stats, err := s.recoverState(context.Background())
	if err != nil {
		_ = st.Shutdown()
		return nil, err
	}
	if stats != (RecoveryStats{}) {
		s.log.WithFields(logrus.Fields{
			"pods": stats.Pods, "containers": stats.Containers,
			"cleaned_pods": stats.CleanedPods, "cleaned_containers": stats.CleanedContainers,
		}).Info("recovered state")
	}
	if err := s.startExitMonitor(); err != nil {
		_ = st.Shutdown()
		return nil, err
	}
	return s, nil
}

// Config returns the effective server configuration.
func (s *Server) Config() Config { return s.cfg }

// Listen binds the configured unix socket, replacing a stale one, so that
// a bad socket path fails the daemon's start rather than a background Serve.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener != nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(s.cfg.Listen), 0o755); err != nil {
		return fmt.Errorf("server: socket dir: %w", err)
	}
	if err := os.Remove(s.cfg.Listen); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("server: remove stale socket: %w", err)
	}
	l, err := net.Listen("unix", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("server: listen %s: %w", s.cfg.Listen, err)
	}
	s.listener = l
	s.grpc = grpc.NewServer(grpc.UnaryInterceptor(s.recoverInterceptor))
	runtimeapi.RegisterRuntimeServiceServer(s.grpc, s)
	runtimeapi.RegisterImageServiceServer(s.grpc, s)
	return nil
}

// Serve listens (unless Listen was called) and serves until Stop.
func (s *Server) Serve() error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.mu.RLock()
	g, l := s.grpc, s.listener
	s.mu.RUnlock()
	s.log.WithField("socket", s.cfg.Listen).Info("CRI server listening")
	if err := g.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("server: serve: %w", err)
	}
	return nil
}

// Stop stops serving and the exit monitor and releases storage.
// Containers keep running.
func (s *Server) Stop() {
	s.mu.RLock()
	g := s.grpc
	s.mu.RUnlock()
	if g != nil {
		// In-flight requests get a grace period; a long ExecSync must not
		// hold the daemon's shutdown.
		stopped := make(chan struct{})
		go func() { g.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(DefaultShutdownGrace):
			g.Stop()
		}
	}
	_ = os.Remove(s.cfg.Listen)
	s.stopExitMonitor()
	if err := s.store.Shutdown(); err != nil {
		s.log.WithError(err).Warn("storage shutdown")
	}
}

// recoverInterceptor turns a panic in a handler into an Internal error, so
// one bad request cannot take the daemon down.
func (s *Server) recoverInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.WithField("method", info.FullMethod).Errorf("panic in CRI handler: %v", r)
			err = status.Errorf(codes.Internal, "%s: internal error: %v", info.FullMethod, r)
		}
	}()
	resp, err = h(ctx, req)
	if err != nil {
		s.log.WithField("method", info.FullMethod).WithError(err).Debug("CRI request failed")
	}
	return resp, err
}

func newID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// reserveName reserves a unique pod or container name.
func (s *Server) reserveName(name, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if other, ok := s.names[name]; ok {
		return status.Errorf(codes.AlreadyExists, "name %q is already reserved for %s", name, other)
	}
	s.names[name] = id
	return nil
}

func (s *Server) releaseName(name string) {
	s.mu.Lock()
	delete(s.names, name)
	s.mu.Unlock()
}

func (s *Server) recordDir() string { return filepath.Join(s.cfg.RunRoot, "nrigate", "records") }

// writeRecord keeps the on-disk record of a pod or container, from which a
// restarted daemon recovers it (see recover.go).
func (s *Server) writeRecord(kind, id string, v any) {
	if err := s.writeRecordErr(kind, id, v); err != nil {
		s.log.WithError(err).WithField("id", id).Warn("cannot write state record")
	}
}

func (s *Server) removeRecord(kind, id string) {
	_ = os.Remove(filepath.Join(s.recordDir(), kind+"-"+id+".json"))
}

// lookupSandbox finds a pod by full ID or unique prefix.
func (s *Server) lookupSandbox(id string) (*Sandbox, error) {
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "pod sandbox ID must not be empty")
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if sb, ok := s.sandboxes[id]; ok {
		return sb, nil
	}
	var found *Sandbox
	for k, sb := range s.sandboxes {
		if len(id) < len(k) && k[:len(id)] == id {
			if found != nil {
				return nil, status.Errorf(codes.InvalidArgument, "pod sandbox ID prefix %q is ambiguous", id)
			}
			found = sb
		}
	}
	if found == nil {
		return nil, status.Errorf(codes.NotFound, "pod sandbox %q not found", id)
	}
	return found, nil
}

// lookupContainer finds a container by full ID or unique prefix.
func (s *Server) lookupContainer(id string) (*Container, error) {
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "container ID must not be empty")
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if c, ok := s.containers[id]; ok {
		return c, nil
	}
	var found *Container
	for k, c := range s.containers {
		if len(id) < len(k) && k[:len(id)] == id {
			if found != nil {
				return nil, status.Errorf(codes.InvalidArgument, "container ID prefix %q is ambiguous", id)
			}
			found = c
		}
	}
	if found == nil {
		return nil, status.Errorf(codes.NotFound, "container %q not found", id)
	}
	return found, nil
}

// toStatus keeps gRPC status errors (e.g. from hooks) and wraps others.
func toStatus(code codes.Code, err error, format string, args ...any) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Errorf(code, "%s: %v", fmt.Sprintf(format, args...), err)
}

// Sandboxes returns the current pods (for NRI synchronization).
func (s *Server) Sandboxes() []*Sandbox {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Sandbox, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		out = append(out, sb)
	}
	return out
}

// Containers returns the current containers (for NRI synchronization).
func (s *Server) Containers() []*Container {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Container, 0, len(s.containers))
	for _, c := range s.containers {
		out = append(out, c)
	}
	return out
}

// ContainerState returns a container's CRI state and, when it exited, its
// exit code.
func (s *Server) ContainerState(ctx context.Context, id string) (runtimeapi.ContainerState, int32, error) {
	c, err := s.lookupContainer(id)
	if err != nil {
		return runtimeapi.ContainerState_CONTAINER_UNKNOWN, 0, err
	}
	state, st, err := s.containerState(ctx, c)
	if err != nil || st == nil {
		return state, 0, err
	}
	return state, st.ExitCode, nil
}
