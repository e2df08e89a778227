# test/k8s/k8s.mk: Kubernetes end to end (issues 20 and 36), included by the
# top Makefile after the runtime makefiles.
#
#   make k8s             build/k8s/bin: kube-apiserver, kube-controller-manager,
#                        kube-scheduler, kubelet, kubectl (k8s.io/kubernetes
#                        v1.37.2), etcd (v3.7.3), cfssl/cfssljson (v1.6.5);
#                        skipped while the stamp of its inputs is unchanged;
#                        then node-problem-detector (v1.34.0; NPD_VERSION=
#                        another), a step with a stamp of its own
#                        (test/k8s/build-npd.sh)
#   make test-k8s        test/k8s/k8s.bats: one cluster of two nodes on this
#                        machine, node 1 on patched CRI-O and node 2 on
#                        patched containerd, the plugin as the one DaemonSet
#                        of contrib/kubernetes with each runtime's drop-in of
#                        the same directory, node-problem-detector as the
#                        DaemonSet of contrib/kubernetes/npd; the records go
#                        to $(TESTLOGS)/k8s
#   make k8s-docs        docs/kubernetes.md from those records (hack/k8s-docs.sh)
#
# See test/k8s/lib.bash for what the cluster is made of and what the test
# substitutes in the shipped files.

.PHONY: k8s test-k8s k8s-docs

# local-up-cluster.sh checks for openssl; unshare and nsenter (util-linux)
# give each node its private mount namespace.
APT_PACKAGES += openssl util-linux

K8S_RESULTS ?= $(CURDIR)/$(TESTLOGS)/k8s
export K8S_RESULTS

k8s:
	nice -n 10 bash test/k8s/build.sh
	nice -n 10 bash test/k8s/build-npd.sh

test-k8s: install-deps k8s $(CRIO_BUILD) $(CONTAINERD_BUILD)
	hack/test-summary.sh bats "k8s end to end (two nodes: CRI-O, containerd)" $(TESTLOGS)/k8s.tap -- $(BATS) --tap test/k8s/k8s.bats

k8s-docs:
	bash hack/k8s-docs.sh

RUNTIME_TESTS += test-k8s
