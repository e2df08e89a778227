package oci

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Annotations nrigate sets on every container spec, so that NRI plugins and
// humans can tell what a bundle belongs to.
const (
	AnnotationPodName       = "io.kubernetes.pod.name"
	AnnotationPodNamespace  = "io.kubernetes.pod.namespace"
	AnnotationPodUID        = "io.kubernetes.pod.uid"
	AnnotationContainerName = "io.kubernetes.container.name"
	AnnotationSandboxID     = "io.kubernetes.cri.sandbox-id"
	// DefaultCgroupParent is used when the pod names no cgroup parent.
	DefaultCgroupParent = "/nrigate"
)

// ErrInvalidConfig marks a CRI config that cannot be turned into a spec.
var ErrInvalidConfig = errors.New("invalid container config")

// SpecInput is what a container's OCI spec is generated from.
type SpecInput struct {
	// ID is the container ID.
	ID string
	// SandboxID is the pod sandbox the container belongs to.
	SandboxID string
	// Container is the CRI container config.
	Container *runtimeapi.ContainerConfig
	// Sandbox is the CRI pod sandbox config.
	Sandbox *runtimeapi.PodSandboxConfig
	// Image is the image's OCI config (may be nil).
	Image *imgspecv1.Image
	// RootFS is the mounted root filesystem.
	RootFS string
	// NetNSPath is the pod's network namespace; empty means host network.
	NetNSPath string
}

// GenerateSpec builds a container's OCI spec from its CRI and image configs.
// Pods have no infra container, so only the network namespace is shared
// per pod; PID and IPC are the host's (NODE) or the container's own.
func GenerateSpec(in SpecInput) (*Generator, error) {
	c := in.Container
	if c == nil || c.Metadata == nil || c.Metadata.Name == "" {
		return nil, fmt.Errorf("%w: container metadata with a name is required", ErrInvalidConfig)
	}
	g := NewGenerator()
	g.SetRootPath(in.RootFS)

	var imgCfg imgspecv1.ImageConfig
	if in.Image != nil {
		imgCfg = in.Image.Config
	}
	args := processArgs(c.Command, c.Args, imgCfg.Entrypoint, imgCfg.Cmd)
	if len(args) == 0 {
		return nil, fmt.Errorf("%w: no command: neither the container config nor the image gives one", ErrInvalidConfig)
	}
	g.SetProcessArgs(args)

	g.ClearProcessEnv()
	env := map[string]int{}
	var envList []string
	addEnv := func(k, v string) {
		kv := k + "=" + v
		if i, ok := env[k]; ok {
			envList[i] = kv
			return
		}
		env[k] = len(envList)
		envList = append(envList, kv)
	}
	addEnv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	for _, e := range imgCfg.Env {
		k, v, _ := strings.Cut(e, "=")
		addEnv(k, v)
	}
	for _, kv := range c.Envs {
		if kv.GetKey() == "" {
			return nil, fmt.Errorf("%w: environment variable with an empty name", ErrInvalidConfig)
		}
		addEnv(kv.Key, string(kv.Value))
	}
	for _, e := range envList {
		k, v, _ := strings.Cut(e, "=")
		g.AddProcessEnv(k, v)
	}

	cwd := c.WorkingDir
	if cwd == "" {
		cwd = imgCfg.WorkingDir
	}
	if cwd == "" {
		cwd = "/"
	}
	if !filepath.IsAbs(cwd) {
		return nil, fmt.Errorf("%w: working dir %q is not absolute", ErrInvalidConfig, cwd)
	}
	g.SetProcessCwd(cwd)
	g.SetProcessTerminal(c.Tty)

	for k, v := range c.Annotations {
		g.AddAnnotation(k, v)
	}
	if md := in.Sandbox.GetMetadata(); md != nil {
		g.AddAnnotation(AnnotationPodName, md.Name)
		g.AddAnnotation(AnnotationPodNamespace, md.Namespace)
		g.AddAnnotation(AnnotationPodUID, md.Uid)
	}
	g.AddAnnotation(AnnotationContainerName, c.Metadata.Name)
	g.AddAnnotation(AnnotationSandboxID, in.SandboxID)

	// Namespaces.
	if in.NetNSPath == "" {
		removeNamespace(g, rspec.NetworkNamespace)
		removeNamespace(g, rspec.UTSNamespace)
	} else {
		if err := g.AddOrReplaceLinuxNamespace(string(rspec.NetworkNamespace), in.NetNSPath); err != nil {
			return nil, fmt.Errorf("network namespace: %w", err)
		}
		if h := in.Sandbox.GetHostname(); h != "" {
			g.SetHostname(h)
		}
	}
	nsOpts := c.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if nsOpts == nil {
		nsOpts = in.Sandbox.GetLinux().GetSecurityContext().GetNamespaceOptions()
	}
	if nsOpts.GetPid() == runtimeapi.NamespaceMode_NODE {
		removeNamespace(g, rspec.PIDNamespace)
	}
	if nsOpts.GetIpc() == runtimeapi.NamespaceMode_NODE {
		removeNamespace(g, rspec.IPCNamespace)
	}

	// Security context.
	sc := c.GetLinux().GetSecurityContext()
	if sc.GetPrivileged() {
		setupPrivileged(g)
	}
	if sc.GetReadonlyRootfs() {
		g.SetRootReadonly(true)
	}
	if u := sc.GetRunAsUser(); u != nil {
		g.SetProcessUID(uint32(u.Value))
	}
	if gr := sc.GetRunAsGroup(); gr != nil {
		g.SetProcessGID(uint32(gr.Value))
	}
	for _, gid := range sc.GetSupplementalGroups() {
		g.AddProcessAdditionalGid(uint32(gid))
	}

	// Mounts.
	for _, m := range c.Mounts {
		if err := addMount(g, m); err != nil {
			return nil, err
		}
	}
	// Devices.
	for _, d := range c.Devices {
		if err := addDevice(g, d); err != nil {
			return nil, err
		}
	}
	// Resources and cgroup.
	if err := applyResources(g, c.GetLinux().GetResources()); err != nil {
		return nil, err
	}
	cgPath, err := CgroupsPath(in.Sandbox.GetLinux().GetCgroupParent(), in.ID)
	if err != nil {
		return nil, err
	}
	g.SetLinuxCgroupsPath(cgPath)
	for k, v := range in.Sandbox.GetLinux().GetSysctls() {
		g.AddLinuxSysctl(k, v)
	}
	return g, nil
}

