package server

import (
	"path/filepath"
	"testing"

	"github.com/nrigate/nrigate/internal/oci"
	"github.com/nrigate/nrigate/internal/testenv"
)

// runtimeRig is testenv.ContainerRig for the in-tree runtime's runc and
// conmon.
func runtimeRig(t *testing.T) (dir, archive string) {
	t.Helper()
	return testenv.ContainerRig(t, oci.DefaultRuntimePath, oci.DefaultMonitorPath)
}

// rigConfig is a server configuration with every path under dir.
func rigConfig(dir string) Config {
	return Config{
		Listen: filepath.Join(dir, "cri.sock"), Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"),
		RuntimeRoot: filepath.Join(dir, "runc"),
	}
}
