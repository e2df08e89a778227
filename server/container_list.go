package server

import (
	"context"
	"sort"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListContainers lists containers, filtered by ID (prefix), pod, state and labels.
func (s *Server) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	f := req.GetFilter()
	s.mu.RLock()
	cs := make([]*Container, 0, len(s.containers))
	for _, c := range s.containers {
		cs = append(cs, c)
	}
	s.mu.RUnlock()
	sort.Slice(cs, func(i, j int) bool { return cs[i].CreatedAt.Before(cs[j].CreatedAt) })
	out := []*runtimeapi.Container{}
	for _, c := range cs {
		if f.GetId() != "" && !strings.HasPrefix(c.ID, f.GetId()) {
			continue
		}
		if f.GetPodSandboxId() != "" && !strings.HasPrefix(c.SandboxID, f.GetPodSandboxId()) {
			continue
		}
		if !labelsMatch(f.GetLabelSelector(), c.Config.Labels) {
			continue
		}
		state, _, err := s.containerState(ctx, c)
		if err != nil {
			s.log.WithError(err).WithField("id", c.ID).Warn("container state")
		}
		if f.GetState() != nil && f.GetState().State != state {
			continue
		}
		out = append(out, &runtimeapi.Container{
			Id: c.ID, PodSandboxId: c.SandboxID, Metadata: c.Config.Metadata, Image: c.Config.Image,
			ImageRef: c.ImageID, ImageId: c.ImageID, State: state, CreatedAt: c.CreatedAt.UnixNano(),
			Labels: c.Config.Labels, Annotations: c.Config.Annotations,
		})
	}
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}
