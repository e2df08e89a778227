# contrib/containerd/containerd.mk: real containerd v2.4.2 with nrigate's
# patch series (contrib/containerd/patches), built against the patched NRI
# tree (contrib/nri, make nri); included by the top Makefile.
#
#   make containerd        bin/containerd, bin/containerd-shim-runc-v2, bin/ctr
#                          (rebuilt only when a patch of containerd or NRI,
#                          this file or build.sh changed: build/containerd/stamp)
#   make containerd-check  containerd's own checks of the series on a fresh
#                          copy: git am, DCO, go.mod and the generated vendor/
#                          move only github.com/containerd/nri, gofmt, go vet,
#                          containerd's golangci-lint config (its pinned v2.14.0)
#   make containerd-unit   containerd's unit tests of the touched packages, -race
#   make containerd-integration
#                          containerd's NRI integration tests (integration/
#                          nri_test.go, the policy cases included) against a
#                          private bin/containerd
#   make test-containerd   all of the above, then contrib/containerd/test/*.bats
#
# The build tree is build/containerd/ (ignored output). See
# contrib/containerd/README.md and docs/containerd.md.

.PHONY: containerd containerd-pristine containerd-check containerd-unit containerd-integration test-containerd

containerd:
	bash contrib/containerd/build.sh build

# The released containerd, which contrib/containerd/test downgrades to.
containerd-pristine:
	bash contrib/containerd/build.sh pristine

containerd-check:
	bash contrib/containerd/build.sh check

containerd-unit: containerd
	hack/test-summary.sh go "containerd unit tests (touched packages, -race)" $(TESTLOGS)/containerd-unit.json -- bash contrib/containerd/build.sh unit

containerd-integration: containerd
	hack/test-summary.sh go "containerd integration/nri_test.go" $(TESTLOGS)/containerd-integration.json -- bash contrib/containerd/build.sh integration

test-containerd: install-deps build containerd containerd-pristine containerd-check containerd-unit containerd-integration
	hack/test-summary.sh bats "bats contrib/containerd/test" $(TESTLOGS)/containerd-bats.tap -- $(BATS) --tap contrib/containerd/test/*.bats

RUNTIME_TESTS += test-containerd
