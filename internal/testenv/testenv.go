// Package testenv holds what nrigate's Go tests share about their
// environment: skipping a test whose prerequisites (root, runc, conmon,
// busybox, jq, the test image) are missing, which fails instead under CI=true
// so that a CI run cannot pass by skipping, and building the test plugins.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// CI reports whether the tests run in CI (CI=true, set by .ci/run's caller).
func CI() bool { return os.Getenv("CI") == "true" }

// Skip skips the test because a prerequisite is missing; under CI=true it
// fails the test instead. Skips that are a choice (-short) use t.Skip.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	if CI() {
		t.Fatalf("CI=true, so this test may not skip: "+format, args...)
	}
	t.Skipf(format, args...)
}

// RequireRoot skips (or fails in CI) unless the test runs as root.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, "needs root: %s", why)
	}
}

// RequireFiles skips (or fails in CI) unless every path exists.
func RequireFiles(t testing.TB, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			Skip(t, "%s not installed (apt-get install runc conmon busybox-static jq)", p)
		}
	}
}

// RequireCommands skips (or fails in CI) unless every command is in PATH.
func RequireCommands(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			Skip(t, "%s not installed", n)
		}
	}
}

// RepoRoot is the root of the nrigate checkout the tests run from.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// BuildPlugin builds contrib/plugins/NAME into dir and returns the binary.
func BuildPlugin(t testing.TB, name, dir string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, "./contrib/plugins/"+name)
	cmd.Dir = RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, b)
	}
	return out
}

// SkipShort skips a long test (real containers, plugin processes) under
// -short, which make test-unit uses. It is a choice, not a missing
// prerequisite, so it skips in CI too.
func SkipShort(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: %s", what)
	}
}

// ContainerRig skips the test (under -short, or failing in CI for a missing
// prerequisite) unless it can run real containers: root, the runtime files
// given (runc and conmon for the in-tree runtime), busybox-static and jq.
// It returns a temporary directory, removed when the test ends, holding
// hack/make-test-image.sh's busybox archive. Not t.TempDir: sockets live
// there, and unix socket paths are short.
func ContainerRig(t testing.TB, runtimeFiles ...string) (dir, archive string) {
	t.Helper()
	SkipShort(t, "runs real containers")
	RequireRoot(t, "storage, runc and netns")
	RequireFiles(t, append(runtimeFiles, "/bin/busybox")...)
	RequireCommands(t, "jq")
	dir, err := os.MkdirTemp("", "nrig")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	archive = filepath.Join(dir, "busybox.tar")
	if out, err := exec.Command(filepath.Join(RepoRoot(), "hack", "make-test-image.sh"), archive).CombinedOutput(); err != nil {
		t.Fatalf("make-test-image: %v %s", err, out)
	}
	return dir, archive
}
