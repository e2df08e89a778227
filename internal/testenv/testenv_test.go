package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSkipFailsInCI runs a skipping test in a child process, with and
// without CI=true: it must skip without and fail with.
func TestSkipFailsInCI(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "1" {
		Skip(t, "prerequisite %s missing", "x")
		return
	}
	for _, ci := range []string{"", "true"} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestSkipFailsInCI$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", "CI="+ci)
		out, err := cmd.CombinedOutput()
		if ci == "" && (err != nil || !strings.Contains(string(out), "--- SKIP")) {
			t.Errorf("CI unset: want a skip, got %v\n%s", err, out)
		}
		if ci == "true" && (err == nil || !strings.Contains(string(out), "--- FAIL") || !strings.Contains(string(out), "prerequisite x missing")) {
			t.Errorf("CI=true: want a failure naming the prerequisite, got %v\n%s", err, out)
		}
	}
}
