package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/oci"
)

// UpdateContainerResources applies new Linux resources with `runc update`.
func (s *Server) UpdateContainerResources(ctx context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	c, err := s.lookupContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	res := req.GetLinux()
	if res == nil {
		return nil, status.Error(codes.InvalidArgument, "update: linux resources are required")
	}
	state, _, err := s.containerState(ctx, c)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "container %s: %v", c.ID, err)
	}
	if state != runtimeapi.ContainerState_CONTAINER_RUNNING && state != runtimeapi.ContainerState_CONTAINER_CREATED {
		return nil, status.Errorf(codes.FailedPrecondition, "container %s is %s: only created or running containers can be updated", c.ID, state)
	}
	sb, err := s.lookupSandbox(c.SandboxID)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "container %s: its pod is gone", c.ID)
	}
	if err := s.hooks.UpdateContainer(ctx, sb, c, res); err != nil {
		return nil, toStatus(codes.FailedPrecondition, err, "update of container %s refused", c.ID)
	}
	ores, err := oci.LinuxResources(res)
	if err != nil {
		if errors.Is(err, oci.ErrInvalidConfig) {
			return nil, status.Errorf(codes.InvalidArgument, "update container %s: %v", c.ID, err)
		}
		return nil, status.Errorf(codes.Internal, "update container %s: %v", c.ID, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := s.runtime.Update(ctx, c.ID, ores); err != nil {
		return nil, status.Errorf(codes.Internal, "update container %s: %v", c.ID, err)
	}
	c.setResources(res)
	if h, ok := s.hooks.(PostUpdateHook); ok {
		h.PostUpdateContainer(ctx, sb, c)
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}
