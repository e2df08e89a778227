// Package critest is what the end-to-end suites (test/e2e) and the
// benchmark (tools/nri-bench) share: starting patched CRI-O or containerd
// through test/e2e/runtime.sh (the BATS helpers' config), the nri-faulty
// plugin, the CRI requests they send to every runtime alike and the mount
// bookkeeping of a runtime whose state lives in one directory. It is not a
// test-only package (the benchmark is a command), so it does not import
// "testing".
package critest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestImage is the image every container config names: hack/make-test-image.sh's
// busybox, imported under this name by each runtime's test helpers.
const TestImage = "localhost/busybox:latest"

// PodConfig is a pod in namespace default named name, its logs under
// logRoot/name, with its own PID namespace (kubelet's default; CRI-O runs
// such a pod without an infra container).
func PodConfig(name, logRoot string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: name + "-uid"},
		LogDirectory: filepath.Join(logRoot, name),
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER},
		}},
	}
}

// ContainerConfig is a TestImage container named name running command
// (sleep 1000 when none is given), in a PID namespace of its own like its
// PodConfig pod.
func ContainerConfig(name string, command ...string) *runtimeapi.ContainerConfig {
	if len(command) == 0 {
		command = []string{"sleep", "1000"}
	}
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: TestImage, UserSpecifiedImage: TestImage},
		Command:  command,
		Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER},
		}},
	}
}

// MountsUnder lists the mount points below dir in this mount namespace.
func MountsUnder(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	prefix := filepath.Clean(dir) + "/"
	var ms []string
	for _, l := range strings.Split(string(b), "\n") {
		// mountinfo: ID parent major:minor root mount-point ...
		if fs := strings.Fields(l); len(fs) > 4 && strings.HasPrefix(fs[4], prefix) {
			ms = append(ms, fs[4])
		}
	}
	return ms, nil
}

// UnmountUnder lazily unmounts every mount point below dir, deepest first,
// for a runtime stopped without cleaning up (its state directory can then
// be removed). It returns the first error.
func UnmountUnder(dir string) error {
	ms, err := MountsUnder(dir)
	if err != nil {
		return err
	}
	slices.Sort(ms)
	slices.Reverse(ms)
	var first error
	for _, m := range ms {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && first == nil {
			first = err
		}
	}
	return first
}
