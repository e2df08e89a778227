package nri

import (
	"os"
	"testing"

	"go.podman.io/storage/pkg/reexec"
)

// TestMain lets containers/storage re-execute the test binary (the
// runtime tests open a real store).
func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	os.Exit(m.Run())
}