// processArgs follows Kubernetes: command replaces the entrypoint (and drops
// the image's cmd), args replace the cmd.
func processArgs(command, args, entrypoint, cmd []string) []string {
	if len(command) > 0 {
		return append(append([]string{}, command...), args...)
	}
	if len(args) > 0 {
		return append(append([]string{}, entrypoint...), args...)
	}
	return append(append([]string{}, entrypoint...), cmd...)
}

// removeNamespace makes the container share the host's namespace typ. The
// types are runtime-spec constants, which runtime-tools always knows.
func removeNamespace(g *Generator, typ rspec.LinuxNamespaceType) {
	_ = g.RemoveLinuxNamespace(string(typ))
}

func addMount(g *Generator, m *runtimeapi.Mount) error {
	if !filepath.IsAbs(m.GetContainerPath()) {
		return fmt.Errorf("%w: mount container path %q is not absolute", ErrInvalidConfig, m.GetContainerPath())
	}
	if !filepath.IsAbs(m.GetHostPath()) {
		return fmt.Errorf("%w: mount host path %q is not absolute", ErrInvalidConfig, m.GetHostPath())
	}
	if _, err := os.Stat(m.HostPath); err != nil {
		return fmt.Errorf("%w: mount host path %q: %v", ErrInvalidConfig, m.HostPath, err)
	}
	opts := []string{"rbind"}
	if m.Readonly {
		opts = append(opts, "ro")
	} else {
		opts = append(opts, "rw")
	}
	switch m.Propagation {
	case runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:
		opts = append(opts, "rshared")
	case runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
		opts = append(opts, "rslave")
	default:
		opts = append(opts, "rprivate")
	}
	// runtime-tools appends: replace a default mount at the same place.
	g.RemoveMount(m.ContainerPath)
	g.AddMount(rspec.Mount{Destination: m.ContainerPath, Source: m.HostPath, Type: "bind", Options: opts})
	return nil
}

