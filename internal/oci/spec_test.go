package oci

import (
	"errors"
	"slices"
	"testing"

	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func baseInput() SpecInput {
	return SpecInput{
		ID:        "ctr1",
		SandboxID: "pod1",
		RootFS:    "/rootfs",
		NetNSPath: "/var/run/netns/nrigate-pod1",
		Container: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}},
		Sandbox: &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u1"},
			Hostname: "podhost",
		},
		Image: &imgspecv1.Image{Config: imgspecv1.ImageConfig{
			Entrypoint: []string{"/entry"}, Cmd: []string{"default"}, Env: []string{"FOO=img", "BAR=img"}, WorkingDir: "/img",
		}},
	}
}

func nsPath(s *rspec.Spec, typ rspec.LinuxNamespaceType) (string, bool) {
	for _, ns := range s.Linux.Namespaces {
		if ns.Type == typ {
			return ns.Path, true
		}
	}
	return "", false
}

func TestGenerateSpecArgs(t *testing.T) {
	for _, tc := range []struct {
		name          string
		command, args []string
		want          []string
	}{
		{"image default", nil, nil, []string{"/entry", "default"}},
		{"args replace cmd", nil, []string{"a"}, []string{"/entry", "a"}},
		{"command replaces entrypoint and cmd", []string{"sh"}, nil, []string{"sh"}},
		{"command and args", []string{"sh"}, []string{"-c", "x"}, []string{"sh", "-c", "x"}},
	} {
		in := baseInput()
		in.Container.Command, in.Container.Args = tc.command, tc.args
		g, err := GenerateSpec(in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(g.Config.Process.Args, tc.want) {
			t.Errorf("%s: args %v, want %v", tc.name, g.Config.Process.Args, tc.want)
		}
	}
}

func TestGenerateSpecEnvCwdAnnotations(t *testing.T) {
	in := baseInput()
	in.Container.Envs = []*runtimeapi.KeyValue{{Key: "FOO", Value: []byte("cri")}, {Key: "NEW", Value: []byte("1")}}
	in.Container.Annotations = map[string]string{"a": "b"}
	g, err := GenerateSpec(in)
	if err != nil {
		t.Fatal(err)
	}
	s := g.Config
	for _, want := range []string{"FOO=cri", "BAR=img", "NEW=1"} {
		if !slices.Contains(s.Process.Env, want) {
			t.Errorf("env %v misses %s", s.Process.Env, want)
		}
	}
	if slices.Contains(s.Process.Env, "FOO=img") {
		t.Error("image FOO not overridden")
	}
	if s.Process.Cwd != "/img" {
		t.Errorf("cwd %q, want image's /img", s.Process.Cwd)
	}
	if s.Annotations["a"] != "b" || s.Annotations[AnnotationPodNamespace] != "ns" || s.Annotations[AnnotationContainerName] != "c" {
		t.Errorf("annotations %v", s.Annotations)
	}
	if s.Hostname != "podhost" {
		t.Errorf("hostname %q", s.Hostname)
	}
	if p, ok := nsPath(s, rspec.NetworkNamespace); !ok || p != in.NetNSPath {
		t.Errorf("netns %q %v, want %s", p, ok, in.NetNSPath)
	}
	if s.Linux.CgroupsPath != "/nrigate/nrigate-ctr1" {
		t.Errorf("cgroups path %q", s.Linux.CgroupsPath)
	}
}

func TestGenerateSpecHostNamespaces(t *testing.T) {
	in := baseInput()
	in.NetNSPath = ""
	in.Sandbox.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_NODE},
	}}
	g, err := GenerateSpec(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []rspec.LinuxNamespaceType{rspec.NetworkNamespace, rspec.PIDNamespace, rspec.UTSNamespace} {
		if _, ok := nsPath(g.Config, typ); ok {
			t.Errorf("host %s namespace still in spec", typ)
		}
	}
	if _, ok := nsPath(g.Config, rspec.MountNamespace); !ok {
		t.Error("mount namespace missing")
	}
}

