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

// record is what the on-disk record of a pod holds.
func (sb *Sandbox) record() podRecord {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return podRecord{
		ID: sb.ID, Name: sb.Name, RuntimeHandler: sb.RuntimeHandler, NetNSPath: sb.NetNSPath,
		CreatedAt: sb.CreatedAt, State: sb.State.String(), Metadata: sb.Config.GetMetadata(), Config: sb.Config,
	}
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
	// mu serializes lifecycle operations on one container; fieldsMu guards
	// the fields that change after creation (StartedAt, Config.Linux), so
	// status calls need not wait for a slow stop.
	mu       sync.Mutex
	fieldsMu sync.Mutex
	// stopHooked records that Hooks.StopContainer ran (guarded by mu), so
	// that it runs once whether the container was stopped or exited.
	stopHooked bool
	// exitCode and finishedAt are what the exit monitor read from the exit
	// file (guarded by fieldsMu); ContainerStatus still asks the runtime.
	exitCode   int32
	finishedAt time.Time
}

func (c *Container) setExited(code int32, at time.Time) {
	c.fieldsMu.Lock()
	c.exitCode, c.finishedAt = code, at
	c.fieldsMu.Unlock()
}

func (c *Container) startedAt() time.Time {
	c.fieldsMu.Lock()
	defer c.fieldsMu.Unlock()
	return c.StartedAt
}

func (c *Container) setStarted(t time.Time) {
	c.fieldsMu.Lock()
	c.StartedAt = t
	c.fieldsMu.Unlock()
}

func (c *Container) setResources(r *runtimeapi.LinuxContainerResources) {
	c.fieldsMu.Lock()
	defer c.fieldsMu.Unlock()
	if c.Config.Linux == nil {
		c.Config.Linux = &runtimeapi.LinuxContainerConfig{}
	}
	c.Config.Linux.Resources = r
}

// record is what the on-disk record of a container holds. The caller holds
// c.mu (stopHooked) or c is not published yet.
func (c *Container) record() ctrRecord {
	c.fieldsMu.Lock()
	defer c.fieldsMu.Unlock()
	r := ctrRecord{
		ID: c.ID, SandboxID: c.SandboxID, Name: c.Name, ImageID: c.ImageID, ImageName: c.ImageName,
		LogPath: c.LogPath, CreatedAt: c.CreatedAt, StartedAt: c.StartedAt, Pid: c.Pid,
		StopHooked: c.stopHooked, Config: c.Config, Spec: c.Spec,
	}
	if !c.finishedAt.IsZero() {
		code, fin := c.exitCode, c.finishedAt
		r.ExitCode, r.FinishedAt = &code, &fin
	}
	return r
}
