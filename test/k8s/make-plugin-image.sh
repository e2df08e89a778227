#!/usr/bin/env bash
# test/k8s/make-plugin-image.sh OUT.tar NAME PLUGIN_BINARY BUSYBOX_ARCHIVE
#
# An OCI archive (no docker, no registry) of the NRI plugin the end-to-end
# test deploys as the DaemonSet of contrib/kubernetes: the busybox layer of
# hack/make-test-image.sh's archive (for crictl exec and a shell) plus one
# layer holding PLUGIN_BINARY (a static nri-faulty) as /usr/bin/nri-faulty.
# Its entrypoint registers the plugin under the name the shipped policy
# drop-ins require (device-injector); the DaemonSet's args (-idx 10
# -verbose) follow it unchanged. PLUGIN_NAME (default device-injector) and
# PLUGIN_ARGS (more arguments of the entrypoint, space-separated) make the
# image of another plugin. index.json names the image NAME
# (org.opencontainers.image.ref.name), which `ctr images import` uses;
# CRI-O's copyimg is told the name.
set -euo pipefail

out=${1:?usage: $0 OUT.tar NAME PLUGIN_BINARY BUSYBOX_ARCHIVE}
name=${2:?image name}
bin=${3:?plugin binary}
base=${4:?busybox archive}
PLUGIN_NAME=${PLUGIN_NAME:-device-injector}
PLUGIN_ARGS=${PLUGIN_ARGS:-}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/l" "$work/root/usr/bin"
tar -xf "$base" -C "$work/l"
cp "$bin" "$work/root/usr/bin/nri-faulty"
chmod 0755 "$work/root/usr/bin/nri-faulty"
tar --sort=name --mtime='@0' --owner=0 --group=0 --numeric-owner -C "$work/root" -cf "$work/layer.tar" usr

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
jq -c --arg diff "$ld" --arg n "$PLUGIN_NAME" --arg a "$PLUGIN_ARGS" '
	.rootfs.diff_ids += [$diff] |
	.config.Entrypoint = ["/usr/bin/nri-faulty", "--name", $n] + ($a | split(" ") | map(select(. != ""))) | .config.Cmd = [] |
	.history += [{created_by: "test/k8s/make-plugin-image.sh"}]' \
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
