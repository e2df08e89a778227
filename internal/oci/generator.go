package oci

import (
	"slices"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/runtime-tools/generate"
)

// Generator edits an OCI spec: runtime-tools' generator, the one CRI-O
// builds its specs with and NRI's adjustment code
// (github.com/containerd/nri/pkg/runtime-tools/generate) is written
// against, so that the CRI config and the plugins' adjustments go through
// one implementation. The pseudo-version CRI-O v1.36.3 pins builds with
// runtime-spec v1.3.0 (the v0.9.0 release does not). Hooks (NRI) get the
// Generator to adjust the spec before the container is created; Config is
// the spec itself.
type Generator = generate.Generator

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
	g := generate.NewFromSpec(s)
	return &g
}

// setupPrivileged gives the container what CRI-O gives a privileged one
// beyond runtime-tools' SetupPrivileged (every known capability, no
// seccomp, AppArmor or SELinux label): all devices, unmasked kernel paths
// and a writable /sys.
func setupPrivileged(g *Generator) {
	g.SetupPrivileged(true)
	g.Config.Linux.MaskedPaths = nil
	g.Config.Linux.ReadonlyPaths = nil
	g.Config.Linux.Resources.Devices = []rspec.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}
	for i, m := range g.Config.Mounts {
		if m.Destination == "/sys" {
			g.Config.Mounts[i].Options = slices.DeleteFunc(slices.Clone(m.Options), func(o string) bool { return o == "ro" })
		}
	}
}
