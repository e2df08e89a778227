package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RemovePodSandbox stops the pod if needed and removes it with its
// containers. An unknown pod is not an error (the call is idempotent).
func (s *Server) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	sb, err := s.lookupSandbox(req.GetPodSandboxId())
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return &runtimeapi.RemovePodSandboxResponse{}, nil
		}
		return nil, err
	}
	if err := s.stopSandbox(ctx, sb); err != nil {
		return nil, err
	}
	for _, c := range s.podContainers(sb.ID) {
		if err := s.removeContainer(ctx, c); err != nil {
			return nil, err
		}
	}
	if err := s.hooks.RemovePodSandbox(ctx, sb); err != nil {
		s.log.WithError(err).WithField("pod", sb.ID).Warn("RemovePodSandbox hook failed")
	}
	s.mu.Lock()
	delete(s.sandboxes, sb.ID)
	delete(s.names, sb.Name)
	s.mu.Unlock()
	s.removeRecord("pod", sb.ID)
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}