func TestGenerateSpecResourcesMountsSecurity(t *testing.T) {
	in := baseInput()
	dir := t.TempDir()
	in.Container.Mounts = []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: dir, Readonly: true}}
	in.Container.Devices = []*runtimeapi.Device{{HostPath: "/dev/null", ContainerPath: "/dev/xnull", Permissions: "rw"}}
	in.Container.Linux = &runtimeapi.LinuxContainerConfig{
		Resources: &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuQuota: 50000, CpuPeriod: 100000, MemoryLimitInBytes: 64 << 20, CpusetCpus: "0"},
		SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			RunAsUser: &runtimeapi.Int64Value{Value: 1000}, RunAsGroup: &runtimeapi.Int64Value{Value: 100},
			ReadonlyRootfs: true, SupplementalGroups: []int64{5},
		},
	}
	g, err := GenerateSpec(in)
	if err != nil {
		t.Fatal(err)
	}
	s := g.Config
	r := s.Linux.Resources
	if *r.CPU.Shares != 512 || *r.CPU.Quota != 50000 || *r.CPU.Period != 100000 || r.CPU.Cpus != "0" || *r.Memory.Limit != 64<<20 {
		t.Errorf("resources %+v %+v", r.CPU, r.Memory)
	}
	var found bool
	for _, m := range s.Mounts {
		if m.Destination == "/data" {
			found = m.Source == dir && slices.Contains(m.Options, "ro") && slices.Contains(m.Options, "rbind")
		}
	}
	if !found {
		t.Errorf("bind mount missing or wrong: %+v", s.Mounts)
	}
	if len(s.Linux.Devices) != 1 || s.Linux.Devices[0].Path != "/dev/xnull" || s.Linux.Devices[0].Type != "c" || s.Linux.Devices[0].Major != 1 {
		t.Errorf("devices %+v", s.Linux.Devices)
	}
	if s.Process.User.UID != 1000 || s.Process.User.GID != 100 || !slices.Contains(s.Process.User.AdditionalGids, 5) || !s.Root.Readonly {
		t.Errorf("user %+v readonly %v", s.Process.User, s.Root.Readonly)
	}
}

func TestGenerateSpecRejectsBadConfig(t *testing.T) {
	for name, mut := range map[string]func(*SpecInput){
		"no metadata":    func(in *SpecInput) { in.Container.Metadata = nil },
		"no command":     func(in *SpecInput) { in.Image = nil },
		"relative cwd":   func(in *SpecInput) { in.Container.WorkingDir = "rel" },
		"relative mount": func(in *SpecInput) { in.Container.Mounts = []*runtimeapi.Mount{{ContainerPath: "x", HostPath: "/tmp"}} },
		"missing host path": func(in *SpecInput) {
			in.Container.Mounts = []*runtimeapi.Mount{{ContainerPath: "/x", HostPath: "/nonexistent/nrigate"}}
		},
		"not a device": func(in *SpecInput) { in.Container.Devices = []*runtimeapi.Device{{HostPath: "/tmp"}} },
		"negative memory": func(in *SpecInput) {
			in.Container.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: -1}}
		},
		"empty env name": func(in *SpecInput) { in.Container.Envs = []*runtimeapi.KeyValue{{Key: ""}} },
		"systemd slice cgroup parent": func(in *SpecInput) {
			in.Sandbox.Linux = &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "kubepods-besteffort.slice"}
		},
	} {
		in := baseInput()
		mut(&in)
		if _, err := GenerateSpec(in); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err %v, want ErrInvalidConfig", name, err)
		}
	}
}

// TestRelativeCgroupParent: CRI-O's own NRI suite runs pods with cgroup
// parent "pod_123" under cgroupfs; CRI-O puts their containers under
// /pod_123, and so does nrigate (it refused the create before).
func TestRelativeCgroupParent(t *testing.T) {
	for parent, want := range map[string]string{
		"pod_123":          "/pod_123/nrigate-ctr1",
		"kubepods/pod_123": "/kubepods/pod_123/nrigate-ctr1",
		"/abs/pod":         "/abs/pod/nrigate-ctr1",
		"":                 "/nrigate/nrigate-ctr1",
	} {
		in := baseInput()
		in.Sandbox.Linux = &runtimeapi.LinuxPodSandboxConfig{CgroupParent: parent}
		g, err := GenerateSpec(in)
		if err != nil {
			t.Errorf("cgroup parent %q: %v", parent, err)
			continue
		}
		if g.Config.Linux.CgroupsPath != want {
			t.Errorf("cgroup parent %q: cgroups path %q, want %q", parent, g.Config.Linux.CgroupsPath, want)
		}
	}
}

func TestPrivileged(t *testing.T) {
	in := baseInput()
	in.Container.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{Privileged: true}}
	g, err := GenerateSpec(in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(g.Config.Process.Capabilities.Bounding, "CAP_SYS_ADMIN") || len(g.Config.Linux.MaskedPaths) != 0 {
		t.Errorf("privileged spec keeps restrictions: %+v", g.Config.Process.Capabilities)
	}
}
