// etcd for the end-to-end test's control plane (test/k8s/build.sh): the
// released server module behind a main of three lines.
module nrigate.test/etcd-build

go 1.26.0

require go.etcd.io/etcd/server/v3 v3.7.3
