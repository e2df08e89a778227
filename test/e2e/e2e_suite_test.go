// Package e2e drives patched CRI-O (NRIGATE_E2E_RUNTIME=crio, the default)
// or containerd (NRIGATE_E2E_RUNTIME=containerd) through the CRI gRPC API
// with the real bin/nri-faulty plugin, at a volume the BATS suite cannot
// reach. The runtime is started by test/e2e/runtime.sh with the BATS
// helpers' config (test/critest).
package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/reporters"
	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/test/critest"
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "nrigate e2e")
}

// With GINKGO_REPORT_DIR set (hack/test-summary.sh sets it), the suite
// writes ginkgo's JSON report there, so that the summary counts the specs
// rather than the one Go test that runs them.
var _ = ReportAfterSuite("JSON report for hack/test-summary.sh", func(r Report) {
	if dir := os.Getenv("GINKGO_REPORT_DIR"); dir != "" {
		Expect(reporters.GenerateJSONReport(r, filepath.Join(dir, "e2e.json"))).To(Succeed())
	}
})

var (
	repoRoot  string
	testImage string
	faultyBin string
)

// e2eRuntime is the runtime the suite drives.
var e2eRuntime = func() string {
	if r := os.Getenv("NRIGATE_E2E_RUNTIME"); r != "" {
		return r
	}
	return "crio"
}()

var _ = BeforeSuite(func() {
	if os.Getuid() != 0 {
		prereqSkip("needs root")
	}
	root, err := filepath.Abs("../..")
	Expect(err).NotTo(HaveOccurred())
	repoRoot = root
	faultyBin = filepath.Join(repoRoot, "bin/nri-faulty")
	if _, err := os.Stat(faultyBin); err != nil {
		prereqSkip("bin/nri-faulty not built (run make build)")
	}
	for _, f := range []string{"/bin/busybox", "/usr/bin/jq"} {
		if _, err := os.Stat(f); err != nil {
			prereqSkip(f + " not installed (run make install-deps)")
		}
	}
	dir, err := os.MkdirTemp("", "nrig-e2e")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	testImage = filepath.Join(dir, "busybox.tar")
	out, err := exec.Command(filepath.Join(repoRoot, "hack/make-test-image.sh"), testImage).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
})

// prereqSkip skips for a missing prerequisite; under CI=true it fails
// instead, so that CI cannot pass by skipping.
func prereqSkip(why string) {
	if os.Getenv("CI") == "true" {
		Fail("CI=true, so this suite may not skip: " + why)
	}
	Skip(why)
}

// daemon is the runtime under test with the spec's plugins.
type daemon struct {
	*critest.Runtime
}

// startDaemon starts the NRIGATE_E2E_RUNTIME runtime with policy (CRI-O
// syntax; empty for none) and registers its cleanup.
func startDaemon(policy string, metrics bool) *daemon {
	dir, err := os.MkdirTemp("", "nrig")
	Expect(err).NotTo(HaveOccurred())
	r, err := critest.Start(critest.Options{Repo: repoRoot, Runtime: e2eRuntime, Dir: dir, Policy: policy,
		Image: testImage, Metrics: metrics}, GinkgoWriter)
	if errors.Is(err, critest.ErrUnavailable) {
		_ = os.RemoveAll(dir)
		prereqSkip(err.Error())
	}
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		if err := r.Stop(); err != nil {
			GinkgoWriter.Println(err)
		}
		_ = os.RemoveAll(dir)
	})
	return &daemon{r}
}

// startFaulty runs bin/nri-faulty as 10-guard with extra args, logging to
// the daemon's faulty.log, and returns once it is synchronized with the
// runtime; it is killed when the spec ends.
func (d *daemon) startFaulty(args ...string) *critest.Plugin {
	p, err := critest.StartPlugin(faultyBin, d.NRISock, d.faultyLog(), 10*time.Second,
		append([]string{"--name", "guard", "--idx", "10"}, args...)...)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	DeferCleanup(p.Kill)
	return p
}

func (d *daemon) faultyLog() string { return filepath.Join(d.Dir, "faulty.log") }

// runPod creates a pod in namespace default.
func (d *daemon) runPod(name string) (string, *runtimeapi.PodSandboxConfig) {
	id, cfg, err := d.RunPod(name)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return id, cfg
}
