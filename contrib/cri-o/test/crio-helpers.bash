# contrib/cri-o/test/crio-helpers.bash: helpers of contrib/cri-o/test/*.bats,
# a private patched CRI-O instance per test (contrib/cri-o/crio-test-config.sh).

REPO_ROOT=$(cd "$BATS_TEST_DIRNAME/../../.." && pwd)
CRIO_HELPER_DIR=$REPO_ROOT/contrib/cri-o
BINDIR=${CRIO_BINDIR:-$REPO_ROOT/bin}
export PATH=$PATH:$(go env GOPATH 2>/dev/null)/bin

# crio_require: skip (fail under CI=true) unless the patched build and the
# tools are there.
crio_require() {
	local b missing=
	for b in crio pinns crio-copyimg nri-faulty; do [[ -x $BINDIR/$b ]] || missing+=" $BINDIR/$b"; done
	for b in crictl runc conmon jq; do command -v "$b" >/dev/null || missing+=" $b"; done
	[[ -x /bin/busybox && -d /usr/lib/cni ]] || missing+=" busybox-static/containernetworking-plugins"
	[[ -z $missing ]] && return 0
	if [[ ${CI:-} == true ]]; then
		echo "missing:$missing (make crio build install-deps)" >&2
		return 1
	fi
	skip "missing:$missing (make crio build)"
}

# crio_setup [POLICY_TOML]: config and images for $CDIR (no start).
crio_setup() {
	CDIR=$BATS_TEST_TMPDIR/crio
	printf '%s\n' "${1:-}" >"$BATS_TEST_TMPDIR/policy.conf"
	local vars
	# Not eval "$(...)": eval of an empty output succeeds and hides a failed script.
	vars=$(NRI_REQUEST_TIMEOUT=2s "$CRIO_HELPER_DIR/crio-test-config.sh" "$CDIR" "$BATS_TEST_TMPDIR/policy.conf")
	eval "$vars"
	if [[ ! -f $BATS_FILE_TMPDIR/busybox.tar ]]; then
		"$REPO_ROOT/hack/make-test-image.sh" "$BATS_FILE_TMPDIR/busybox.tar" >/dev/null
	fi
	"$CRIO_HELPER_DIR/crio-import-image.sh" "$CDIR" "$BATS_FILE_TMPDIR/busybox.tar" \
		localhost/busybox:latest registry.k8s.io/pause:3.10.1 >"$CDIR/import.log" 2>&1
	cat >"$CDIR/crictl.yaml" <<-YAML
		runtime-endpoint: unix://$CRI_SOCK
		image-endpoint: unix://$CRI_SOCK
		timeout: 20
	YAML
	CRICTL=(crictl --config "$CDIR/crictl.yaml")
}

# crio_start: start bin/crio on $CDIR, wait until it answers.
crio_start() {
	"$BINDIR/crio" --config "$CRIO_CONFIG" --config-dir "$CRIO_CONFIG_DIR" >>"$CDIR/crio.log" 2>&1 &
	CRIO_PID=$!
	local i
	for i in $(seq 150); do
		"${CRICTL[@]}" info >/dev/null 2>&1 && return 0
		kill -0 "$CRIO_PID" 2>/dev/null || { echo "crio exited:" >&2; tail -5 "$CDIR/crio.log" >&2; CRIO_PID=; return 1; }
		sleep 0.1
	done
	echo "crio did not answer in 15s" >&2
	return 1
}

# plugin_start [ARGS]: bin/nri-faulty on $NRI_SOCK, logging to $CDIR/plugin.log.
plugin_start() {
	"$BINDIR/nri-faulty" --socket "$NRI_SOCK" --log-file "$CDIR/plugin.log" "$@" >/dev/null 2>&1 &
	PLUGIN_PID=$!
}

# wait_for CMD...: retry for up to 10s.
wait_for() {
	local i
	for i in $(seq 100); do "$@" && return 0; sleep 0.1; done
	return 1
}

# pod_json NAME NAMESPACE / ctr_json NAME: CRI configs in $BATS_TEST_TMPDIR.
pod_json() {
	cat >"$BATS_TEST_TMPDIR/$1-pod.json" <<-JSON
		{"metadata": {"name": "$1", "namespace": "$2", "uid": "$1-uid", "attempt": 0},
		 "log_directory": "$BATS_TEST_TMPDIR/logs/$1",
		 "linux": {"security_context": {"namespace_options": {"network": 2, "pid": 1}}}}
	JSON
	echo "$BATS_TEST_TMPDIR/$1-pod.json"
}
ctr_json() {
	cat >"$BATS_TEST_TMPDIR/$1-ctr.json" <<-JSON
		{"metadata": {"name": "$1"}, "image": {"image": "localhost/busybox:latest"},
		 "command": ["sleep", "3600"], "log_path": "$1.log",
		 "linux": {"security_context": {"namespace_options": {"pid": 1}}}}
	JSON
	echo "$BATS_TEST_TMPDIR/$1-ctr.json"
}

# storage_containers: the containers in CRI-O's store (ids, one a line;
# pods have one each too), from both of containers/storage's lists.
storage_containers() {
	local f
	for f in "$CRIO_ROOT"/overlay-containers/{containers,volatile-containers}.json; do
		[[ -f $f ]] && jq -r '.[].id' "$f"
	done | sort
}

crio_teardown() {
	[[ -n ${PLUGIN_PID:-} ]] && kill "$PLUGIN_PID" 2>/dev/null
	if [[ -n ${CRIO_PID:-} ]]; then
		"${CRICTL[@]}" rmp -fa >/dev/null 2>&1
		kill "$CRIO_PID" 2>/dev/null
		wait "$CRIO_PID" 2>/dev/null
	fi
	[[ -n ${CRIO_CNI_BRIDGE:-} ]] && ip link del "$CRIO_CNI_BRIDGE" 2>/dev/null
	# containers/storage leaves its overlay (bind) mounts behind.
	if [[ -n ${CDIR:-} ]]; then
		local m
		for m in $(awk -v d="$CDIR" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r); do
			umount -l "$m" 2>/dev/null
		done
	fi
	return 0
}
