package nri

import (
	"maps"

	"github.com/containerd/nri/pkg/api"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/server"
)

// podToAPI converts a pod for the plugins (and the policy's scope).
func podToAPI(sb *server.Sandbox) *api.PodSandbox {
	cfg := sb.Config
	md := cfg.GetMetadata()
	pod := &api.PodSandbox{
		Id:             sb.ID,
		Name:           md.GetName(),
		Uid:            md.GetUid(),
		Namespace:      md.GetNamespace(),
		Labels:         maps.Clone(cfg.GetLabels()),
		Annotations:    maps.Clone(cfg.GetAnnotations()),
		RuntimeHandler: sb.RuntimeHandler,
		Linux: &api.LinuxPodSandbox{
			CgroupParent: cfg.GetLinux().GetCgroupParent(),
		},
	}
	if sb.NetNSPath != "" {
		pod.Linux.Namespaces = []*api.LinuxNamespace{{Type: string(rspec.NetworkNamespace), Path: sb.NetNSPath}}
	}
	return pod
}

// containerToAPI converts a container and its spec (nil before the spec
// exists) for the plugins.
func containerToAPI(c *server.Container, spec *rspec.Spec, state api.ContainerState) *api.Container {
	cfg := c.Config
	ctr := &api.Container{
		Id:           c.ID,
		PodSandboxId: c.SandboxID,
		Name:         cfg.GetMetadata().GetName(),
		State:        state,
		Labels:       maps.Clone(cfg.GetLabels()),
		Annotations:  maps.Clone(cfg.GetAnnotations()),
		CreatedAt:    c.CreatedAt.UnixNano(),
		Pid:          uint32(max(c.Pid, 0)),
	}
	if spec == nil {
		return ctr
	}
	if spec.Annotations != nil {
		ctr.Annotations = maps.Clone(spec.Annotations)
	}
	if p := spec.Process; p != nil {
		ctr.Args = append([]string(nil), p.Args...)
		ctr.Env = append([]string(nil), p.Env...)
	}
	ctr.Mounts = api.FromOCIMounts(spec.Mounts)
	ctr.Hooks = api.FromOCIHooks(spec.Hooks)
	if l := spec.Linux; l != nil {
		ctr.Linux = &api.LinuxContainer{
			Namespaces:  api.FromOCILinuxNamespaces(l.Namespaces),
			Devices:     api.FromOCILinuxDevices(l.Devices),
			Resources:   api.FromOCILinuxResources(l.Resources, spec.Annotations),
			CgroupsPath: l.CgroupsPath,
			Sysctl:      maps.Clone(l.Sysctl),
		}
		if p := spec.Process; p != nil && p.OOMScoreAdj != nil {
			ctr.Linux.OomScoreAdj = api.Int(*p.OOMScoreAdj)
		}
	}
	return ctr
}

// stateToAPI maps a CRI container state onto NRI's.
func stateToAPI(s runtimeapi.ContainerState) api.ContainerState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return api.ContainerState_CONTAINER_CREATED
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return api.ContainerState_CONTAINER_RUNNING
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return api.ContainerState_CONTAINER_STOPPED
	default:
		return api.ContainerState_CONTAINER_UNKNOWN
	}
}

// resourcesToAPI converts CRI resources for an UpdateContainer relay.
func resourcesToAPI(r *runtimeapi.LinuxContainerResources) *api.LinuxResources {
	if r == nil {
		return nil
	}
	out := &api.LinuxResources{
		Cpu:    &api.LinuxCPU{Cpus: r.CpusetCpus, Mems: r.CpusetMems},
		Memory: &api.LinuxMemory{},
	}
	if r.CpuShares != 0 {
		out.Cpu.Shares = api.UInt64(uint64(r.CpuShares))
	}
	if r.CpuQuota != 0 {
		out.Cpu.Quota = api.Int64(r.CpuQuota)
	}
	if r.CpuPeriod != 0 {
		out.Cpu.Period = api.UInt64(uint64(r.CpuPeriod))
	}
	if r.MemoryLimitInBytes != 0 {
		out.Memory.Limit = api.Int64(r.MemoryLimitInBytes)
	}
	if r.MemorySwapLimitInBytes != 0 {
		out.Memory.Swap = api.Int64(r.MemorySwapLimitInBytes)
	}
	for _, h := range r.HugepageLimits {
		out.HugepageLimits = append(out.HugepageLimits, &api.HugepageLimit{PageSize: h.PageSize, Limit: h.Limit})
	}
	if len(r.Unified) > 0 {
		out.Unified = maps.Clone(r.Unified)
	}
	return out
}

// mergeResources writes what the plugins set in n over the CRI resources.
func mergeResources(r *runtimeapi.LinuxContainerResources, n *api.LinuxResources) {
	if r == nil || n == nil {
		return
	}
	if c := n.Cpu; c != nil {
		if v := c.Shares.Get(); v != nil {
			r.CpuShares = int64(*v)
		}
		if v := c.Quota.Get(); v != nil {
			r.CpuQuota = *v
		}
		if v := c.Period.Get(); v != nil {
			r.CpuPeriod = int64(*v)
		}
		if c.Cpus != "" {
			r.CpusetCpus = c.Cpus
		}
		if c.Mems != "" {
			r.CpusetMems = c.Mems
		}
	}
	if m := n.Memory; m != nil {
		if v := m.Limit.Get(); v != nil {
			r.MemoryLimitInBytes = *v
		}
		if v := m.Swap.Get(); v != nil {
			r.MemorySwapLimitInBytes = *v
		}
	}
	if len(n.HugepageLimits) > 0 {
		r.HugepageLimits = nil
		for _, h := range n.HugepageLimits {
			r.HugepageLimits = append(r.HugepageLimits, &runtimeapi.HugepageLimit{PageSize: h.PageSize, Limit: h.Limit})
		}
	}
	if len(n.Unified) > 0 {
		if r.Unified == nil {
			r.Unified = map[string]string{}
		}
		maps.Copy(r.Unified, n.Unified)
	}
}
