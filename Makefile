# nrigate build and test entry points. `make run` and `make test` are the two
# commands of the README quick start; both install what they need first.
#
#   make build          bin/nri-faulty (every plugin of contrib/plugins), bin/nri-bench,
#                       bin/nri-npd-check (node-problem-detector's check),
#                       bin/nri-soak (the soak's schedule, checks and report) and
#                       bin/sdnotify (the NOTIFY_SOCKET of the watchdog tests)
#   make run            patched CRI-O in the foreground with the sample policy (run-crio)
#   make demo           hack/demo.sh: the scripted walk-through on $(RUNTIME)
#   make test           everything CI runs, with a per-suite summary at the end
#   make prebuild       the slow tool builds make test needs later (golangci-lint
#                       of each upstream, Kubernetes; hack/prebuild.sh): make
#                       test starts them first, in the background
#   make test-go        Go tests of the root module (not test/e2e), -race
#   make test-unit      the same under -short
#   make fuzz           the fuzz targets of NRI's label selector and policy scope, briefly
#   make lint           gofmt, go vet and check-docs (the docs' examples
#                       against the shipped files, test/install.mk)
#   make bench          NRI's policy benchmarks (contrib/nri/build.sh bench), then
#                       bin/nri-bench on CRI-O, then on containerd
#   make install-deps   the Debian packages and crictl the suites need
#   make clean          remove bin/ (build/, the runtimes' build trees, stays)
#
# The series' own targets (nri, nri-check, crio, containerd, test-crio,
# test-bats-crio, test-e2e-crio, parity, test-k8s, soak, ...) are in
# contrib/nri/nri.mk, contrib/cri-o/crio.mk, contrib/containerd/containerd.mk,
# test/runtimes.mk, test/install.mk (test-install: docs/install.md as
# written), test/k8s/k8s.mk and test/soak/soak.mk.

SHELL := /bin/bash
GO ?= go
# The module's Go toolchain lives in /usr/local/go on the CI machines.
export PATH := /usr/local/go/bin:$(shell $(GO) env GOPATH 2>/dev/null)/bin:$(PATH)

# gcc and libc6-dev are needed by go test -race (cgo) and CRI-O's pinns;
# libseccomp-dev and pkg-config by CRI-O's seccomp support (its seccomp build
# tag, contrib/cri-o/build.sh); make and ca-certificates by docs/install.md's
# recipe (test/install.bats runs it with /usr read-only: what it installs
# must be here).
GOTEST_FLAGS ?= -race -count=1
BATS ?= bats
CRICTL_VERSION ?= v1.37.0
APT_PACKAGES := runc conmon bats busybox-static jq gcc libc6-dev make ca-certificates pkg-config libseccomp-dev iproute2 curl containernetworking-plugins git
# The runtime make demo runs on (crio or containerd).
RUNTIME ?= crio

# Every main package under contrib/plugins is built into bin/, so plugins
# added later are picked up without editing this file.
PLUGINS := $(notdir $(patsubst %/,%,$(dir $(wildcard contrib/plugins/*/main.go))))

# Real runtimes built from their released modules with our patch series:
# each makefile adds its build and test targets and appends its test
# targets to RUNTIME_TESTS, which make test runs after the Go suites.
RUNTIME_TESTS :=
-include contrib/nri/nri.mk
-include contrib/cri-o/crio.mk
-include contrib/containerd/containerd.mk
-include test/runtimes.mk
-include test/install.mk
-include test/k8s/k8s.mk
-include test/soak/soak.mk

.PHONY: all build prebuild test test-go test-unit fuzz lint bench install-deps run demo clean

all: build

build:
	@for p in $(PLUGINS); do \
		echo "$(GO) build -o bin/$$p ./contrib/plugins/$$p"; \
		$(GO) build -o bin/$$p ./contrib/plugins/$$p || exit 1; \
	done
	$(GO) build -o bin/nri-bench ./tools/nri-bench
	$(GO) build -o bin/nri-soak ./tools/nri-soak
	$(GO) build -o bin/sdnotify ./tools/sdnotify
	CGO_ENABLED=0 $(GO) build -o bin/nri-npd-check ./tools/nri-npd-check

# test is everything CI runs: lint, the Go tests, NRI's checks and tests on
# the patched NRI tree, then each runtime's suites (RUNTIME_TESTS).
test: install-deps prebuild lint build test-go nri-check $(RUNTIME_TESTS)
	@echo "== test summary ==" && cat $(SUMMARY_FILE) && rm -f $(SUMMARY_FILE)

# prebuild starts the builds make test needs late (golangci-lint of each
# upstream, Kubernetes) in the background at nice 19, to use the CPU the
# runtime suites leave idle; it stops with this make (hack/prebuild.sh).
# Alone (make prebuild) it runs to the end in the background.
prebuild:
	hack/prebuild.sh $(if $(filter test,$(MAKECMDGOALS)),$(shell echo $$PPID),1) $(TESTLOGS)/prebuild.log

# Each suite ends with a one-line summary (tests, passed, failed, skipped)
# from hack/test-summary.sh, which keeps the logs under $(TESTLOGS); make
# test repeats the lines at the end.
TESTLOGS ?= bin/test-logs
export SUMMARY_FILE ?= $(CURDIR)/$(TESTLOGS)/summary.txt
# Suites append to it when run alone too.
$(shell mkdir -p $(dir $(SUMMARY_FILE)))
ifneq ($(filter test,$(MAKECMDGOALS)),)
$(shell rm -f $(SUMMARY_FILE))
endif

# The root module's packages but test/e2e, which drives a runtime
# (test/runtimes.mk's test-e2e-*).
GO_PKGS = $(shell $(GO) list ./... | grep -v '/test/e2e$$')
test-go: build
	hack/test-summary.sh go "go test (root module)" $(TESTLOGS)/go-root.json -- $(GO) test $(GOTEST_FLAGS) $(GO_PKGS)

# test-unit runs the fast tests only: test-go's packages under -short,
# where the ones that need root or plugin processes skip themselves.
test-unit:
	$(GO) test $(GOTEST_FLAGS) -short $(GO_PKGS)

# fuzz runs, briefly, the fuzz targets of contrib/nri/selectortest: NRI's
# label selector against k8s.io/apimachinery/pkg/labels, and the policy's
# scope and exemption decision against the documented rule; make nri-check
# runs them too.
fuzz:
	bash contrib/nri/build.sh selector

# bench runs NRI's policy benchmarks (the relay with and without a required
# plugin, and the two interleaved request by request, with benchstat), then
# bin/nri-bench on patched CRI-O and then on patched containerd, each
# runtime once (needs root; docs/performance.md).
BENCH_FLAGS ?= -n 300 -rounds 11 -reps 10
bench: build crio containerd
	bash contrib/nri/build.sh bench
	./bin/nri-bench -runtimes crio,containerd $(BENCH_FLAGS)

lint: check-docs
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

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
# required, fail-closed).
run: run-crio

# demo walks through the policy on $(RUNTIME) (default crio), which
# hack/demo.sh starts and stops itself; it exits non-zero if any step
# misbehaves.
demo: install-deps build $(RUNTIME)
	RUNTIME=$(RUNTIME) bash hack/demo.sh

clean:
	rm -rf bin
