#!/bin/sh
# contrib/cri-o/runc-infra.sh: runc for the suites' CRI-O instances that run
# pods with an infra (pause) container. CRI-O gives the infra process an
# oom_score_adj of -998, which runc cannot set without CAP_SYS_RESOURCE,
# missing from these VMs' capability bounding set (docs: NOTES-runtime).
# On `create`, a negative process.oomScoreAdj is left out of the bundle's
# config.json when the capability is missing; everything else is runc
# (RUNC, default /usr/sbin/runc) as is. crio-test-config.sh makes it the
# runtime_path with CRIO_INFRA=1.
runc=${RUNC:-/usr/sbin/runc}
bundle=
create=
prev=
for a in "$@"; do
	case $prev in --bundle | -b) bundle=$a ;; esac
	case $a in create | run) create=1 ;; --bundle=*) bundle=${a#--bundle=} ;; esac
	prev=$a
done
if [ -n "$create" ] && [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then
	# CAP_SYS_RESOURCE is bit 24 of the bounding set.
	bnd=$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)
	if [ $(((0x$bnd >> 24) & 1)) -eq 0 ] &&
		jq -e '(.process.oomScoreAdj // 0) < 0' "$bundle/config.json" >/dev/null 2>&1; then
		jq -c 'del(.process.oomScoreAdj)' "$bundle/config.json" >"$bundle/config.json.infra" &&
			mv "$bundle/config.json.infra" "$bundle/config.json"
	fi
fi
exec "$runc" "$@"
