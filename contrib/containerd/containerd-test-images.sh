#!/usr/bin/env bash
# containerd-test-images.sh OUT.tar [TEST_IMAGE_NAME [PAUSE_IMAGE]]
#
# Writes one OCI archive holding the test image (hack/make-test-image.sh's
# busybox, default localhost/busybox:latest) and, under the pause image's
# name (default registry.k8s.io/pause:3.10.2), the same layer with a config
# whose command is a shell loop that exits on TERM: containerd runs the
# sandbox image as the pod's pause container, and busybox's plain `sh`
# would exit at once without a stdin. Import it into the CRI namespace:
#
#   bin/ctr --address DIR/containerd.sock -n k8s.io images import OUT.tar
#
# ctr names the images from each manifest's org.opencontainers.image.ref.name
# annotation.
#
# TEST_IMAGE_ARCHIVE, if set, is an archive of hack/make-test-image.sh that
# a caller has already built; it is used instead of building another.
set -euo pipefail

out=${1:?usage: $0 OUT.tar [TEST_IMAGE_NAME [PAUSE_IMAGE]]}
name=${2:-localhost/busybox:latest}
pause=${3:-registry.k8s.io/pause:3.10.2}
repo=$(cd "$(dirname "$0")/../.." && pwd)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=${TEST_IMAGE_ARCHIVE:-}
if [[ -z $src ]]; then
	src=$work/busybox.tar
	"$repo/hack/make-test-image.sh" "$src" "$name"
fi
mkdir "$work/l"
tar -xf "$src" -C "$work/l"

# put FILE: move FILE into the layout's blobs; prints "DIGEST SIZE".
put() {
	local d s
	d=$(sha256sum "$1" | cut -d' ' -f1)
	s=$(stat -c %s "$1")
	mv "$1" "$work/l/blobs/sha256/$d"
	echo "sha256:$d $s"
}

m=$(jq -r '.manifests[0].digest | sub("sha256:"; "")' "$work/l/index.json")
cfg=$(jq -r '.config.digest | sub("sha256:"; "")' "$work/l/blobs/sha256/$m")
jq -c '.config.Cmd = ["sh", "-c", "trap \"exit 0\" TERM; while :; do sleep 1 & wait; done"]' \
	"$work/l/blobs/sha256/$cfg" >"$work/pause-config.json"
read -r cd cs < <(put "$work/pause-config.json")
jq -c --arg d "$cd" --argjson s "$cs" '.config.digest = $d | .config.size = $s' \
	"$work/l/blobs/sha256/$m" >"$work/pause-manifest.json"
read -r md ms < <(put "$work/pause-manifest.json")
jq --arg a "$name" --arg b "$pause" --arg md "$md" --argjson ms "$ms" '
	.manifests = [(.manifests[0] | .annotations["org.opencontainers.image.ref.name"] = $a),
	              (.manifests[0] | .digest = $md | .size = $ms |
	               .annotations["org.opencontainers.image.ref.name"] = $b)]' \
	"$work/l/index.json" >"$work/index.json"
mv "$work/index.json" "$work/l/index.json"
tar -C "$work/l" -cf "$out" .
echo "$out: $name, $pause"
