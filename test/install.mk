# test/install.mk: docs/install.md followed as written, and the docs'
# examples checked against the shipped files; included by the top Makefile.
#
#   make check-docs     hack/check-docs.sh: the examples marked as shipped
#                       files match them, docs/install.md's blocks are all
#                       marked for the test and its packages are in
#                       APT_PACKAGES, the NRI series leaves pkg/api and
#                       pkg/stub alone (part of make lint)
#   make test-install   test/install.bats: docs/install.md's recipe for CRI-O
#                       and containerd in a fresh clone, in a private mount
#                       namespace (test/install/namespace.sh) whose overlays
#                       take what it installs; the scratch directory goes
#                       when the test passes
#
# test-install needs the repository's own crio and containerd builds first:
# the recipe builds the same trees with the same flags (make crio, make
# containerd) in its clone, which the Go build cache then serves.

.PHONY: check-docs test-install

check-docs:
	bash hack/check-docs.sh

test-install: install-deps build crio containerd
	@scratch=$$(mktemp -d /tmp/nrigate-install.XXXXXX) && \
	hack/test-summary.sh bats "bats test/install.bats (docs/install.md, both runtimes)" $(TESTLOGS)/install.tap -- \
		unshare --mount --propagation private test/install/namespace.sh "$$scratch" $(BATS) --tap test/install.bats; \
	rc=$$?; \
	if [ $$rc -eq 0 ]; then rm -rf "$$scratch"; else echo "test-install: the recipe's files are in $$scratch"; fi; \
	exit $$rc

RUNTIME_TESTS += test-install
