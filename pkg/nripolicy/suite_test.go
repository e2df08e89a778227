package nripolicy_test

import (
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
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
