#!/usr/bin/env bash
# contrib/cri-o/crio-import-image.sh DIR SOURCE NAME...: import an image into
# the store of the CRI-O instance configured by crio-test-config.sh DIR,
# under each NAME, with bin/crio-copyimg (CRI-O's own test/copyimg, built by
# make crio from the patched tree). SOURCE is an OCI layout directory or an
# oci-archive (.tar). Run it before CRI-O starts (copyimg writes the store
# directly).
set -euo pipefail

[[ $# -ge 3 ]] || { echo "usage: $0 DIR SOURCE NAME..." >&2; exit 2; }
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BINDIR=${CRIO_BINDIR:-$REPO/bin}
DIR=$(cd "$1" && pwd)
src=$2
shift 2
copyimg=$BINDIR/crio-copyimg
[[ -x $copyimg ]] || { echo "$0: $copyimg not built (run make crio)" >&2; exit 1; }
[[ -f $DIR/crio.conf ]] || { echo "$0: $DIR/crio.conf missing (run crio-test-config.sh $DIR first)" >&2; exit 1; }
if [[ -d $src && -f $src/index.json ]]; then
	ref=oci:$src
elif [[ -f $src ]]; then
	ref=oci-archive:$src
else
	echo "$0: $src is neither an OCI layout directory nor an archive" >&2
	exit 1
fi
for name in "$@"; do
	"$copyimg" --root "$DIR/state/root" --runroot "$DIR/state/run" --storage-driver overlay \
		--signature-policy "$DIR/signature-policy.json" --image-name "$name" --import-from "$ref"
done
