package server

import (
	"context"
	"encoding/json"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func (s *Server) sandboxStatus(sb *Sandbox) *runtimeapi.PodSandboxStatus {
	netMode := runtimeapi.NamespaceMode_POD
	if sb.HostNetwork() {
		netMode = runtimeapi.NamespaceMode_NODE
	}
	nsOpts := sb.Config.GetLinux().GetSecurityContext().GetNamespaceOptions()
	return &runtimeapi.PodSandboxStatus{
		Id:        sb.ID,
		Metadata:  sb.Config.Metadata,
		State:     sb.state(),
		CreatedAt: sb.CreatedAt.UnixNano(),
		Network:   &runtimeapi.PodSandboxNetworkStatus{},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{
			Network: netMode, Pid: nsOpts.GetPid(), Ipc: nsOpts.GetIpc(),
		}}},
		Labels:         sb.Config.Labels,
		Annotations:    sb.Config.Annotations,
		RuntimeHandler: sb.RuntimeHandler,
	}
}

// PodSandboxStatus returns a pod's status; verbose adds the netns path.
func (s *Server) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	sb, err := s.lookupSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: s.sandboxStatus(sb)}
	if req.GetVerbose() {
		b, _ := json.Marshal(map[string]any{"netns": sb.NetNSPath, "name": sb.Name, "hostNetwork": sb.HostNetwork()})
		resp.Info = map[string]string{"info": string(b)}
	}
	return resp, nil
}
