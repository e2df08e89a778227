package server

import (
	"context"
	"sort"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func labelsMatch(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// ListPodSandbox lists pods, filtered by ID (prefix), state and labels.
func (s *Server) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f := req.GetFilter()
	s.mu.RLock()
	sbs := make([]*Sandbox, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		sbs = append(sbs, sb)
	}
	s.mu.RUnlock()
	sort.Slice(sbs, func(i, j int) bool { return sbs[i].CreatedAt.Before(sbs[j].CreatedAt) })
	var out []*runtimeapi.PodSandbox
	for _, sb := range sbs {
		if f.GetId() != "" && !strings.HasPrefix(sb.ID, f.GetId()) {
			continue
		}
		st := sb.state()
		if f.GetState() != nil && f.GetState().State != st {
			continue
		}
		if !labelsMatch(f.GetLabelSelector(), sb.Config.Labels) {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{
			Id: sb.ID, Metadata: sb.Config.Metadata, State: st, CreatedAt: sb.CreatedAt.UnixNano(),
			Labels: sb.Config.Labels, Annotations: sb.Config.Annotations, RuntimeHandler: sb.RuntimeHandler,
		})
	}
	return &runtimeapi.ListPodSandboxResponse{Items: out}, nil
}
