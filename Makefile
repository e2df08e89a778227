# nrigate build and test entry points. `make run` and `make test` are the two
# commands of the README quick start; both install what they need first.

SHELL := /bin/bash
GO ?= go
# The module's Go toolchain lives in /usr/local/go on the CI machines.
export PATH := /usr/local/go/bin:$(shell $(GO) env GOPATH 2>/dev/null)/bin:$(PATH)

# gcc and libc6-dev are needed by go test -race (cgo).

# BUILDTAGS lets go.podman.io/storage and go.podman.io/image build without
# system libraries: no btrfs or devicemapper graph drivers, and the pure-Go
# OpenPGP implementation instead of gpgme.
BUILDTAGS ?= exclude_graphdriver_btrfs exclude_graphdriver_devicemapper containers_image_openpgp
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)
LDFLAGS := -X github.com/nrigate/nrigate/internal/version.Version=$(VERSION)
GOTEST_FLAGS ?= -race -count=1
BATS ?= bats
CRICTL_VERSION ?= v1.37.0
APT_PACKAGES := runc conmon bats busybox-static jq gcc libc6-dev iproute2 curl containernetworking-plugins git

# pkg/nripolicy is a Go module of its own (so that CRI-O and containerd
# can require it without the root module's dependencies); the root module
# replaces it with this checkout. Every Go target runs in both modules.
POLICY_MOD := pkg/nripolicy

