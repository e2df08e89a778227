package server

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/oci"
)

// Hooks are called around pod and container lifecycle events; the NRI
// integration implements them. An error from a Run/Create/Start/Update hook
// fails the request (a gRPC status error is returned as is) and the server
// undoes what it did; errors from Stop/Remove hooks are logged only, because
// teardown is never gated.
type Hooks interface {
	// RunPodSandbox is called after the pod's namespaces exist, before it is
	// reported ready.
	RunPodSandbox(ctx context.Context, sb *Sandbox) error
	// StopPodSandbox is called after the pod's containers are stopped.
	StopPodSandbox(ctx context.Context, sb *Sandbox) error
	// RemovePodSandbox is called before the pod's record is dropped.
	RemovePodSandbox(ctx context.Context, sb *Sandbox) error
	// CreateContainer may adjust the generated spec before the container is
	// created with the runtime.
	CreateContainer(ctx context.Context, sb *Sandbox, c *Container, spec *oci.Generator) error
	// PostCreateContainer is called after the runtime created the container.
	PostCreateContainer(ctx context.Context, sb *Sandbox, c *Container)
	// StartContainer is called before the container's process is started.
	StartContainer(ctx context.Context, sb *Sandbox, c *Container) error
	// PostStartContainer is called after the container started.
	PostStartContainer(ctx context.Context, sb *Sandbox, c *Container)
	// UpdateContainer may adjust the resources before they are applied.
	UpdateContainer(ctx context.Context, sb *Sandbox, c *Container, res *runtimeapi.LinuxContainerResources) error
	// StopContainer is called once per container after it stopped, when it
	// is stopped, its pod is stopped or it is removed, also if it had
	// exited on its own.
	StopContainer(ctx context.Context, sb *Sandbox, c *Container) error
	// RemoveContainer is called after the container was removed.
	RemoveContainer(ctx context.Context, sb *Sandbox, c *Container) error
}

// NoopHooks implements Hooks doing nothing; embed it to implement only some.
type NoopHooks struct{}

var _ Hooks = NoopHooks{}

// RunPodSandbox does nothing.
func (NoopHooks) RunPodSandbox(context.Context, *Sandbox) error { return nil }

// StopPodSandbox does nothing.
func (NoopHooks) StopPodSandbox(context.Context, *Sandbox) error { return nil }

// RemovePodSandbox does nothing.
func (NoopHooks) RemovePodSandbox(context.Context, *Sandbox) error { return nil }

// CreateContainer does nothing.
func (NoopHooks) CreateContainer(context.Context, *Sandbox, *Container, *oci.Generator) error {
	return nil
}

// PostCreateContainer does nothing.
func (NoopHooks) PostCreateContainer(context.Context, *Sandbox, *Container) {}

// StartContainer does nothing.
func (NoopHooks) StartContainer(context.Context, *Sandbox, *Container) error { return nil }

// PostStartContainer does nothing.
func (NoopHooks) PostStartContainer(context.Context, *Sandbox, *Container) {}

// UpdateContainer does nothing.
func (NoopHooks) UpdateContainer(context.Context, *Sandbox, *Container, *runtimeapi.LinuxContainerResources) error {
	return nil
}

// StopContainer does nothing.
func (NoopHooks) StopContainer(context.Context, *Sandbox, *Container) error { return nil }

// RemoveContainer does nothing.
func (NoopHooks) RemoveContainer(context.Context, *Sandbox, *Container) error { return nil }
