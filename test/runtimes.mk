# test/runtimes.mk: the policy suites against patched CRI-O and patched
# containerd, and the parity table. Included by the top Makefile after
# contrib/cri-o/crio.mk and contrib/containerd/containerd.mk, whose `crio`
# and `containerd` targets build the binaries into bin/.
#
#   make test-bats-crio         test/policy.bats and test/demo.bats, RUNTIME=crio
#   make test-e2e-crio          test/e2e on CRI-O: the restart loop, load, leaks, a hung plugin
#   make test-bats-containerd   test/policy.bats and test/demo.bats, RUNTIME=containerd
#   make test-e2e-containerd    test/e2e's restart-loop spec on containerd
#   make parity                 docs/parity.md from policy.bats on both runtimes and on
#                               CRI-O with NRI's default validator instead of the policy

.PHONY: test-bats-crio test-e2e-crio test-bats-containerd test-e2e-containerd parity

# The build targets of the runtime makefiles, when they are there.
CRIO_BUILD := $(if $(wildcard contrib/cri-o/crio.mk),crio)
CONTAINERD_BUILD := $(if $(wildcard contrib/containerd/containerd.mk),containerd)
RUNTIME_SUITES := test/policy.bats test/demo.bats
# containerd runs the zero-escape restart loop. The load and leak specs
# read CRI-O's store, runroot and conmon processes; the hung-plugin spec's
# teardown bound (one 1 s request timeout plus margin, 2.5 s) holds on
# CRI-O, while containerd's teardown took 3.7 s on this 2-core machine
# under load, so that spec is measured on CRI-O.
E2E_CONTAINERD_FOCUS := a required plugin restarting in a loop

test-bats-crio: build $(CRIO_BUILD)
	RUNTIME=crio hack/test-summary.sh bats "RUNTIME=crio bats $(RUNTIME_SUITES)" $(TESTLOGS)/policy-crio.tap -- $(BATS) --tap $(RUNTIME_SUITES)

test-e2e-crio: build $(CRIO_BUILD)
	NRIGATE_E2E_RUNTIME=crio hack/test-summary.sh go "e2e (crio)" $(TESTLOGS)/e2e-crio.json -- $(GO) test -count=1 -timeout 30m ./test/e2e

test-bats-containerd: build $(CONTAINERD_BUILD)
	RUNTIME=containerd hack/test-summary.sh bats "RUNTIME=containerd bats $(RUNTIME_SUITES)" $(TESTLOGS)/policy-containerd.tap -- $(BATS) --tap $(RUNTIME_SUITES)

test-e2e-containerd: build $(CONTAINERD_BUILD)
	NRIGATE_E2E_RUNTIME=containerd hack/test-summary.sh go "e2e (containerd)" $(TESTLOGS)/e2e-containerd.json -- $(GO) test -count=1 ./test/e2e -ginkgo.focus '$(E2E_CONTAINERD_FOCUS)'

# Only for a runtime whose makefile is there (so `make test` under CI=true
# does not fail for a runtime that has no build yet).
RUNTIME_TESTS += $(if $(CRIO_BUILD),test-bats-crio test-e2e-crio) $(if $(CONTAINERD_BUILD),test-bats-containerd test-e2e-containerd)

# parity runs test/policy.bats on both runtimes and on CRI-O with upstream's
# default validator alone, and writes docs/parity.md from the records.
parity: build $(CRIO_BUILD) $(CONTAINERD_BUILD)
	bash hack/parity.sh