func addDevice(g *Generator, d *runtimeapi.Device) error {
	var st unix.Stat_t
	if err := unix.Stat(d.GetHostPath(), &st); err != nil {
		return fmt.Errorf("%w: device %q: %v", ErrInvalidConfig, d.GetHostPath(), err)
	}
	var typ string
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		typ = "c"
	case unix.S_IFBLK:
		typ = "b"
	default:
		return fmt.Errorf("%w: %q is not a device node", ErrInvalidConfig, d.HostPath)
	}
	path := d.ContainerPath
	if path == "" {
		path = d.HostPath
	}
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%w: device container path %q is not absolute", ErrInvalidConfig, path)
	}
	major, minor := int64(unix.Major(uint64(st.Rdev))), int64(unix.Minor(uint64(st.Rdev)))
	mode := os.FileMode(st.Mode & 0o777)
	uid, gid := st.Uid, st.Gid
	g.AddDevice(rspec.LinuxDevice{Path: path, Type: typ, Major: major, Minor: minor, FileMode: &mode, UID: &uid, GID: &gid})
	perms := d.Permissions
	if perms == "" {
		perms = "rwm"
	}
	g.AddLinuxResourcesDevice(true, typ, &major, &minor, perms)
	return nil
}

func applyResources(g *Generator, r *runtimeapi.LinuxContainerResources) error {
	if r == nil {
		return nil
	}
	res, err := LinuxResources(r)
	if err != nil {
		return err
	}
	if res.CPU != nil {
		g.Config.Linux.Resources.CPU = res.CPU
	}
	if res.Memory != nil {
		g.Config.Linux.Resources.Memory = res.Memory
	}
	if r.OomScoreAdj != 0 {
		g.SetProcessOOMScoreAdj(int(r.OomScoreAdj))
	}
	return nil
}

// LinuxResources converts CRI resources to OCI ones (used for create and
// for `runc update`).
func LinuxResources(r *runtimeapi.LinuxContainerResources) (*rspec.LinuxResources, error) {
	out := &rspec.LinuxResources{}
	if r == nil {
		return out, nil
	}
	if r.CpuQuota < -1 || r.CpuPeriod < 0 || r.CpuShares < 0 || r.MemoryLimitInBytes < 0 {
		return nil, fmt.Errorf("%w: negative resource value (cpu quota %d, period %d, shares %d, memory %d)",
			ErrInvalidConfig, r.CpuQuota, r.CpuPeriod, r.CpuShares, r.MemoryLimitInBytes)
	}
	cpu := &rspec.LinuxCPU{Cpus: r.CpusetCpus, Mems: r.CpusetMems}
	set := r.CpusetCpus != "" || r.CpusetMems != ""
	if r.CpuShares > 0 {
		v := uint64(r.CpuShares)
		cpu.Shares, set = &v, true
	}
	if r.CpuQuota != 0 {
		v := r.CpuQuota
		cpu.Quota, set = &v, true
	}
	if r.CpuPeriod > 0 {
		v := uint64(r.CpuPeriod)
		cpu.Period, set = &v, true
	}
	if set {
		out.CPU = cpu
	}
	if r.MemoryLimitInBytes > 0 {
		v := r.MemoryLimitInBytes
		out.Memory = &rspec.LinuxMemory{Limit: &v}
	}
	return out, nil
}

// ValidateCgroupParent checks a pod's cgroup parent for the cgroupfs
// manager: empty (DefaultCgroupParent), an absolute path or, as CRI-O
// accepts it, a path relative to the cgroup root ("pod_123"). A systemd
// slice ("kubepods.slice") is refused: nrigate has no systemd manager.
func ValidateCgroupParent(parent string) error {
	if strings.HasSuffix(filepath.Base(parent), ".slice") {
		return fmt.Errorf("%w: cgroup parent %q is a systemd slice, but nrigate uses the cgroupfs cgroup manager", ErrInvalidConfig, parent)
	}
	return nil
}

// CgroupsPath is the cgroupfs path of container id in a pod whose cgroup
// parent is parent: PARENT/nrigate-ID under the cgroup root, like CRI-O's
// cgroupfs manager (a relative parent is taken from the root).
func CgroupsPath(parent, id string) (string, error) {
	if err := ValidateCgroupParent(parent); err != nil {
		return "", err
	}
	if parent == "" {
		parent = DefaultCgroupParent
	}
	return filepath.Join("/", parent, "nrigate-"+id), nil
}
