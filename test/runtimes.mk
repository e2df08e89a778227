# test/runtimes.mk: the policy suites (test/policy.bats, the demo, the e2e
# restart-loop spec) against patched CRI-O and patched containerd, the
# parity table and the three-runtime benchmark. Included by the top
# Makefile after contrib/cri-o/crio.mk and contrib/containerd/containerd.mk,
# whose `crio` and `containerd` targets build the binaries into bin/.

.PHONY: test-bats-crio test-bats-containerd parity bench-runtimes

# The build targets of the runtime makefiles, when they are there.
CRIO_BUILD := $(if $(wildcard contrib/cri-o/crio.mk),crio)
CONTAINERD_BUILD := $(if $(wildcard contrib/containerd/containerd.mk),containerd)
# The e2e spec every runtime runs: a required plugin restarting in a loop,
# 0 containers without its injection.
E2E_RUNTIME_FOCUS := a required plugin restarting in a loop
RUNTIME_SUITES := test/policy.bats test/demo.bats

# test-bats-RUNTIME: the same files and assertions as for the in-tree
# runtime, with RUNTIME switching the daemon (test/helpers.bash).
test-bats-crio: build $(CRIO_BUILD)
	RUNTIME=crio hack/test-summary.sh bats "RUNTIME=crio bats $(RUNTIME_SUITES)" $(TESTLOGS)/policy-crio.tap -- $(BATS) --tap $(RUNTIME_SUITES)
	NRIGATE_E2E_RUNTIME=crio hack/test-summary.sh go "e2e restart loop (crio)" $(TESTLOGS)/e2e-crio.json -- $(GO) test -count=1 -tags "$(BUILDTAGS)" ./test/e2e -ginkgo.focus '$(E2E_RUNTIME_FOCUS)'

test-bats-containerd: build $(CONTAINERD_BUILD)
	RUNTIME=containerd hack/test-summary.sh bats "RUNTIME=containerd bats $(RUNTIME_SUITES)" $(TESTLOGS)/policy-containerd.tap -- $(BATS) --tap $(RUNTIME_SUITES)
	NRIGATE_E2E_RUNTIME=containerd hack/test-summary.sh go "e2e restart loop (containerd)" $(TESTLOGS)/e2e-containerd.json -- $(GO) test -count=1 -tags "$(BUILDTAGS)" ./test/e2e -ginkgo.focus '$(E2E_RUNTIME_FOCUS)'

# Only for a runtime whose makefile is there (so `make test` under CI=true
# does not fail for a runtime that has no build yet).
RUNTIME_TESTS += $(if $(CRIO_BUILD),test-bats-crio) $(if $(CONTAINERD_BUILD),test-bats-containerd)

# parity runs test/policy.bats on the three runtimes and with upstream's
# default validator alone, and writes docs/parity.md from the records.
parity: build $(CRIO_BUILD) $(CONTAINERD_BUILD)
	bash hack/parity.sh

# bench-runtimes: bin/nrigate-bench on the three runtimes side by side
# (docs/performance.md); make bench runs it after the in-tree benchmark.
RUNTIME_BENCH_FLAGS ?= -n 300 -rounds 11 -reps 10
BENCH_RUNTIMES ?= nrigate$(if $(CRIO_BUILD),$(comma)crio)$(if $(CONTAINERD_BUILD),$(comma)containerd)
comma := ,
bench-runtimes: build $(CRIO_BUILD) $(CONTAINERD_BUILD)
	./bin/nrigate-bench -runtimes $(BENCH_RUNTIMES) $(RUNTIME_BENCH_FLAGS)
bench: bench-runtimes
