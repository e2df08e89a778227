#!/usr/bin/env bash
# test/k8s/build.sh (make k8s): the Kubernetes v1.37.2 binaries of the
# end-to-end test, built from the released modules with the stubs in
# test/k8s/build/ (go.mod files and a main of three lines; no upstream code
# in this repository):
#
#   BIN/kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl
#       one go build of k8s.io/kubernetes v1.37.2 (shared packages compile once)
#   BIN/etcd            go.etcd.io/etcd/server/v3 v3.7.3 behind etcdmain.Main
#   BIN/cfssl cfssljson github.com/cloudflare/cfssl v1.6.5 (local-up-cluster.sh
#                       signs the control plane's certificates with them)
#   SRC                 k8s.io/kubernetes@v1.37.2's module directory (its
#                       hack/local-up-cluster.sh starts the control plane)
#
# BIN is build/k8s/bin (ignored output). A stamp holding a hash of every
# input (the stubs, this script, the Go version) skips the build when
# nothing changed, so a second run costs nothing.
#
#   K8S_BUILD_JOBS  go build -p (default: the number of CPUs)
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$REPO/test/k8s
OUT=$REPO/build/k8s
BIN=$OUT/bin
K8S_VERSION=v1.37.2
CFSSL_VERSION=v1.6.5
GO=${GO:-go}
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0

inputs_hash() {
	{
		$GO version
		echo "$K8S_VERSION $CFSSL_VERSION"
		cat "$0" "$HERE"/build/kubernetes/go.mod "$HERE"/build/etcd/go.mod "$HERE"/build/etcd/main.go
	} | sha256sum | cut -d' ' -f1
}

BINARIES="kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl etcd cfssl cfssljson"
have_all() {
	local b
	for b in $BINARIES; do [[ -x $BIN/$b ]] || return 1; done
}

# One build at a time: a second caller (make test-k8s while hack/prebuild.sh
# builds in the background) waits, then finds the stamp current.
mkdir -p "$OUT"
exec {lock}>"$OUT/build.lock"
if ! flock -n "$lock"; then
	echo "waiting for the Kubernetes build under way (hack/prebuild.sh)"
	flock "$lock"
fi

hash=$(inputs_hash)
if [[ -f $OUT/stamp && $(cat "$OUT/stamp") == "$hash" ]] && have_all; then
	echo "Kubernetes $K8S_VERSION, etcd and cfssl are up to date in ${BIN#"$REPO"/}"
	exit 0
fi
rm -f "$OUT/stamp"
mkdir -p "$BIN" "$OUT/src"
start=$SECONDS
jobs=${K8S_BUILD_JOBS:-$(nproc)}

# Kubernetes: the go.mod stub is copied so that go.sum is written there,
# not into the checkout. Version variables as upstream's hack/lib/version.sh
# sets them, so the node and kubectl report v1.37.2.
rm -rf "$OUT/src/kubernetes" "$OUT/src/etcd"
mkdir -p "$OUT/src/kubernetes" "$OUT/src/etcd"
cp "$HERE/build/kubernetes/go.mod" "$OUT/src/kubernetes/"
cp "$HERE/build/etcd/go.mod" "$HERE/build/etcd/main.go" "$OUT/src/etcd/"
ld=""
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
	ld+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=37 -X $pkg.gitTreeState=clean"
	ld+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
echo "building Kubernetes $K8S_VERSION (5 commands) into ${BIN#"$REPO"/}"
t=$SECONDS
(cd "$OUT/src/kubernetes" && $GO build -p "$jobs" -trimpath -ldflags "-s -w$ld" -o "$BIN/" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl)
echo "  kubernetes: $((SECONDS - t))s"
t=$SECONDS
(cd "$OUT/src/etcd" && $GO build -p "$jobs" -trimpath -ldflags "-s -w" -o "$BIN/etcd" .)
echo "  etcd: $((SECONDS - t))s"
t=$SECONDS
GOBIN=$BIN $GO install -trimpath -ldflags "-s -w" \
	"github.com/cloudflare/cfssl/cmd/cfssl@$CFSSL_VERSION" "github.com/cloudflare/cfssl/cmd/cfssljson@$CFSSL_VERSION"
echo "  cfssl: $((SECONDS - t))s"
echo "$hash" >"$OUT/stamp"
echo "built $BINARIES in $((SECONDS - start))s"