# Every main package under contrib/plugins is built into bin/, so plugins
# added later are picked up without editing this file.
PLUGINS := $(notdir $(patsubst %/,%,$(dir $(wildcard contrib/plugins/*/main.go))))

# Real runtimes built from their released modules with our patch series:
# each makefile adds its build and test targets and appends its test
# target to RUNTIME_TESTS, which make test runs after the in-tree suites.
RUNTIME_TESTS :=
-include contrib/cri-o/crio.mk
-include contrib/containerd/containerd.mk
-include test/runtimes.mk
-include test/k8s/k8s.mk

.PHONY: all build test test-go test-unit test-integration test-bats bench fuzz lint install-deps run run-nrigate demo clean

all: build

build:
	$(GO) build -tags "$(BUILDTAGS)" -ldflags "$(LDFLAGS)" -o bin/nrigate ./cmd/nrigate
	$(GO) build -tags "$(BUILDTAGS)" -o bin/nrigate-bench ./cmd/nrigate-bench
	@for p in $(PLUGINS); do \
		echo "$(GO) build -o bin/$$p ./contrib/plugins/$$p"; \
		$(GO) build -tags "$(BUILDTAGS)" -o bin/$$p ./contrib/plugins/$$p || exit 1; \
	done

# test is everything CI runs. Go tests run once (test-go covers unit and
# ginkgo integration suites alike); test-unit and test-integration are
# narrower entry points for development.
test: install-deps lint build test-go fuzz test-bats $(RUNTIME_TESTS)
	@echo "== test summary ==" && cat $(SUMMARY_FILE) && rm -f $(SUMMARY_FILE)

# Each suite ends with a one-line summary (tests, passed, failed, skipped)
# from hack/test-summary.sh, which keeps the logs under $(TESTLOGS); make
# test repeats the lines at the end.
TESTLOGS ?= bin/test-logs
export SUMMARY_FILE ?= $(CURDIR)/$(TESTLOGS)/summary.txt
ifneq ($(filter test,$(MAKECMDGOALS)),)
$(shell rm -f $(SUMMARY_FILE))
endif

test-go:
	hack/test-summary.sh go "go test (root module)" $(TESTLOGS)/go-root.json -- $(GO) test $(GOTEST_FLAGS) -tags "$(BUILDTAGS)" ./...
	cd $(POLICY_MOD) && $(CURDIR)/hack/test-summary.sh go "go test (pkg/nripolicy)" $(CURDIR)/$(TESTLOGS)/go-nripolicy.json -- $(GO) test $(GOTEST_FLAGS) ./...

# test-unit runs the fast tests only: the packages' tests under -short, where
# the ones that need root, runc, conmon or plugin processes skip themselves;
# the suites under test/ (ginkgo end-to-end) are test-integration's.
UNIT_PKGS = $(shell $(GO) list ./... 2>/dev/null | grep -v '/test/')
test-unit:
	$(GO) test $(GOTEST_FLAGS) -short -tags "$(BUILDTAGS)" $(UNIT_PKGS)
	cd $(POLICY_MOD) && $(GO) test $(GOTEST_FLAGS) -short ./...

# test-integration runs the ginkgo and end-to-end suites (test/ and the
# integration tests of the packages), without -short.
# (go list drops ./test/... while it holds no Go package yet.)
INTEGRATION_PKGS = $(shell $(GO) list ./test/... 2>/dev/null)
test-integration: build
	$(GO) test $(GOTEST_FLAGS) -tags "$(BUILDTAGS)" $(INTEGRATION_PKGS)
	cd $(POLICY_MOD) && $(GO) test $(GOTEST_FLAGS) ./...

test-bats: build
	hack/test-summary.sh bats "bats test/*.bats" $(TESTLOGS)/bats.tap -- $(BATS) --tap test/*.bats

# fuzz runs each go test -fuzz target briefly (go test -fuzz takes one
# package and one target per run). The seed corpora under
# */testdata/fuzz/ also run in every plain go test. The budget is a count
# of executions, not a duration: with a duration, Go before 1.27 can fail
# a clean run with "context deadline exceeded" as the time runs out
# (go.dev/issue/75804); a count also gives every machine the same work
# (6000 runs take 5-10 s per target on 2 cores).
FUZZTIME ?= 6000x
FUZZMINIMIZETIME ?= 200x
# Each target is MODULE_DIR:PACKAGE:FUZZ_FUNC.
FUZZ_TARGETS := .:./pkg/config:FuzzLoad $(POLICY_MOD):.:FuzzPluginConfig $(POLICY_MOD):.:FuzzScope
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		IFS=: read -r dir pkg fn <<<"$$t"; \
		echo "(cd $$dir && $(GO) test -run '^$$' -fuzz '^$$fn$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg)"; \
		(cd $$dir && $(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg) || exit 1; \
	done

# bench runs the Go benchmarks, then the end-to-end benchmark of
# cmd/nrigate-bench (needs root, runc and conmon; docs/performance.md).
BENCH_FLAGS ?= -n 300 -rounds 11 -reps 20
bench: build
	$(GO) test -run '^$$' -bench . -benchmem -tags "$(BUILDTAGS)" ./...
	cd $(POLICY_MOD) && $(GO) test -run '^$$' -bench . -benchmem ./...
	./bin/nrigate-bench $(BENCH_FLAGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags "$(BUILDTAGS)" ./...
	cd $(POLICY_MOD) && $(GO) vet ./...

install-deps:
	@missing=""; \
	for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; \
	fi
	@command -v crictl >/dev/null || { \
		echo "installing crictl $(CRICTL_VERSION)"; \
		GOFLAGS=-mod=mod $(GO) install sigs.k8s.io/cri-tools/cmd/crictl@$(CRICTL_VERSION); \
	}

# run starts patched CRI-O (contrib/cri-o/crio.mk's run-crio) in the
# foreground with the sample policy of contrib/demo (plugin nri-faulty
# required, fail-closed); run-nrigate does the same with the in-tree daemon.
run: run-crio

run-nrigate: install-deps build
	./hack/make-test-image.sh bin/busybox.tar
	@echo "nrigate starts in the foreground with contrib/demo/crio.conf.d/ (nri-faulty required, fail, 3s wait, namespace system exempt)."
	@echo "In another shell, as root:"
	@echo "  crictl --runtime-endpoint unix:///var/run/nrigate/nrigate.sock info     # NRIPluginsReady=false until the plugin runs"
	@echo "  crictl --runtime-endpoint unix:///var/run/nrigate/nrigate.sock pull oci-archive:$(CURDIR)/bin/busybox.tar"
	@echo "  bin/nri-faulty --name nri-faulty                                         # the required plugin, on /var/run/nri/nri.sock"
	@echo "  bin/nrigate --listen /var/run/nrigate/nrigate.sock status nri"
	./bin/nrigate --config contrib/demo/crio.conf --config-dir contrib/demo/crio.conf.d

# demo walks through the policy against a daemon it starts and stops
# itself (hack/demo.sh); it exits non-zero if any step misbehaves.
demo: install-deps build
	bash hack/demo.sh

clean:
	rm -rf bin
