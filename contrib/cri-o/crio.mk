# contrib/cri-o/crio.mk: real CRI-O v1.36.3 with nrigate's patch series
# (contrib/cri-o/patches), built against the patched NRI tree (make nri),
# included by the top Makefile.
#
#   make crio         bin/crio, bin/pinns, bin/crio-copyimg (rebuilt only when
#                     a CRI-O or NRI patch, this file or build.sh changed:
#                     build/cri-o/stamp)
#   make crio-pristine bin/crio-v1.36.3: CRI-O as released (the downgrade of
#                     contrib/cri-o/test/crio-restore.bats)
#   make crio-check   CRI-O's own checks on a fresh patched tree: DCO, go.mod
#                     tidy and moving only the allowed modules, the generated
#                     vendor/ diff, gofmt, go vet, golangci-lint (the version
#                     and configuration CRI-O pins), docs validation,
#                     generated docs and completions, log lines, test/nri.bats
#   make test-crio    crio-check, CRI-O's unit tests of the touched packages
#                     (-race, server/ without), CRI-O's own NRI suite (no
#                     required plugins; a required plugin whose namespaces
#                     exclude its pods; the required plugin of its new
#                     cases) and contrib/cri-o/test/*.bats
#   make run-crio     patched CRI-O in the foreground on /var/run/crio/crio.sock
#                     with the sample required plugin (make run)
#   make bench-barrier  tools/nri-bench -barrier on bin/crio-bench (make
#                     crio-bench: the series plus contrib/cri-o/bench's knobs):
#                     the publication barrier around the whole create vs
#                     from the relay (docs/performance.md)
#
# See contrib/cri-o/README.md and docs/cri-o.md.

.PHONY: crio crio-pristine crio-check crio-unit crio-nri-suite test-crio run-crio crio-bench bench-barrier

crio:
	bash contrib/cri-o/build.sh build

# The released CRI-O, which contrib/cri-o/test/crio-restore.bats downgrades to.
crio-pristine:
	bash contrib/cri-o/build.sh pristine

crio-check:
	bash contrib/cri-o/build.sh check

crio-unit: crio
	hack/test-summary.sh go "CRI-O unit tests (touched packages; -race but server/)" $(TESTLOGS)/crio-unit.json -- bash contrib/cri-o/build.sh unit

crio-nri-suite: crio
	bash contrib/cri-o/build.sh nritest
	TESTLOGS=$(TESTLOGS) bash contrib/cri-o/nri-suite.sh

test-crio: install-deps build crio crio-pristine crio-check crio-unit crio-nri-suite
	hack/test-summary.sh bats "bats contrib/cri-o/test" $(TESTLOGS)/crio-bats.tap -- $(BATS) --tap contrib/cri-o/test/*.bats

# The benchmark build (the series plus contrib/cri-o/bench's knobs) and the
# barrier benchmark of docs/performance.md (needs root).
BARRIER_FLAGS ?= -barrier-update-across -rounds 11 -n 160
crio-bench:
	bash contrib/cri-o/build.sh bench

bench-barrier: build crio-bench
	./bin/nri-bench -barrier $(BARRIER_FLAGS)

run-crio: install-deps build crio
	bash contrib/cri-o/run.sh

RUNTIME_TESTS += test-crio
