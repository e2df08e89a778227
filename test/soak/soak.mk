# test/soak/soak.mk: the soak (issue 37), included by the top Makefile
# after test/k8s/k8s.mk.
#
#   make soak            test/soak/soak.bash: the two-node cluster of make
#                        test-k8s under churn while a seeded schedule injects
#                        faults for SOAK_DURATION (default 30m); SOAK_SEED
#                        (default: a random one, printed first) runs a
#                        schedule again; SOAK_KINDS the fault kinds to
#                        draw from. Records, summary and plot in
#                        $(SOAK_DIR); exit 1 on a violation, naming the
#                        first (SOAK_KEEP_GOING=1: every violation,
#                        the soak goes on)
#   make soak-docs       docs/reliability.md from the records of the runs in
#                        SOAK_RUNS (default: the last make soak's)
#
#   make test-soak       the CI's short soak: 5 minutes, seed 136, on a
#                        cluster of its own (on the cluster of make
#                        test-k8s, what its tests left behind, such as IPs
#                        of pods killed by its node restart, read as the
#                        soak's leaks)

.PHONY: soak soak-docs test-soak

SOAK_DURATION ?= 30m
SOAK_DIR ?= $(CURDIR)/$(TESTLOGS)/soak
SOAK_RUNS ?= $(SOAK_DIR)

soak: install-deps k8s $(CRIO_BUILD) $(CONTAINERD_BUILD)
	SOAK_DURATION=$(SOAK_DURATION) SOAK_DIR=$(SOAK_DIR) $(if $(SOAK_SEED),SOAK_SEED=$(SOAK_SEED)) \
		$(if $(SOAK_KEEP_GOING),SOAK_KEEP_GOING=$(SOAK_KEEP_GOING)) $(if $(SOAK_KINDS),SOAK_KINDS=$(SOAK_KINDS)) \
		bash test/soak/soak.bash

soak-docs:
	$(GO) run ./tools/nri-soak docs -out docs/reliability.md -defects test/soak/defects.md $(SOAK_RUNS)

test-soak: install-deps k8s $(CRIO_BUILD) $(CONTAINERD_BUILD)
	SOAK_DURATION=5m SOAK_SEED=136 SOAK_DIR=$(CURDIR)/$(TESTLOGS)/soak-ci \
		SOAK_COMMAND="make test-soak (SOAK_DURATION=5m SOAK_SEED=136)" bash test/soak/soak.bash

RUNTIME_TESTS += test-soak
