#!/usr/bin/env bash
# Build a small busybox OCI image from Debian's busybox-static without any
# network: one layer tar and an OCI layout written by hand, then packed as an
# oci-archive. The suites' test image, and the stand-in for the
# quay.io/crio/fedora-crio-ci:latest image of CRI-O's own NRI suite
# (contrib/cri-o/nri-suite.sh), which runs sh, sleep, echo, grep and stat.
#
# Usage: hack/make-test-image.sh OUT.tar [NAME]
#   OUT.tar  the oci-archive to write (its directory must exist)
#   NAME     the org.opencontainers.image.ref.name annotation of index.json
#            (default "latest"); ctr images import names the image by it.
set -euo pipefail

out=${1:?usage: $0 OUT.tar [NAME]}
refname=${2:-latest}
busybox=${BUSYBOX:-/bin/busybox}
[[ -x $busybox ]] || { echo "$0: $busybox not found (apt-get install busybox-static)" >&2; exit 1; }
command -v jq >/dev/null || { echo "$0: jq not found" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
layout=$work/layout
mkdir -p "$root"/{bin,etc,tmp,proc,sys,dev,root} "$layout/blobs/sha256"
cp "$busybox" "$root/bin/busybox"
# Applets the tests, the demo and CRI-O's NRI suite use, as symlinks so the
# layer stays ~2 MB.
for a in sh ash cat echo env hostname id ls mkdir ps sleep sync true false top kill wc head tail grep ip stat test cut; do
	ln -s busybox "$root/bin/$a"
done
echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
echo 'root:x:0:' >"$root/etc/group"
chmod 1777 "$root/tmp"

tar --sort=name --mtime='@0' --owner=0 --group=0 --numeric-owner -C "$root" -cf "$work/layer.tar" .
layer_digest=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
layer_size=$(stat -c %s "$work/layer.tar")
mv "$work/layer.tar" "$layout/blobs/sha256/$layer_digest"

jq -n --arg diff "sha256:$layer_digest" '{
	architecture: "amd64", os: "linux",
	config: {Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"], Cmd: ["sh"], WorkingDir: "/"},
	rootfs: {type: "layers", diff_ids: [$diff]},
	history: [{created_by: "hack/make-test-image.sh"}]
}' >"$work/config.json"
arch=$(uname -m)
case $arch in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
jq --arg a "$arch" '.architecture = $a' "$work/config.json" >"$work/c2.json"
cfg_digest=$(sha256sum "$work/c2.json" | cut -d' ' -f1)
cfg_size=$(stat -c %s "$work/c2.json")
mv "$work/c2.json" "$layout/blobs/sha256/$cfg_digest"

jq -n --arg cd "sha256:$cfg_digest" --argjson cs "$cfg_size" --arg ld "sha256:$layer_digest" --argjson ls "$layer_size" '{
	schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
	config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $cd, size: $cs},
	layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar", digest: $ld, size: $ls}]
}' >"$work/manifest.json"
m_digest=$(sha256sum "$work/manifest.json" | cut -d' ' -f1)
m_size=$(stat -c %s "$work/manifest.json")
mv "$work/manifest.json" "$layout/blobs/sha256/$m_digest"

jq -n --arg md "sha256:$m_digest" --argjson ms "$m_size" --arg ref "$refname" '{
	schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
	manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $md, size: $ms,
		annotations: {"org.opencontainers.image.ref.name": $ref}}]
}' >"$layout/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"

tar --sort=name --mtime='@0' --owner=0 --group=0 --numeric-owner -C "$layout" -cf "$out" .
echo "$out"
