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
	// published. When it returns no error and a non-nil finish, the server
	// calls finish exactly once: with nil once the pod is in its state (so
	// that a plugin synchronizing from then on sees it), or with the error
	// that failed the request after the hook (the hook undoes its relay).
	// Until then the hook may block plugin synchronization; the server takes
	// no lock a synchronization needs in between.
	RunPodSandbox(ctx context.Context, sb *Sandbox) (finish func(error), err error)
	// StopPodSandbox is called after the pod's containers are stopped.
	StopPodSandbox(ctx context.Context, sb *Sandbox) error
	// RemovePodSandbox is called before the pod's record is dropped.
	RemovePodSandbox(ctx context.Context, sb *Sandbox) error
	// CreateContainer may adjust the generated spec before the container is
	// created with the runtime. finish is called as for RunPodSandbox: with
	// nil once the container is published, or with the error that failed
	// the create after the hook (runtime create, commit).
	CreateContainer(ctx context.Context, sb *Sandbox, c *Container, spec *oci.Generator) (finish func(error), err error)
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
	// exited on its own. The server holds c's lock during the call, so the
	// hook must not touch other containers (their locks may be held by
	// stops waiting for this one): what it has to do to them goes into
	// after, which the server calls once it released c's lock.
	StopContainer(ctx context.Context, sb *Sandbox, c *Container) (after func(), err error)
	// RemoveContainer is called after the container was removed.
	RemoveContainer(ctx context.Context, sb *Sandbox, c *Container) error
}

// NoopHooks implements Hooks doing nothing; embed it to implement only some.
type NoopHooks struct{}

var _ Hooks = NoopHooks{}

// RunPodSandbox does nothing.
func (NoopHooks) RunPodSandbox(context.Context, *Sandbox) (func(error), error) { return nil, nil }

// StopPodSandbox does nothing.
func (NoopHooks) StopPodSandbox(context.Context, *Sandbox) error { return nil }

// RemovePodSandbox does nothing.
func (NoopHooks) RemovePodSandbox(context.Context, *Sandbox) error { return nil }

// CreateContainer does nothing.
func (NoopHooks) CreateContainer(context.Context, *Sandbox, *Container, *oci.Generator) (func(error), error) {
	return nil, nil
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
func (NoopHooks) StopContainer(context.Context, *Sandbox, *Container) (func(), error) {
	return nil, nil
}

// RemoveContainer does nothing.
func (NoopHooks) RemoveContainer(context.Context, *Sandbox, *Container) error { return nil }
