package storage

import (
	"os"
	"testing"

	"go.podman.io/storage/pkg/reexec"
)

// TestMain lets containers/storage re-execute the test binary for its
// chroot helpers, as a daemon's main must.
func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	os.Exit(m.Run())
}
