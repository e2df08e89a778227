package oci

import (
	"slices"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
)

// Generator edits an OCI spec. It mirrors the subset of
// runtime-tools/generate that nrigate needs: runtime-tools v0.9.0 (the only
// release on the module proxy) does not compile against runtime-spec v1.3.0,
// which containers/storage and NRI require. Hooks (NRI) get the Generator to
// adjust the spec before the container is created; Config is the spec itself.
type Generator struct {
	Config *rspec.Spec
}

// defaultCaps is the capability set of an unprivileged container, the same
// set Docker, containerd and CRI-O default to.
var defaultCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// NewGenerator returns a Generator on a default Linux container spec: new
// pid, ipc, uts, mount and network namespaces, the usual /proc, /dev and /sys
// mounts, the default capabilities and masked kernel paths.
func NewGenerator() *Generator {
	caps := func() []string { return slices.Clone(defaultCaps) }
	s := &rspec.Spec{
		Version:  rspec.Version,
		Root:     &rspec.Root{Path: "rootfs"},
		Hostname: "",
		Process: &rspec.Process{
			Args: []string{"sh"},
			Env:  []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Cwd:  "/",
			Capabilities: &rspec.LinuxCapabilities{
				Bounding: caps(), Permitted: caps(), Effective: caps(),
			},
			NoNewPrivileges: false,
		},
		Mounts: []rspec.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		},
		Linux: &rspec.Linux{
			Namespaces: []rspec.LinuxNamespace{
				{Type: rspec.PIDNamespace}, {Type: rspec.IPCNamespace}, {Type: rspec.UTSNamespace},
				{Type: rspec.MountNamespace}, {Type: rspec.NetworkNamespace},
			},
			Resources: &rspec.LinuxResources{
				Devices: []rspec.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
			},
			MaskedPaths: []string{
				"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
				"/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
			},
			ReadonlyPaths: []string{
				"/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
			},
		},
	}
	return &Generator{Config: s}
}

// SetProcessArgs sets the process' argv.
func (g *Generator) SetProcessArgs(args []string) { g.Config.Process.Args = args }

// ClearProcessEnv drops every environment variable.
func (g *Generator) ClearProcessEnv() { g.Config.Process.Env = nil }

// AddProcessEnv sets name=value, replacing an earlier value of name.
func (g *Generator) AddProcessEnv(name, value string) {
	kv := name + "=" + value
	for i, e := range g.Config.Process.Env {
		if len(e) > len(name) && e[:len(name)+1] == name+"=" {
			g.Config.Process.Env[i] = kv
			return
		}
	}
	g.Config.Process.Env = append(g.Config.Process.Env, kv)
}

// SetProcessCwd sets the working directory.
func (g *Generator) SetProcessCwd(cwd string) { g.Config.Process.Cwd = cwd }

// SetProcessTerminal asks for a terminal.
func (g *Generator) SetProcessTerminal(b bool) { g.Config.Process.Terminal = b }

// SetProcessUID sets the user ID.
func (g *Generator) SetProcessUID(uid uint32) { g.Config.Process.User.UID = uid }

// SetProcessGID sets the group ID.
func (g *Generator) SetProcessGID(gid uint32) { g.Config.Process.User.GID = gid }

// AddProcessAdditionalGid adds a supplementary group.
func (g *Generator) AddProcessAdditionalGid(gid uint32) {
	if !slices.Contains(g.Config.Process.User.AdditionalGids, gid) {
		g.Config.Process.User.AdditionalGids = append(g.Config.Process.User.AdditionalGids, gid)
	}
}

// SetProcessOOMScoreAdj sets the OOM score adjustment.
func (g *Generator) SetProcessOOMScoreAdj(adj int) { g.Config.Process.OOMScoreAdj = &adj }

// SetRootPath sets the root filesystem path.
func (g *Generator) SetRootPath(p string) { g.Config.Root.Path = p }

// SetRootReadonly makes the root filesystem read-only.
func (g *Generator) SetRootReadonly(b bool) { g.Config.Root.Readonly = b }

// SetHostname sets the hostname (needs a UTS namespace).
func (g *Generator) SetHostname(h string) { g.Config.Hostname = h }

