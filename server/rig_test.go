package server

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nrigate/nrigate/internal/oci"
	"github.com/nrigate/nrigate/internal/testenv"
)

// runtimeRig skips the test unless it can run real containers (root, runc,
// conmon, busybox-static, jq), and returns a temporary directory, removed
// when the test ends, that holds the busybox test image archive.
func runtimeRig(t *testing.T) (dir, archive string) {
	t.Helper()
	testenv.SkipShort(t, "runs real containers")
	testenv.RequireRoot(t, "storage, runc and netns")
	testenv.RequireFiles(t, oci.DefaultRuntimePath, oci.DefaultMonitorPath, "/bin/busybox")
	testenv.RequireCommands(t, "jq")
	// Not t.TempDir: the CRI socket lives here and unix socket paths are short.
	dir, err := os.MkdirTemp("", "nrig")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	archive = filepath.Join(dir, "busybox.tar")
	if out, err := exec.Command("../hack/make-test-image.sh", archive).CombinedOutput(); err != nil {
		t.Fatalf("make-test-image: %v %s", err, out)
	}
	return dir, archive
}

// rigConfig is a server configuration with every path under dir.
func rigConfig(dir string) Config {
	return Config{
		Listen: filepath.Join(dir, "cri.sock"), Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"),
		RuntimeRoot: filepath.Join(dir, "runc"),
	}
}
