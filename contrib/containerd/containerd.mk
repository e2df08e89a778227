# contrib/containerd/containerd.mk: real containerd v2.4.2 with nrigate's
# patch series (contrib/containerd/patches), included by the top Makefile.
#
#   make containerd        bin/containerd, bin/containerd-shim-runc-v2, bin/ctr
#                          (rebuilt only when a patch, this file, build.sh or
#                          pkg/nripolicy changed: build/containerd/stamp)
#   make containerd-check  the series applies cleanly to a fresh copy, go vet
#                          on the packages it touches, go.mod moves only the
#                          allowed modules
#   make test-containerd   containerd-check, containerd's own unit tests of
#                          the touched packages under -race, and
#                          contrib/containerd/test/*.bats against bin/containerd
#
# The build tree is build/containerd/ (ignored output). See
# contrib/containerd/README.md and docs/containerd.md.

.PHONY: containerd containerd-check containerd-unit test-containerd

containerd:
	bash contrib/containerd/build.sh build

containerd-check:
	bash contrib/containerd/build.sh check

containerd-unit: containerd
	bash contrib/containerd/build.sh unit

test-containerd: install-deps build containerd containerd-check containerd-unit
	hack/test-summary.sh bats "bats contrib/containerd/test" $(TESTLOGS)/containerd-bats.tap -- $(BATS) --tap contrib/containerd/test/*.bats

RUNTIME_TESTS += test-containerd