// AddAnnotation sets an annotation.
func (g *Generator) AddAnnotation(k, v string) {
	if g.Config.Annotations == nil {
		g.Config.Annotations = map[string]string{}
	}
	g.Config.Annotations[k] = v
}

// AddOrReplaceLinuxNamespace joins path for namespace typ ("" means a new one).
func (g *Generator) AddOrReplaceLinuxNamespace(typ rspec.LinuxNamespaceType, path string) {
	for i, ns := range g.Config.Linux.Namespaces {
		if ns.Type == typ {
			g.Config.Linux.Namespaces[i].Path = path
			return
		}
	}
	g.Config.Linux.Namespaces = append(g.Config.Linux.Namespaces, rspec.LinuxNamespace{Type: typ, Path: path})
}

// RemoveLinuxNamespace makes the container share the host's namespace typ.
func (g *Generator) RemoveLinuxNamespace(typ rspec.LinuxNamespaceType) {
	g.Config.Linux.Namespaces = slices.DeleteFunc(g.Config.Linux.Namespaces, func(ns rspec.LinuxNamespace) bool { return ns.Type == typ })
}

// AddMount adds a mount, replacing one at the same destination.
func (g *Generator) AddMount(m rspec.Mount) {
	g.RemoveMount(m.Destination)
	g.Config.Mounts = append(g.Config.Mounts, m)
}

// RemoveMount removes the mount at dest.
func (g *Generator) RemoveMount(dest string) {
	g.Config.Mounts = slices.DeleteFunc(g.Config.Mounts, func(m rspec.Mount) bool { return m.Destination == dest })
}

// AddDevice adds a device node, replacing one at the same path.
func (g *Generator) AddDevice(d rspec.LinuxDevice) {
	g.Config.Linux.Devices = slices.DeleteFunc(g.Config.Linux.Devices, func(x rspec.LinuxDevice) bool { return x.Path == d.Path })
	g.Config.Linux.Devices = append(g.Config.Linux.Devices, d)
}

// AddLinuxResourcesDevice adds a device cgroup rule.
func (g *Generator) AddLinuxResourcesDevice(allow bool, typ string, major, minor *int64, access string) {
	g.Config.Linux.Resources.Devices = append(g.Config.Linux.Resources.Devices,
		rspec.LinuxDeviceCgroup{Allow: allow, Type: typ, Major: major, Minor: minor, Access: access})
}

// SetLinuxCgroupsPath sets the cgroupfs path.
func (g *Generator) SetLinuxCgroupsPath(p string) { g.Config.Linux.CgroupsPath = p }

// AddLinuxSysctl sets a namespaced sysctl.
func (g *Generator) AddLinuxSysctl(k, v string) {
	if g.Config.Linux.Sysctl == nil {
		g.Config.Linux.Sysctl = map[string]string{}
	}
	g.Config.Linux.Sysctl[k] = v
}

// SetLinuxResources merges CPU and memory settings into the spec.
func (g *Generator) SetLinuxResources(r *rspec.LinuxResources) {
	if r == nil {
		return
	}
	if r.CPU != nil {
		g.Config.Linux.Resources.CPU = r.CPU
	}
	if r.Memory != nil {
		g.Config.Linux.Resources.Memory = r.Memory
	}
}

// SetupPrivileged gives the container all capabilities, all devices and
// unmasked kernel paths.
func (g *Generator) SetupPrivileged(privileged bool) {
	if !privileged {
		return
	}
	all := allCaps()
	g.Config.Process.Capabilities = &rspec.LinuxCapabilities{Bounding: all, Permitted: slices.Clone(all), Effective: slices.Clone(all)}
	g.Config.Linux.MaskedPaths = nil
	g.Config.Linux.ReadonlyPaths = nil
	g.Config.Linux.Resources.Devices = []rspec.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}
	for i, m := range g.Config.Mounts {
		if m.Destination == "/sys" {
			g.Config.Mounts[i].Options = slices.DeleteFunc(slices.Clone(m.Options), func(o string) bool { return o == "ro" })
		}
	}
}

func allCaps() []string {
	return append(slices.Clone(defaultCaps),
		"CAP_DAC_READ_SEARCH", "CAP_LINUX_IMMUTABLE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_IPC_LOCK",
		"CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN",
		"CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_LEASE",
		"CAP_AUDIT_CONTROL", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
		"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE")
}
