package server

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/oci"
)

// StartContainer starts a created container.
func (s *Server) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	c, err := s.lookupContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := s.runtime.State(ctx, c.ID)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "container %s: %v", c.ID, err)
	}
	if st.Status != oci.StatusCreated {
		return nil, status.Errorf(codes.FailedPrecondition, "container %s is %s, not created: it can only be started once", c.ID, st.Status)
	}
	sb, err := s.lookupSandbox(c.SandboxID)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "container %s: its pod is gone", c.ID)
	}
	if err := s.hooks.StartContainer(ctx, sb, c); err != nil {
		return nil, toStatus(codes.FailedPrecondition, err, "start of container %s refused", c.ID)
	}
	if err := s.runtime.Start(ctx, c.ID); err != nil {
		return nil, status.Errorf(codes.Internal, "start container %s: %v", c.ID, err)
	}
	c.setStarted(time.Now())
	s.writeRecord("ctr", c.ID, c.record())
	s.hooks.PostStartContainer(ctx, sb, c)
	return &runtimeapi.StartContainerResponse{}, nil
}
