#!/usr/bin/env bash
# contrib/cri-o/make-ci-image.sh DIR: an OCI layout in DIR of a busybox image
# with the commands CRI-O's own NRI suite (test/nri) runs in its
# quay.io/crio/fedora-crio-ci:latest image: sh, sleep, echo, grep, stat (and
# a few more). Built from Debian's busybox-static without network access.
set -euo pipefail

layout=${1:?usage: $0 DIR}
busybox=${BUSYBOX:-/bin/busybox}
[[ -x $busybox ]] || { echo "$0: $busybox not found (apt-get install busybox-static)" >&2; exit 1; }
command -v jq >/dev/null || { echo "$0: jq not found" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
rm -rf "$layout"
mkdir -p "$root"/{bin,etc,tmp,proc,sys,dev,root} "$layout/blobs/sha256"
cp "$busybox" "$root/bin/busybox"
for a in sh ash cat echo env grep stat sleep ls mkdir true false test cut head tail wc id ps kill; do
	ln -s busybox "$root/bin/$a"
done
echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
echo 'root:x:0:' >"$root/etc/group"
chmod 1777 "$root/tmp"

blob() { # FILE -> "sha256:DIGEST SIZE", moved into the layout
	local d s
	d=$(sha256sum "$1" | cut -d' ' -f1)
	s=$(stat -c %s "$1")
	mv "$1" "$layout/blobs/sha256/$d"
	echo "sha256:$d $s"
}

tar --sort=name --mtime='@0' --owner=0 --group=0 --numeric-owner -C "$root" -cf "$work/layer.tar" .
read -r ld ls < <(blob "$work/layer.tar")
arch=$(uname -m)
case $arch in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
jq -n --arg diff "$ld" --arg a "$arch" '{architecture: $a, os: "linux",
	config: {Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"], Cmd: ["sh"], WorkingDir: "/"},
	rootfs: {type: "layers", diff_ids: [$diff]}}' >"$work/config.json"
read -r cd cs < <(blob "$work/config.json")
jq -n --arg cd "$cd" --argjson cs "$cs" --arg ld "$ld" --argjson ls "$ls" '{
	schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
	config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $cd, size: $cs},
	layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar", digest: $ld, size: $ls}]}' >"$work/manifest.json"
read -r md ms < <(blob "$work/manifest.json")
jq -n --arg md "$md" --argjson ms "$ms" '{schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
	manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $md, size: $ms}]}' >"$layout/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
echo "$layout"
