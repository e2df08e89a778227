package nri

import (
	"slices"

	nrigen "github.com/containerd/nri/pkg/runtime-tools/generate"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
)

// specGen implements the runtime-tools generator subset that upstream's
// NRI adjustment code needs (nrigen.UnderlyingGenerator) directly on an OCI
// spec. runtime-tools' own generate package does not build against the
// runtime-spec this module uses, so oci.Generator cannot be wrapped by it.
type specGen struct{ s *rspec.Spec }

var _ nrigen.UnderlyingGenerator = (*specGen)(nil)

func (g *specGen) proc() *rspec.Process {
	if g.s.Process == nil {
		g.s.Process = &rspec.Process{}
	}
	return g.s.Process
}

func (g *specGen) linux() *rspec.Linux {
	if g.s.Linux == nil {
		g.s.Linux = &rspec.Linux{}
	}
	return g.s.Linux
}

func (g *specGen) res() *rspec.LinuxResources {
	l := g.linux()
	if l.Resources == nil {
		l.Resources = &rspec.LinuxResources{}
	}
	return l.Resources
}

func (g *specGen) cpu() *rspec.LinuxCPU {
	r := g.res()
	if r.CPU == nil {
		r.CPU = &rspec.LinuxCPU{}
	}
	return r.CPU
}

func (g *specGen) mem() *rspec.LinuxMemory {
	r := g.res()
	if r.Memory == nil {
		r.Memory = &rspec.LinuxMemory{}
	}
	return r.Memory
}

func (g *specGen) hooks() *rspec.Hooks {
	if g.s.Hooks == nil {
		g.s.Hooks = &rspec.Hooks{}
	}
	return g.s.Hooks
}

func (g *specGen) AddAnnotation(key, value string) {
	if g.s.Annotations == nil {
		g.s.Annotations = map[string]string{}
	}
	g.s.Annotations[key] = value
}

func (g *specGen) RemoveAnnotation(key string) { delete(g.s.Annotations, key) }

func (g *specGen) AddDevice(d rspec.LinuxDevice) {
	l := g.linux()
	for i, o := range l.Devices {
		if o.Path == d.Path {
			l.Devices[i] = d
			return
		}
	}
	l.Devices = append(l.Devices, d)
}

func (g *specGen) RemoveDevice(path string) {
	l := g.linux()
	l.Devices = slices.DeleteFunc(l.Devices, func(d rspec.LinuxDevice) bool { return d.Path == path })
}

func (g *specGen) AddOrReplaceLinuxNamespace(ns string, path string) error {
	l := g.linux()
	t := rspec.LinuxNamespaceType(ns)
	for i, o := range l.Namespaces {
		if o.Type == t {
			l.Namespaces[i].Path = path
			return nil
		}
	}
	l.Namespaces = append(l.Namespaces, rspec.LinuxNamespace{Type: t, Path: path})
	return nil
}

func (g *specGen) RemoveLinuxNamespace(ns string) error {
	l := g.linux()
	t := rspec.LinuxNamespaceType(ns)
	l.Namespaces = slices.DeleteFunc(l.Namespaces, func(n rspec.LinuxNamespace) bool { return n.Type == t })
	return nil
}

func (g *specGen) AddPostStartHook(h rspec.Hook) {
	hk := g.hooks()
	hk.Poststart = append(hk.Poststart, h)
}
func (g *specGen) AddPostStopHook(h rspec.Hook) {
	hk := g.hooks()
	hk.Poststop = append(hk.Poststop, h)
}

//nolint:staticcheck // Prestart is what upstream's adjustment fills.
func (g *specGen) AddPreStartHook(h rspec.Hook) {
	hk := g.hooks()
	hk.Prestart = append(hk.Prestart, h)
}

func (g *specGen) AddProcessEnv(name, value string) {
	p := g.proc()
	kv := name + "=" + value
	for i, e := range p.Env {
		if len(e) > len(name) && e[:len(name)+1] == name+"=" {
			p.Env[i] = kv
			return
		}
	}
	p.Env = append(p.Env, kv)
}

func (g *specGen) ClearProcessEnv() { g.proc().Env = nil }

func (g *specGen) AddLinuxResourcesDevice(allow bool, devType string, major, minor *int64, access string) {
	r := g.res()
	r.Devices = append(r.Devices, rspec.LinuxDeviceCgroup{Allow: allow, Type: devType, Major: major, Minor: minor, Access: access})
}

func (g *specGen) AddLinuxResourcesHugepageLimit(pageSize string, limit uint64) {
	r := g.res()
	for i, h := range r.HugepageLimits {
		if h.Pagesize == pageSize {
			r.HugepageLimits[i].Limit = limit
			return
		}
	}
	r.HugepageLimits = append(r.HugepageLimits, rspec.LinuxHugepageLimit{Pagesize: pageSize, Limit: limit})
}

func (g *specGen) AddLinuxResourcesUnified(key, val string) {
	r := g.res()
	if r.Unified == nil {
		r.Unified = map[string]string{}
	}
	r.Unified[key] = val
}

func (g *specGen) AddMount(m rspec.Mount) { g.s.Mounts = append(g.s.Mounts, m) }
func (g *specGen) ClearMounts()           { g.s.Mounts = nil }
func (g *specGen) Mounts() []rspec.Mount  { return g.s.Mounts }

func (g *specGen) RemoveMount(dest string) {
	g.s.Mounts = slices.DeleteFunc(g.s.Mounts, func(m rspec.Mount) bool { return m.Destination == dest })
}

func (g *specGen) AddLinuxSysctl(key, value string) {
	l := g.linux()
	if l.Sysctl == nil {
		l.Sysctl = map[string]string{}
	}
	l.Sysctl[key] = value
}

func (g *specGen) RemoveLinuxSysctl(key string) { delete(g.linux().Sysctl, key) }

func (g *specGen) SetProcessArgs(args []string)      { g.proc().Args = args }
func (g *specGen) SetLinuxCgroupsPath(path string)   { g.linux().CgroupsPath = path }
func (g *specGen) SetLinuxResourcesCPUCpus(c string) { g.cpu().Cpus = c }
func (g *specGen) SetLinuxResourcesCPUMems(m string) { g.cpu().Mems = m }
func (g *specGen) SetLinuxResourcesCPUPeriod(p uint64) {
	g.cpu().Period = &p
}
func (g *specGen) SetLinuxResourcesCPUQuota(q int64) { g.cpu().Quota = &q }
func (g *specGen) SetLinuxResourcesCPURealtimePeriod(p uint64) {
	g.cpu().RealtimePeriod = &p
}
func (g *specGen) SetLinuxResourcesCPURealtimeRuntime(t int64) { g.cpu().RealtimeRuntime = &t }
func (g *specGen) SetLinuxResourcesCPUShares(s uint64)         { g.cpu().Shares = &s }
func (g *specGen) SetLinuxResourcesMemoryLimit(l int64)        { g.mem().Limit = &l }
func (g *specGen) SetLinuxResourcesMemorySwap(s int64)         { g.mem().Swap = &s }

func (g *specGen) SetLinuxRootPropagation(rp string) error {
	g.linux().RootfsPropagation = rp
	return nil
}

func (g *specGen) SetProcessOOMScoreAdj(adj int) { g.proc().OOMScoreAdj = &adj }
func (g *specGen) Spec() *rspec.Spec             { return g.s }
