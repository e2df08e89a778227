# contrib/nri/nri.mk: NRI v0.12.5 with the plugin policy series
# (contrib/nri/patches), included by the top Makefile.
#
#   make nri        build/nri/src, the patched tree the runtimes build
#                   against (rebuilt only when an input changed)
#   make nri-check  NRI's own checks on a fresh patched tree: go.mod
#                   unchanged, gofmt, go vet, golangci-lint as NRI's CI runs
#                   it, DCO; go test -race ./... of the whole module; the
#                   differential test of NRI's label selector against
#                   k8s.io/apimachinery/pkg/labels; and contrib/nri/baseline,
#                   what released v0.12.5 does with the same faults
#
# See contrib/nri/README.md (the pull request's text).

.PHONY: nri nri-check

nri:
	bash contrib/nri/build.sh build

nri-check:
	bash contrib/nri/build.sh check
	cd build/nri/check && $(CURDIR)/hack/test-summary.sh go "NRI (patched): go test -race ./..." $(CURDIR)/$(TESTLOGS)/nri.json -- $(GO) test -race -count=1 ./...
	bash contrib/nri/build.sh selector
	cd contrib/nri/baseline && $(CURDIR)/hack/test-summary.sh go "NRI v0.12.5 baseline (unpatched)" $(CURDIR)/$(TESTLOGS)/nri-baseline.json -- $(GO) test -race -count=1 ./...
