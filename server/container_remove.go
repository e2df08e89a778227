package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RemoveContainer kills the container if it still runs and removes it with
// its root filesystem. An unknown container is not an error.
func (s *Server) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	c, err := s.lookupContainer(req.GetContainerId())
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return &runtimeapi.RemoveContainerResponse{}, nil
		}
		return nil, err
	}
	if err := s.removeContainer(ctx, c); err != nil {
		return nil, err
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (s *Server) removeContainer(ctx context.Context, c *Container) error {
	if err := s.stopContainer(ctx, c, 0); err != nil {
		return status.Errorf(codes.Internal, "remove container %s: stop: %v", c.ID, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := s.runtime.Delete(ctx, c.ID); err != nil {
		return status.Errorf(codes.Internal, "remove container %s: %v", c.ID, err)
	}
	if err := s.store.DeleteContainer(c.ID); err != nil {
		return status.Errorf(codes.Internal, "remove container %s: %v", c.ID, err)
	}
	s.mu.Lock()
	delete(s.containers, c.ID)
	delete(s.names, c.Name)
	s.mu.Unlock()
	s.removeRecord("ctr", c.ID)
	if sb, err := s.lookupSandbox(c.SandboxID); err == nil {
		if err := s.hooks.RemoveContainer(ctx, sb, c); err != nil {
			s.log.WithError(err).WithField("id", c.ID).Warn("RemoveContainer hook failed")
		}
	}
	return nil
}
