#!/usr/bin/env bash
# test/install/namespace.sh SCRATCH COMMAND...: run COMMAND where
# docs/install.md's recipe can install as it says, into /usr/local, /etc,
# /opt, /var and /run, without touching the host's: run it under
# `unshare --mount --propagation private`, and this script mounts, in that
# private mount namespace only,
#   - an overlay over each of /etc /usr/local /opt /var/lib /var/cache
#     /var/log /run,
#     its writable layer in SCRATCH/upper (what the recipe installed is
#     there to inspect afterwards),
#   - /usr read-only (merged-usr Debian: /bin /sbin /lib too), so that a
#     package the recipe would install for real fails instead of writing
#     into the host's /usr with its dpkg record in the overlay (make
#     install-deps installs them first),
#   - an empty tmpfs over /var/lib/containers and /var/lib/containerd
#     (the runtimes' overlay storage cannot sit on an overlay),
# and puts test/install/bin (the systemctl stand-in: systemd is not PID 1
# here) first in PATH. When COMMAND ends, every unit the stand-in started
# is stopped; the mounts vanish with the namespace.
set -euo pipefail

[[ $# -ge 2 ]] || { echo "usage: unshare --mount --propagation private $0 SCRATCH COMMAND..." >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
SCRATCH=$(mkdir -p "$1" && cd "$1" && pwd)
shift

REPO=$(cd "$HERE/../.." && pwd)
# The scratch directory cannot be inside what it overlays.
for d in /etc /usr /opt /var/lib /var/cache /var/log /run; do
	[[ $SCRATCH/ != "$d"/* ]] || { echo "$0: $SCRATCH is under $d, which the test overlays: use another directory" >&2; exit 2; }
done

# Refuse to mount anything in the host's own namespace.
[[ $(readlink /proc/self/ns/mnt) != "$(readlink /proc/1/ns/mnt)" ]] ||
	{ echo "$0: run me under unshare --mount --propagation private" >&2; exit 2; }

# The checkout stays itself (the test writes its logs there) even where it
# lies under an overlaid directory: bound back over the overlay below.
mkdir -p "$SCRATCH/checkout"
mount --bind "$REPO" "$SCRATCH/checkout"

# /usr read-only first: a bind mount of it made later would hide the
# overlay on /usr/local.
mount --bind /usr /usr
mount -o remount,bind,ro /usr
for d in /etc /usr/local /opt /var/lib /var/cache /var/log /run; do
	mkdir -p "$SCRATCH/upper$d" "$SCRATCH/work$d"
	mount -t overlay overlay -o "lowerdir=$d,upperdir=$SCRATCH/upper$d,workdir=$SCRATCH/work$d" "$d"
done
for d in /var/lib/containers /var/lib/containerd; do
	mkdir -p "$d"
	mount -t tmpfs tmpfs "$d"
done
for d in /etc /usr/local /opt /var/lib /var/cache /var/log /run; do
	if [[ $REPO/ == "$d"/* ]]; then mount --bind "$SCRATCH/checkout" "$REPO"; fi
done

export SYSTEMCTL_STATE=/run/systemctl-standin
export PATH=$HERE/bin:$PATH
stop_units() {
	local p
	for p in "$SYSTEMCTL_STATE"/*.pid; do
		[[ -e $p && $p != *.notify.pid ]] || continue
		systemctl stop "$(basename "$p" .pid)" || true
	done
}
trap stop_units EXIT
"$@"
