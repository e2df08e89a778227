package server

import (
	"sync"
	"time"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Sandbox is a pod. Pods have no infra container: a pod is its config and,
// unless it uses the host network, a persistent network namespace.
type Sandbox struct {
	ID             string                       `json:"id"`
	Name           string                       `json:"name"`
	Config         *runtimeapi.PodSandboxConfig `json:"config"`
	RuntimeHandler string                       `json:"runtime_handler"`
	NetNSPath      string                       `json:"netns_path,omitempty"`
	CreatedAt      time.Time                    `json:"created_at"`
	State          runtimeapi.PodSandboxState   `json:"state"`
	mu             sync.Mutex
}

// HostNetwork reports whether the pod uses the node's network namespace.
func (sb *Sandbox) HostNetwork() bool {
	return sb.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
}

func (sb *Sandbox) state() runtimeapi.PodSandboxState {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.State
}

// Container is a container of a pod.
type Container struct {
	ID        string                      `json:"id"`
	SandboxID string                      `json:"sandbox_id"`
	Name      string                      `json:"name"`
	Config    *runtimeapi.ContainerConfig `json:"config"`
	ImageID   string                      `json:"image_id"`
	ImageName string                      `json:"image_name"`
	LogPath   string                      `json:"log_path,omitempty"`
	Spec      *rspec.Spec                 `json:"spec"`
	CreatedAt time.Time                   `json:"created_at"`
	StartedAt time.Time                   `json:"started_at"`
	Pid       int                         `json:"pid"`
	// mu serializes lifecycle operations on one container.
	mu sync.Mutex
}
