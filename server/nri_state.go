package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/oci"
)

// PostUpdateHook is an optional extension of Hooks: when the installed hooks
// implement it, PostUpdateContainer is called after new resources were
// applied. It is separate so that existing Hooks implementations stay valid.
type PostUpdateHook interface {
	PostUpdateContainer(ctx context.Context, sb *Sandbox, c *Container)
}

// UpdateResources applies resources to a container with `runc update`
// without calling the hooks. NRI uses it for updates that plugins request
// on their own, which must not be relayed back to the plugins.
func (s *Server) UpdateResources(ctx context.Context, id string, res *runtimeapi.LinuxContainerResources) error {
	c, err := s.lookupContainer(id)
	if err != nil {
		return err
	}
	ores, err := oci.LinuxResources(res)
	if err != nil {
		if errors.Is(err, oci.ErrInvalidConfig) {
			return status.Errorf(codes.InvalidArgument, "update container %s: %v", c.ID, err)
		}
		return status.Errorf(codes.Internal, "update container %s: %v", c.ID, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := s.runtime.Update(ctx, c.ID, ores); err != nil {
		return status.Errorf(codes.Internal, "update container %s: %v", c.ID, err)
	}
	c.setResources(res)
	return nil
}
