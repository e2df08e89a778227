package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/oci"
)

// ExecSync runs a command in a running container and returns its output.
func (s *Server) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	c, err := s.lookupContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if len(req.GetCmd()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "exec: cmd must not be empty")
	}
	if req.GetTimeout() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "exec: timeout %d must not be negative", req.Timeout)
	}
	state, _, err := s.containerState(ctx, c)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "container %s: %v", c.ID, err)
	}
	if state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, status.Errorf(codes.FailedPrecondition, "container %s is not running (%s)", c.ID, state)
	}
	res, err := s.runtime.ExecSync(ctx, c.ID, req.Cmd, time.Duration(req.GetTimeout())*time.Second)
	if err != nil {
		if errors.Is(err, oci.ErrExecTimeout) {
			return nil, status.Errorf(codes.DeadlineExceeded, "container %s: %v", c.ID, err)
		}
		return nil, status.Errorf(codes.Internal, "container %s: %v", c.ID, err)
	}
	return &runtimeapi.ExecSyncResponse{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode}, nil
}

// Exec is not implemented: nrigate has no streaming server yet.
func (s *Server) Exec(context.Context, *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return nil, status.Error(codes.Unimplemented, "Exec (streaming) is not implemented by nrigate: use ExecSync (crictl exec -s)")
}

// Attach is not implemented: nrigate has no streaming server yet.
func (s *Server) Attach(context.Context, *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return nil, status.Error(codes.Unimplemented, "Attach is not implemented by nrigate: read the container log instead (crictl logs)")
}

// PortForward is not implemented: nrigate has no streaming server yet.
func (s *Server) PortForward(context.Context, *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return nil, status.Error(codes.Unimplemented, "PortForward is not implemented by nrigate")
}
