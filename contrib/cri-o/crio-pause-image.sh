#!/usr/bin/env bash
# contrib/cri-o/crio-pause-image.sh TEST_IMAGE_ARCHIVE OUT_DIR: an OCI layout
# in OUT_DIR of a pause image for the suites' CRI-O instances: the test
# image's layer (hack/make-test-image.sh) with a command that waits until
# SIGTERM, the pause image of contrib/containerd/containerd-test-images.sh.
# CRI-O runs it as a pod's infra container with pause_command = ""
# (crio-test-config.sh), since the test image has no /pause. Import it with
#   contrib/cri-o/crio-import-image.sh DIR OUT_DIR registry.k8s.io/pause:3.10.1
set -euo pipefail

src=${1:?usage: $0 TEST_IMAGE_ARCHIVE OUT_DIR}
out=${2:?usage: $0 TEST_IMAGE_ARCHIVE OUT_DIR}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

TEST_IMAGE_ARCHIVE=$src "$repo/contrib/containerd/containerd-test-images.sh" "$work/images.tar" test pause >/dev/null
rm -rf "$out"
mkdir -p "$out"
tar -xf "$work/images.tar" -C "$out"
# The pause image only.
jq '.manifests |= map(select(.annotations["org.opencontainers.image.ref.name"] == "pause"))' \
	"$out/index.json" >"$work/index.json"
[[ $(jq '.manifests | length' "$work/index.json") == 1 ]] || { echo "$0: no pause image in $work/images.tar" >&2; exit 1; }
mv "$work/index.json" "$out/index.json"
