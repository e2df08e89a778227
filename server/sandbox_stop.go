package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/oci"
)

// StopPodSandbox kills the pod's containers and removes its network
// namespace. It is idempotent: an unknown pod is not an error.
func (s *Server) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	sb, err := s.lookupSandbox(req.GetPodSandboxId())
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return &runtimeapi.StopPodSandboxResponse{}, nil
		}
		return nil, err
	}
	if err := s.stopSandbox(ctx, sb); err != nil {
		return nil, err
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (s *Server) stopSandbox(ctx context.Context, sb *Sandbox) error {
	for _, c := range s.podContainers(sb.ID) {
		if err := s.stopContainer(ctx, c, 0); err != nil {
			return status.Errorf(codes.Internal, "stop pod %s: container %s: %v", sb.ID, c.ID, err)
		}
	}
	sb.mu.Lock()
	wasReady := sb.State == runtimeapi.PodSandboxState_SANDBOX_READY
	sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	sb.mu.Unlock()
	if sb.NetNSPath != "" {
		if err := oci.DeleteNetNS(sb.ID); err != nil {
			return status.Errorf(codes.Internal, "stop pod %s: %v", sb.ID, err)
		}
	}
	if wasReady {
		if err := s.hooks.StopPodSandbox(ctx, sb); err != nil {
			s.log.WithError(err).WithField("pod", sb.ID).Warn("StopPodSandbox hook failed")
		}
		s.writeRecord("pod", sb.ID, sb.record())
	}
	return nil
}

func (s *Server) podContainers(podID string) []*Container {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*Container
	for _, c := range s.containers {
		if c.SandboxID == podID {
			out = append(out, c)
		}
	}
	return out
}
