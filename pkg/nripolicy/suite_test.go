package nripolicy_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/reporters"
	. "github.com/onsi/gomega"

	"github.com/nrigate/nrigate/pkg/nripolicy/internal/testrig"
)

// faultyBin is the nri-faulty plugin, built once for the whole suite.
var faultyBin string

// TestMain removes the plugin binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	testrig.RemoveBuilt()
	os.Exit(code)
}

// TestNRIPolicy runs the ginkgo suites of the package: the fault matrix
// (integration_*_test.go) against the real upstream adaptation and real
// plugin processes.
func TestNRIPolicy(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "nripolicy")
}

var _ = BeforeSuite(func() {
	testrig.QuietNRILog()
	bin, err := testrig.FaultyBinary()
	Expect(err).NotTo(HaveOccurred())
	faultyBin = bin
})

// With GINKGO_REPORT_DIR set (hack/test-summary.sh sets it), the suite
// writes ginkgo's JSON report there, so that the summary counts the specs
// rather than the one Go test that runs them.
var _ = ReportAfterSuite("JSON report for hack/test-summary.sh", func(r Report) {
	if dir := os.Getenv("GINKGO_REPORT_DIR"); dir != "" {
		Expect(reporters.GenerateJSONReport(r, filepath.Join(dir, "nripolicy.json"))).To(Succeed())
	}
})
