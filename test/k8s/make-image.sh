#!/usr/bin/env bash
# test/k8s/make-image.sh OUT.tar NAME BASE_ARCHIVE FILE:PATH... [-- ENTRYPOINT...]
#
# An OCI archive (no docker, no registry) of an image the end-to-end test
# deploys: the layer of BASE_ARCHIVE (hack/make-test-image.sh's busybox,
# for crictl exec and a shell) plus one layer holding each FILE at PATH
# (mode 0755). After --, the image's entrypoint (its Cmd is emptied); without
# it, the base's config is kept (a manifest that sets command needs none).
# Examples: the plugin of contrib/kubernetes's DaemonSet (a static
# nri-faulty at /usr/bin/nri-faulty, registering under the name the shipped
# drop-ins require; the DaemonSet's args follow the entrypoint unchanged),
# and node-problem-detector (make k8s's binary at /node-problem-detector,
# where upstream's image has it). index.json names the image NAME
# (org.opencontainers.image.ref.name), which `ctr images import` uses;
# CRI-O's copyimg is told the name.
set -euo pipefail

usage="usage: $0 OUT.tar NAME BASE_ARCHIVE FILE:PATH... [-- ENTRYPOINT...]"
out=${1:?$usage}
name=${2:?$usage}
base=${3:?$usage}
shift 3
files=()
while [[ $# -gt 0 && $1 != -- ]]; do
	[[ $1 == *:/* ]] || { echo "$0: $1: want FILE:/PATH" >&2; exit 2; }
	files+=("$1")
	shift
done
[[ ${#files[@]} -gt 0 ]] || { echo "$usage" >&2; exit 2; }
entrypoint=()
if [[ ${1:-} == -- ]]; then
	shift
	entrypoint=("$@")
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/l" "$work/root"
tar -xf "$base" -C "$work/l"
for f in "${files[@]}"; do
	src=${f%%:/*} dst=/${f#*:/}
	[[ -f $src ]] || { echo "$0: $src not found" >&2; exit 1; }
	mkdir -p "$work/root$(dirname "$dst")"
	cp "$src" "$work/root$dst"
	chmod 0755 "$work/root$dst"
done
tar --sort=name --mtime='@0' --owner=0 --group=0 --numeric-owner -C "$work/root" -cf "$work/layer.tar" .

# put FILE: move FILE into the layout's blobs; prints "sha256:DIGEST SIZE".
put() {
	local d s
	d=$(sha256sum "$1" | cut -d' ' -f1)
	s=$(stat -c %s "$1")
	mv "$1" "$work/l/blobs/sha256/$d"
	echo "sha256:$d $s"
}

read -r ld ls < <(put "$work/layer.tar")
m=$(jq -r '.manifests[0].digest | sub("sha256:"; "")' "$work/l/index.json")
cfg=$(jq -r '.config.digest | sub("sha256:"; "")' "$work/l/blobs/sha256/$m")
ep=$(printf '%s\n' "${entrypoint[@]}" | jq -R . | jq -sc 'map(select(. != ""))')
jq -c --arg diff "$ld" --argjson ep "$ep" '
	.rootfs.diff_ids += [$diff] |
	(if ($ep | length) > 0 then .config.Entrypoint = $ep | .config.Cmd = [] else . end) |
	.history += [{created_by: "test/k8s/make-image.sh"}]' \
	"$work/l/blobs/sha256/$cfg" >"$work/config.json"
read -r cd cs < <(put "$work/config.json")
jq -c --arg cd "$cd" --argjson cs "$cs" --arg ld "$ld" --argjson ls "$ls" '
	.config.digest = $cd | .config.size = $cs |
	.layers += [{mediaType: "application/vnd.oci.image.layer.v1.tar", digest: $ld, size: $ls}]' \
	"$work/l/blobs/sha256/$m" >"$work/manifest.json"
read -r md ms < <(put "$work/manifest.json")
jq --arg n "$name" --arg md "$md" --argjson ms "$ms" '
	.manifests = [.manifests[0] | .digest = $md | .size = $ms |
	              .annotations["org.opencontainers.image.ref.name"] = $n]' \
	"$work/l/index.json" >"$work/index.json"
mv "$work/index.json" "$work/l/index.json"
tar --sort=name --mtime='@0' --owner=0 --group=0 --numeric-owner -C "$work/l" -cf "$out" .
echo "$out: $name"
