package server

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/oci"
)

func (s *Server) containerState(ctx context.Context, c *Container) (runtimeapi.ContainerState, *oci.State, error) {
	st, err := s.runtime.State(ctx, c.ID)
	if err != nil {
		return runtimeapi.ContainerState_CONTAINER_UNKNOWN, nil, err
	}
	switch st.Status {
	case oci.StatusCreated:
		return runtimeapi.ContainerState_CONTAINER_CREATED, st, nil
	case oci.StatusRunning, oci.StatusPaused:
		return runtimeapi.ContainerState_CONTAINER_RUNNING, st, nil
	case oci.StatusStopped:
		return runtimeapi.ContainerState_CONTAINER_EXITED, st, nil
	}
	return runtimeapi.ContainerState_CONTAINER_UNKNOWN, st, nil
}

// ContainerStatus returns a container's state, times and exit code.
func (s *Server) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	c, err := s.lookupContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	state, st, err := s.containerState(ctx, c)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "container %s: %v", c.ID, err)
	}
	cs := &runtimeapi.ContainerStatus{
		Id: c.ID, Metadata: c.Config.Metadata, State: state, CreatedAt: c.CreatedAt.UnixNano(),
		Image: c.Config.Image, ImageRef: c.ImageID, ImageId: c.ImageID,
		Labels: c.Config.Labels, Annotations: c.Config.Annotations, Mounts: c.Config.Mounts, LogPath: c.LogPath,
	}
	if t := c.startedAt(); !t.IsZero() {
		cs.StartedAt = t.UnixNano()
	}
	if state == runtimeapi.ContainerState_CONTAINER_EXITED {
		cs.ExitCode = st.ExitCode
		cs.FinishedAt = st.Finished.UnixNano()
		switch {
		case st.ExitCode == 0:
			cs.Reason = "Completed"
		case st.ExitCode == 137:
			cs.Reason, cs.Message = "Error", "killed (SIGKILL)"
		default:
			cs.Reason = "Error"
		}
	}
	resp := &runtimeapi.ContainerStatusResponse{Status: cs}
	if req.GetVerbose() {
		pid := 0
		if st != nil {
			pid = st.Pid
		}
		b, _ := json.Marshal(map[string]any{"sandboxID": c.SandboxID, "pid": pid, "runtimeSpec": c.Spec, "name": c.Name})
		resp.Info = map[string]string{"info": string(b)}
	}
	return resp, nil
}
