package server

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/oci"
)

// StopContainer sends SIGTERM, waits up to the timeout and then kills. A
// stopped container is not an error.
func (s *Server) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	c, err := s.lookupContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if req.GetTimeout() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "stop timeout %d must not be negative", req.Timeout)
	}
	if err := s.stopContainer(ctx, c, time.Duration(req.GetTimeout())*time.Second); err != nil {
		return nil, status.Errorf(codes.Internal, "stop container %s: %v", c.ID, err)
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

func (s *Server) stopContainer(ctx context.Context, c *Container, timeout time.Duration) error {
	after, err := s.stopContainerLocked(ctx, c, timeout)
	if after != nil {
		after()
	}
	return err
}

// stopContainerLocked stops c under its lock and returns what the stop hook
// left to do once the lock is released.
func (s *Server) stopContainerLocked(ctx context.Context, c *Container, timeout time.Duration) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := s.runtime.State(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	switch st.Status {
	case oci.StatusStopped, oci.StatusUnknown:
		// Exited on its own (or never made it): nothing to signal, but the
		// hooks still hear of the stop once.
	case oci.StatusCreated:
		// Never started: there is no process to signal gracefully.
		timeout = 0
		fallthrough
	default:
		if err := s.runtime.Stop(ctx, c.ID, timeout, ""); err != nil {
			return nil, err
		}
	}
	return s.stopHookOnce(ctx, c), nil
}

// stopHookOnce calls Hooks.StopContainer unless it already ran for c, so
// that the plugins hear of a stop once whether the server stopped the
// container or the exit monitor saw it exit by itself. The caller holds c.mu
// (never s.mu: the hook may be slow) and must call the returned func, if
// any, after releasing c.mu: it applies what the hook has to do to other
// containers, whose locks a concurrent stop may hold while it waits for c's.
func (s *Server) stopHookOnce(ctx context.Context, c *Container) (after func()) {
	if c.stopHooked {
		return nil
	}
	c.stopHooked = true
	if sb, err := s.lookupSandbox(c.SandboxID); err == nil {
		var err error
		if after, err = s.hooks.StopContainer(ctx, sb, c); err != nil {
			s.log.WithError(err).WithField("id", c.ID).Warn("StopContainer hook failed")
		}
	}
	// Recorded after the hook ran, so that a restarted daemon neither
	// repeats it nor, if killed during it, skips it.
	s.writeRecord(recordContainer, c.ID, c.record())
	return after
}
