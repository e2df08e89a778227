# test/k8s/lib.bash: a single-node Kubernetes v1.37.2 cluster on loopback
# around patched CRI-O or containerd, for test/k8s/k8s.bats (make test-k8s).
#
#   k8s_up      the runtime (contrib/cri-o/crio-test-config.sh or
#               contrib/containerd/containerd-test-config.sh, with the policy
#               drop-in of contrib/kubernetes), the images, the control plane
#               (upstream's hack/local-up-cluster.sh from the k8s.io/kubernetes
#               module: etcd, kube-apiserver, kube-controller-manager,
#               kube-scheduler; no kubelet, no kube-proxy, no DNS) and a kubelet
#               of ours pointed at the runtime's CRI socket
#   k8s_down    everything stopped and removed, every sysctl restored
#
# Every path is under one work directory K8S_WORK (/tmp/nk8s.XXXXXX: short,
# for the unix socket paths). The runtime and the kubelet share one private
# mount namespace (unshare -m) with an empty tmpfs over
# /sys/kernel/mm/hugepages: this host has no v1 hugetlb hierarchy and runc
# fails on the hugepage limits the kubelet sets otherwise; their mounts vanish
# with the namespace. Nothing touches iptables (makeIPTablesUtilChains:
# false, no kube-proxy, the CNI bridge without ipMasq) or /etc/cni (the
# runtime's CNI config is private). The kubelet and the CNI bridge plugin set
# sysctls (vm.overcommit_memory, kernel.panic*, net.ipv4.ip_forward...):
# k8s_up records them and k8s_down writes back every one that changed.
#
# Environment:
#   K8S_RUNTIME      crio | containerd
#   K8S_BIN          Kubernetes, etcd, cfssl (default build/k8s/bin, make k8s)
#   RUNTIME_BINDIR   crio, pinns, crio-copyimg, containerd, shim, ctr (bin/)
#   K8S_RESULTS      directory of the JSON records docs/kubernetes.md is
#                    generated from (default bin/test-logs/k8s)
#   K8S_KEEP         keep the work directory (logs) after k8s_down

REPO_ROOT=${REPO_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
K8S_VERSION=v1.37.2
K8S_BIN=${K8S_BIN:-$REPO_ROOT/build/k8s/bin}
RUNTIME_BINDIR=${RUNTIME_BINDIR:-$REPO_ROOT/bin}
K8S_RUNTIME=${K8S_RUNTIME:-crio}
K8S_RESULTS=${K8S_RESULTS:-$REPO_ROOT/bin/test-logs/k8s}
NODE=${K8S_NODE:-nrigate-node}
PLUGIN_IMAGE=localhost/nri-faulty:k8s-test
TEST_IMAGE_NAME=localhost/busybox:latest
CRIO_PAUSE_IMAGE=registry.k8s.io/pause:3.10.1
CONTAINERD_PAUSE_IMAGE=registry.k8s.io/pause:3.10.2
# The files a node operator installs; the test applies exactly these.
K8S_CONTRIB=$REPO_ROOT/contrib/kubernetes
DAEMONSET_MANIFEST=$K8S_CONTRIB/device-injector-daemonset.yaml
CRIO_DROPIN=$K8S_CONTRIB/crio.conf.d/20-device-injector.conf
CONTAINERD_DROPIN=$K8S_CONTRIB/containerd.conf.d/20-device-injector.toml
# The shipped policy's key and the DaemonSet's namespace and name: the
# drop-ins' [crio.nri.required_plugins."10-device-injector"] table and its
# exemption (namespace "nri-plugins", the DaemonSet's pod label).
POLICY_KEY=10-device-injector
DS_NS=nri-plugins
DS_NAME=device-injector
# A refusal of NRI's plugin policy for our plugin, as a jq regex. The text
# (NRI's RefusalError) reads 'refusing CreateContainer of container "c" in
# pod ns/p: required NRI plugin "10-device-injector" is not registered;
# waited ...'; the kubelet's events carry it after "rpc error: code =
# FailedPrecondition desc = ". The NRIPluginsReady condition ("required NRI
# plugins not ready: ...") is no event and does not match anyway.
REFUSAL_RE="required NRI plugin \"$POLICY_KEY\""
# The env var nri-faulty puts into every container it acts on.
INJECTION=NRI_FAULTY_ACTED=device-injector
# The name of the file in the NRI socket directory, which the DaemonSet
# mounts, that the plugin reads its fault from (nri-faulty --control;
# plugin_fault).
PLUGIN_CONTROL=nri-faulty.control
# The two-plugin variant (contrib/kubernetes/two-plugins): a second
# required plugin, nri-faulty registering as ulimit-adjuster, index 20,
# injecting under keys of its own.
TWO_PLUGINS=$K8S_CONTRIB/two-plugins
DS2_NAME=ulimit-adjuster
DS2_MANIFEST=$TWO_PLUGINS/ulimit-adjuster-daemonset.yaml
POLICY_KEY2=20-ulimit-adjuster
PLUGIN2_IMAGE=localhost/nri-faulty-ulimit:k8s-test
INJECTION2=NRI_FAULTY_ACTED_2=ulimit-adjuster
# node-problem-detector's custom plugin monitor config of contrib/kubernetes/npd
# (nri-npd-check, condition NRIPluginsNotReady); the test runs it with its
# check period cut to NPD_INTERVAL (production: 10s) and asserts the Node
# condition follows the plugin within NPD_INTERVAL + 2 s.
NPD_CONFIG_CRIO=$K8S_CONTRIB/npd/nri-plugins-monitor.json
NPD_CONFIG_CONTAINERD=$K8S_CONTRIB/npd/nri-plugins-monitor-containerd.json
NPD_CONDITION=NRIPluginsNotReady
NPD_INTERVAL=1
# The sysctls the kubelet (setupKernelTunables) and the CNI bridge plugin
# (isGateway) write; k8s_down restores each that changed.
K8S_SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
kernel.keys.root_maxbytes net.ipv4.ip_forward net.ipv6.conf.all.forwarding net.ipv4.conf.all.route_localnet"

export PATH=$K8S_BIN:$RUNTIME_BINDIR:/usr/local/go/bin:$PATH

now() { echo "$EPOCHREALTIME"; }
# since T0: seconds from T0 to now, two decimals.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }
# rfc_epoch RFC3339: the timestamp as epoch seconds with fraction.
rfc_epoch() { date -d "$1" +%s.%N; }
log() { { echo "# $(date -u +%T.%3N) $*" >&3; } 2>/dev/null || echo "# $*" >&2; }

kc() { kubectl --kubeconfig "$KUBECONFIG" "$@"; }
crictl_k() { CRI_CONFIG_FILE=/dev/null crictl --runtime-endpoint "unix://$CRI_SOCK" --image-endpoint "unix://$CRI_SOCK" --timeout 30s "$@"; }

# record SCENARIO KEY VALUE: one result for docs/kubernetes.md
# (hack/k8s-docs.sh); VALUE is stored as a string.
record() {
	mkdir -p "$K8S_RESULTS"
	jq -cn --arg rt "$K8S_RUNTIME" --arg s "$1" --arg k "$2" --arg v "$3" \
		'{runtime: $rt, scenario: $s, key: $k, value: $v}' >>"$K8S_RESULTS/$K8S_RUNTIME.jsonl"
}

# --- bring-up ---------------------------------------------------------------

k8s_check_prereqs() {
	local b
	for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl etcd cfssl cfssljson; do
		[[ -x $K8S_BIN/$b ]] || { echo "$K8S_BIN/$b missing: run make k8s" >&2; return 1; }
	done
	case $K8S_RUNTIME in
	crio) for b in crio pinns crio-copyimg; do [[ -x $RUNTIME_BINDIR/$b ]] || { echo "$RUNTIME_BINDIR/$b missing: run make crio" >&2; return 1; }; done ;;
	containerd) for b in containerd containerd-shim-runc-v2 ctr; do [[ -x $RUNTIME_BINDIR/$b ]] || { echo "$RUNTIME_BINDIR/$b missing: run make containerd" >&2; return 1; }; done ;;
	*) echo "K8S_RUNTIME=$K8S_RUNTIME: crio or containerd" >&2; return 1 ;;
	esac
	for b in crictl jq openssl unshare nsenter runc curl ss; do
		command -v "$b" >/dev/null || { echo "$b not found (make install-deps)" >&2; return 1; }
	done
	local p
	for p in 2379 6443 10248 10250 10257 10259; do
		[[ -z $(ss -Hltn "sport = :$p") ]] || { echo "port $p is in use: another cluster is running?" >&2; return 1; }
	done
}

# k8s_up: the whole cluster; on failure what was started is stopped again.
k8s_up() {
	k8s_check_prereqs || return
	K8S_WORK=$(mktemp -d /tmp/nk8s.XXXXXX)
	export K8S_WORK
	mkdir -p "$K8S_WORK"/{logs,nri,static-pods,pod-logs,kubelet,sbin,images}
	echo "$$" >"$K8S_WORK/owner.pid"
	: >"$K8S_WORK/sysctl.saved"
	local s
	for s in $K8S_SYSCTLS; do
		[[ -r /proc/sys/${s//.//} ]] && echo "$s $(cat "/proc/sys/${s//.//}")" >>"$K8S_WORK/sysctl.saved"
	done
	host_snapshot >"$K8S_WORK/host.before"
	log "work directory $K8S_WORK ($K8S_RUNTIME)"
	k8s_mountns && k8s_images && runtime_start && k8s_control_plane && kubelet_start && node_watch_start && npd_start || {
		local rc=$?
		echo "k8s_up failed; logs in $K8S_WORK/logs" >&2
		tail -20 "$K8S_WORK"/logs/*.log >&2 2>/dev/null
		return $rc
	}
}

# k8s_mountns: the private mount namespace of the runtime and the kubelet,
# held by a sleeping process (NS_PID).
k8s_mountns() {
	unshare -m --propagation private -- sh -c \
		'mount -t tmpfs -o size=4k,mode=0755 nrigate-no-hugepages /sys/kernel/mm/hugepages && exec sleep 1000000' \
		>"$K8S_WORK/logs/mountns.log" 2>&1 &
	NS_PID=$!
	echo "$NS_PID" >"$K8S_WORK/ns.pid"
	export NS_PID
	local i
	for i in $(seq 100); do
		[[ $(readlink "/proc/$NS_PID/ns/mnt" 2>/dev/null) != "$(readlink /proc/self/ns/mnt)" ]] &&
			grep -q nrigate-no-hugepages "/proc/$NS_PID/mounts" 2>/dev/null && return 0
		sleep 0.02
	done
	echo "private mount namespace did not come up" >&2
	return 1
}

# in_ns CMD...: run CMD in the private mount namespace. (Daemons are
# started with nsenter itself in the background, not through this function:
# a function in the background is a subshell whose pid is not the daemon's.)
in_ns() { nsenter -t "$NS_PID" -m -- "$@"; }

# k8s_images: the busybox test image (hack/make-test-image.sh), the pause
# image and the plugin image (test/k8s/make-plugin-image.sh: a static
# nri-faulty on the busybox layer), as OCI archives.
k8s_images() {
	local d=$K8S_WORK/images
	"$REPO_ROOT/hack/make-test-image.sh" "$d/busybox.tar" "$TEST_IMAGE_NAME" >/dev/null || return
	CGO_ENABLED=0 go build -trimpath -o "$d/nri-faulty" "$REPO_ROOT/contrib/plugins/nri-faulty" || return
	PLUGIN_ARGS="--control /var/run/nri/$PLUGIN_CONTROL" \
		"$REPO_ROOT/test/k8s/make-plugin-image.sh" "$d/plugin.tar" "$PLUGIN_IMAGE" "$d/nri-faulty" "$d/busybox.tar" >/dev/null || return
	PLUGIN_NAME=$DS2_NAME PLUGIN_ARGS="--acted-env ${INJECTION2%%=*} --acted-annotation nri-faulty.nrigate.io/acted-2" \
		"$REPO_ROOT/test/k8s/make-plugin-image.sh" "$d/plugin2.tar" "$PLUGIN2_IMAGE" "$d/nri-faulty" "$d/busybox.tar" >/dev/null || return
	go build -o "$K8S_WORK/cristatus" "$REPO_ROOT/test/k8s/cristatus" || return
	CGO_ENABLED=0 go build -trimpath -o "$K8S_WORK/nri-npd-check" "$REPO_ROOT/tools/nri-npd-check" || return
	if [[ $K8S_RUNTIME == containerd ]]; then
		TEST_IMAGE_ARCHIVE=$d/busybox.tar "$REPO_ROOT/contrib/containerd/containerd-test-images.sh" \
			"$d/containerd-images.tar" "$TEST_IMAGE_NAME" "$CONTAINERD_PAUSE_IMAGE" >/dev/null || return
	fi
}

# runtime_config POLICY_FILE [MORE_DROPINS...]: the runtime's private
# config with the policy drop-in (the shipped one of contrib/kubernetes, or a
# variant) and, after it, more drop-ins (the two-plugin variant's); the
# drop-ins of an earlier call are removed. Sets CRI_SOCK, NRI_SOCK,
# CNI_BRIDGE, METRICS_URL, METRIC_DECISIONS.
# NRI_REQUEST_TIMEOUT (default 2s) is NRI's plugin request timeout.
runtime_config() {
	local policy=$1 out f
	shift
	NRI_SOCK=$K8S_WORK/nri/nri.sock
	local port=19191
	case $K8S_RUNTIME in
	crio)
		CRI_SOCK=$K8S_WORK/crio/crio.sock
		rm -rf "$K8S_WORK/crio/crio.conf.d"
		out=$(CRIO_BINDIR=$RUNTIME_BINDIR CRI_SOCK=$CRI_SOCK NRI_SOCK=$NRI_SOCK PAUSE_IMAGE=$CRIO_PAUSE_IMAGE \
			CRIO_METRICS_PORT=$port "$REPO_ROOT/contrib/cri-o/crio-test-config.sh" "$K8S_WORK/crio" "$policy") || return
		CRIO_CONFIG=$(sed -n 's/^CRIO_CONFIG=//p' <<<"$out")
		CRIO_CONFIG_DIR=$(sed -n 's/^CRIO_CONFIG_DIR=//p' <<<"$out")
		CNI_BRIDGE=$(sed -n 's/^CRIO_CNI_BRIDGE=//p' <<<"$out")
		for f in "$@"; do cp "$f" "$CRIO_CONFIG_DIR/"; done
		METRICS_URL=http://127.0.0.1:$port/metrics
		METRIC_DECISIONS=container_runtime_crio_nri_required_plugin_decisions_total
		;;
	containerd)
		local d=$K8S_WORK/containerd
		CNI_BRIDGE=nk8$(printf %s "$K8S_WORK" | md5sum | cut -c1-10)
		out=$(NRI_SOCK=$NRI_SOCK CNI_BRIDGE=$CNI_BRIDGE PAUSE_IMAGE=$CONTAINERD_PAUSE_IMAGE \
			NRI_PLUGIN_REQUEST_TIMEOUT=${NRI_REQUEST_TIMEOUT:-2s} METRICS_ADDRESS=127.0.0.1:$port \
			"$REPO_ROOT/contrib/containerd/containerd-test-config.sh" "$d") || return
		CONTAINERD_CONFIG=$(sed -n 's/^CONFIG=//p' <<<"$out")
		CRI_SOCK=$(sed -n 's/^CRI_SOCK=//p' <<<"$out")
		# The drop-in goes where `containerd config default` imports
		# drop-ins from (/etc/containerd/conf.d/*.toml), here a private
		# directory: the one line an operator's config.toml has too.
		rm -rf "$d/conf.d" && mkdir -p "$d/conf.d"
		cp "$policy" "$@" "$d/conf.d/"
		sed -i "1a imports = [\"$d/conf.d/*.toml\"]" "$CONTAINERD_CONFIG"
		METRICS_URL=http://127.0.0.1:$port/v1/metrics
		METRIC_DECISIONS=containerd_nri_required_plugin_decisions_total
		;;
	esac
	export CRI_SOCK NRI_SOCK CNI_BRIDGE METRICS_URL METRIC_DECISIONS CRIO_CONFIG CRIO_CONFIG_DIR CONTAINERD_CONFIG
}

# runtime_start [POLICY_FILE [MORE_DROPINS...]]: configure (first time, or
# a new policy) and start the runtime in the private mount namespace;
# RUNTIME_PID. Without arguments: the shipped drop-in alone.
runtime_start() {
	local policy=${1:-}
	if [[ -z $policy ]]; then
		policy=$(runtime_dropin)
	fi
	runtime_config "$policy" "${@:2}" || return
	case $K8S_RUNTIME in
	crio)
		if [[ ! -f $K8S_WORK/crio/imported ]]; then
			# copyimg writes CRI-O's store directly, before CRI-O starts.
			local img
			for img in "busybox.tar $TEST_IMAGE_NAME $CRIO_PAUSE_IMAGE" "plugin.tar $PLUGIN_IMAGE" "plugin2.tar $PLUGIN2_IMAGE"; do
				set -- $img
				in_ns env CRIO_BINDIR="$RUNTIME_BINDIR" "$REPO_ROOT/contrib/cri-o/crio-import-image.sh" \
					"$K8S_WORK/crio" "$K8S_WORK/images/$1" "${@:2}" >>"$K8S_WORK/logs/import.log" 2>&1 ||
					{ cat "$K8S_WORK/logs/import.log" >&2; return 1; }
			done
			touch "$K8S_WORK/crio/imported"
		fi
		nsenter -t "$NS_PID" -m -- "$RUNTIME_BINDIR/crio" --config "$CRIO_CONFIG" --config-dir "$CRIO_CONFIG_DIR" \
			>>"$K8S_WORK/logs/runtime.log" 2>&1 &
		;;
	containerd)
		nsenter -t "$NS_PID" -m -- env PATH="$RUNTIME_BINDIR:$PATH" "$RUNTIME_BINDIR/containerd" --config "$CONTAINERD_CONFIG" \
			>>"$K8S_WORK/logs/runtime.log" 2>&1 &
		;;
	esac
	RUNTIME_PID=$!
	echo "$RUNTIME_PID" >"$K8S_WORK/runtime.pid"
	export RUNTIME_PID
	local deadline=$((SECONDS + 30))
	until crictl_k info >/dev/null 2>&1; do
		kill -0 "$RUNTIME_PID" 2>/dev/null || { echo "runtime exited:" >&2; tail -5 "$K8S_WORK/logs/runtime.log" >&2; return 1; }
		((SECONDS < deadline)) || { echo "runtime not up in 30s" >&2; return 1; }
		sleep 0.05
	done
	# The answer must have come from this instance.
	kill -0 "$RUNTIME_PID" 2>/dev/null || { echo "runtime exited:" >&2; tail -5 "$K8S_WORK/logs/runtime.log" >&2; return 1; }
	if [[ $K8S_RUNTIME == containerd && ! -f $K8S_WORK/containerd/imported ]]; then
		local a
		for a in containerd-images.tar plugin.tar plugin2.tar; do
			ctr --address "$CRI_SOCK" -n k8s.io images import "$K8S_WORK/images/$a" >>"$K8S_WORK/logs/import.log" 2>&1 ||
				{ cat "$K8S_WORK/logs/import.log" >&2; return 1; }
		done
		touch "$K8S_WORK/containerd/imported"
	fi
	# The CRI Status watchers: every change of NetworkReady and of
	# NRIPluginsReady, time-stamped.
	"$K8S_WORK/cristatus" -endpoint "unix://$CRI_SOCK" >>"$K8S_WORK/logs/networkready.log" 2>&1 &
	echo $! >"$K8S_WORK/cristatus.pid"
	"$K8S_WORK/cristatus" -endpoint "unix://$CRI_SOCK" -condition NRIPluginsReady >>"$K8S_WORK/logs/nripluginsready.log" 2>&1 &
	echo $! >>"$K8S_WORK/cristatus.pid"
}

# stop_pidfile FILE TRIES: SIGTERM the process whose pid FILE holds, as
# systemd stops a unit, wait up to TRIES x 50 ms for it to exit, then
# SIGKILL it and reap it. Returns 1 if there was nothing to signal (no FILE,
# or the process already gone).
stop_pidfile() {
	local pid i
	pid=$(cat "$1" 2>/dev/null) || return 1
	kill -TERM "$pid" 2>/dev/null || return 1
	for i in $(seq "$2"); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# runtime_stop: SIGTERM the runtime (containers keep running: conmon and the
# shims outlive it, as with a systemd restart) and wait for it to exit.
runtime_stop() {
	cristatus_stop
	stop_pidfile "$K8S_WORK/runtime.pid" 200 || return 0
	! crictl_k info >/dev/null 2>&1 || { echo "runtime_stop: the CRI socket still answers" >&2; return 1; }
}

# runtime_kill: the runtime SIGKILLed, as a crash ends it (nothing of its
# own shutdown runs), and reaped (runtime_start started it as a child of
# the test's shell).
runtime_kill() {
	local pid
	cristatus_stop
	pid=$(cat "$K8S_WORK/runtime.pid") || return
	kill -KILL "$pid" || { echo "runtime_kill: no runtime process $pid" >&2; return 1; }
	wait "$pid" 2>/dev/null || true
}

# cristatus_stop: the CRI Status watchers runtime_start started stopped.
cristatus_stop() {
	local pid
	for pid in $(cat "$K8S_WORK/cristatus.pid" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
	rm -f "$K8S_WORK/cristatus.pid"
}

# k8s_control_plane: upstream's hack/local-up-cluster.sh from the
# k8s.io/kubernetes module with the binaries of make k8s, in daemon mode,
# every path private, bound to 127.0.0.1; no kubelet, kube-proxy, DNS or
# storage class. There is no sudo on these machines and we are root: a
# stand-in that runs its arguments is first on PATH.
k8s_control_plane() {
	local src
	src=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | jq -r .Dir) || return
	[[ -f $src/hack/local-up-cluster.sh ]] || { echo "no hack/local-up-cluster.sh in $src" >&2; return 1; }
	printf '#!/bin/sh\n[ "$1" = -E ] && shift\nexec "$@"\n' >"$K8S_WORK/sbin/sudo"
	chmod +x "$K8S_WORK/sbin/sudo"
	CERT_DIR=$K8S_WORK/certs
	KUBECONFIG=$CERT_DIR/admin.kubeconfig
	export CERT_DIR KUBECONFIG
	local t0
	t0=$(now)
	if ! env PATH="$K8S_WORK/sbin:$PATH" GO_OUT="$K8S_BIN" START_MODE=nokubelet,nokubeproxy ENABLE_DAEMON=true \
		API_BIND_ADDR=127.0.0.1 API_HOST=127.0.0.1 API_HOST_IP=127.0.0.1 \
		CERT_DIR="$CERT_DIR" LOG_DIR="$K8S_WORK/logs" TMP_DIR="$K8S_WORK/tmp" ETCD_DIR="$K8S_WORK/etcd" \
		KUBE_ENABLE_CLUSTER_DNS=false KUBE_DEFAULT_STORAGE_CLASS=false KUBE_VERBOSE=0 \
		bash "$src/hack/local-up-cluster.sh" >"$K8S_WORK/logs/local-up-cluster.log" 2>&1; then
		echo "hack/local-up-cluster.sh failed:" >&2
		tail -20 "$K8S_WORK/logs/local-up-cluster.log" >&2
		return 1
	fi
	kc get --raw /readyz >/dev/null || return
	log "control plane up in $(since "$t0")s"
	record setup control_plane_seconds "$(since "$t0")"
}

# kubelet_start: the kubelet in the runtime's mount namespace, with a
# client certificate system:node:$NODE signed by the script's client CA.
kubelet_start() {
	local d=$K8S_WORK/kubelet
	if [[ ! -f $d/kubelet.kubeconfig ]]; then
		openssl req -new -newkey rsa:2048 -nodes -keyout "$d/client.key" -subj "/O=system:nodes/CN=system:node:$NODE" \
			-out "$d/client.csr" 2>/dev/null &&
			openssl x509 -req -in "$d/client.csr" -CA "$CERT_DIR/client-ca.crt" -CAkey "$CERT_DIR/client-ca.key" \
				-CAcreateserial -days 2 -out "$d/client.crt" 2>/dev/null || return
		kubectl config --kubeconfig "$d/kubelet.kubeconfig" set-cluster local --server=https://127.0.0.1:6443 \
			--certificate-authority="$CERT_DIR/server-ca.crt" >/dev/null
		kubectl config --kubeconfig "$d/kubelet.kubeconfig" set-credentials kubelet \
			--client-certificate="$d/client.crt" --client-key="$d/client.key" >/dev/null
		kubectl config --kubeconfig "$d/kubelet.kubeconfig" set-context local --cluster=local --user=kubelet >/dev/null
		kubectl config --kubeconfig "$d/kubelet.kubeconfig" use-context local >/dev/null
	fi
	# A cgroup root of our own in every hierarchy: the pods' cgroups go
	# under it and k8s_down removes it.
	CGROUP_ROOT=/$(basename "$K8S_WORK")
	local h
	for h in /sys/fs/cgroup/*/; do
		[[ -e $h/cgroup.procs ]] && mkdir -p "$h${CGROUP_ROOT#/}"
	done
	cat >"$d/config.yaml" <<-YAML
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		address: 127.0.0.1
		port: 10250
		readOnlyPort: 0
		healthzBindAddress: 127.0.0.1
		healthzPort: 10248
		authentication:
		  anonymous: {enabled: false}
		  webhook: {enabled: true}
		  x509: {clientCAFile: "$CERT_DIR/client-ca.crt"}
		authorization: {mode: Webhook}
		containerRuntimeEndpoint: "unix://$CRI_SOCK"
		cgroupDriver: cgroupfs
		cgroupRoot: "$CGROUP_ROOT"
		failCgroupV1: false
		failSwapOn: false
		makeIPTablesUtilChains: false
		staticPodPath: "$K8S_WORK/static-pods"
		podLogsDir: "$K8S_WORK/pod-logs"
		volumePluginDir: "$d/volume-plugins"
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
		resolvConf: /etc/resolv.conf
	YAML
	nsenter -t "$NS_PID" -m -- "$K8S_BIN/kubelet" --config "$d/config.yaml" --kubeconfig "$d/kubelet.kubeconfig" \
		--hostname-override "$NODE" --root-dir "$d/root" --cert-dir "$d/pki" --v=2 \
		>>"$K8S_WORK/logs/kubelet.log" 2>&1 &
	KUBELET_PID=$!
	echo "$KUBELET_PID" >"$K8S_WORK/kubelet.pid"
	export KUBELET_PID CGROUP_ROOT
	kc wait --for=create "node/$NODE" --timeout=60s >/dev/null || {
		echo "node $NODE not registered:" >&2
		tail -20 "$K8S_WORK/logs/kubelet.log" >&2
		return 1
	}
}

# kubelet_stop: SIGTERM the kubelet, as systemd stops it, and wait for it
# to exit (the pods' containers keep running).
kubelet_stop() {
	stop_pidfile "$K8S_WORK/kubelet.pid" 200 || return 0
	! curl -sf http://127.0.0.1:10248/healthz >/dev/null 2>&1 || { echo "kubelet_stop: the kubelet still answers" >&2; return 1; }
}

# pods_kill: what a reboot does to the pods: SIGKILL to every process in
# the pods' cgroups (under the kubelet's cgroupRoot: the containers, and
# CRI-O's conmon, which runs in the pod's cgroup), until none is left.
# Prints how many processes it killed.
pods_kill() {
	local h pids n=0 round p
	for round in $(seq 100); do
		pids=$(for h in /sys/fs/cgroup/*/; do
			[[ -d $h${CGROUP_ROOT#/} ]] && find "$h${CGROUP_ROOT#/}" -name cgroup.procs -exec cat {} + 2>/dev/null
		done | sort -u)
		[[ -n $pids ]] || { echo "$n"; return 0; }
		for p in $pids; do kill -KILL "$p" 2>/dev/null && n=$((n + 1)); done
		sleep 0.05
	done
	echo "pods_kill: processes left in $CGROUP_ROOT" >&2
	return 1
}

# --- node-problem-detector ---------------------------------------------------

# npd_config: the custom plugin monitor config of contrib/kubernetes/npd for
# K8S_RUNTIME as the test runs it, in K8S_WORK/npd/. Four substitutions,
# each checked against the shipped value: invoke_interval (NPD_INTERVAL
# seconds), the check's path (the nri-npd-check k8s_images built), the
# runtime endpoint (the runtime's private socket) and the went-down state
# file (private). The CRI-O and containerd configs must differ in the
# endpoint only.
npd_config() {
	local shipped ep out=$K8S_WORK/npd/nri-plugins-monitor.json
	mkdir -p "$K8S_WORK/npd"
	case $K8S_RUNTIME in
	crio) shipped=$NPD_CONFIG_CRIO ep=unix:///var/run/crio/crio.sock ;;
	containerd) shipped=$NPD_CONFIG_CONTAINERD ep=unix:///run/containerd/containerd.sock ;;
	esac
	diff <(jq -S . "$NPD_CONFIG_CRIO" | sed 's|unix:///var/run/crio/crio.sock|ENDPOINT|') \
		<(jq -S . "$NPD_CONFIG_CONTAINERD" | sed 's|unix:///run/containerd/containerd.sock|ENDPOINT|') >&2 ||
		{ echo "npd_config: the CRI-O and containerd configs differ in more than the endpoint" >&2; return 1; }
	jq -e --arg ep "$ep" '(.rules | length) as $n | $n == 2 and ([.rules[].args[] | select(. == $ep)] | length) == $n and
		([.rules[].args[] | select(endswith("/went-down.json"))] | length) == 1 and
		([.rules[].path] | unique | length) == 1 and .pluginConfig.invoke_interval != null' "$shipped" >/dev/null ||
		{ echo "npd_config: $shipped: not the 2 rules on $ep with one went-down state file expected" >&2; return 1; }
	jq --arg ep "unix://$CRI_SOCK" --arg ck "$K8S_WORK/nri-npd-check" --arg st "$K8S_WORK/npd/state/went-down.json" \
		--arg iv "${NPD_INTERVAL}s" --arg old "$ep" '
		.pluginConfig.invoke_interval = $iv | .rules[].path = $ck |
		.rules[].args |= map(if . == $old then $ep elif endswith("/went-down.json") then $st else . end)' \
		"$shipped" >"$out" || return
	echo "$out"
}

# npd_start: node-problem-detector v1.35.2 (make k8s) in standalone mode
# on the host, as its systemd unit runs it: the custom plugin monitor
# config of npd_config only, the kubelet's credentials (a node may patch
# its own Node's status and create events), the node's name. Where NPD
# could not be built (build/k8s/npd-unavailable), the stand-in
# test/k8s/npd-standin.bash with the same arguments. NPD_IMPL says which.
npd_start() {
	local cfg bin
	cfg=$(npd_config) || return
	if [[ -x $K8S_BIN/node-problem-detector ]]; then
		bin=$K8S_BIN/node-problem-detector
		NPD_IMPL="node-problem-detector $("$bin" --version 2>/dev/null)"
	else
		[[ -z ${CI:-} || -f $K8S_BIN/../npd-unavailable ]] ||
			{ echo "no node-problem-detector in $K8S_BIN and no build/k8s/npd-unavailable: run make k8s" >&2; return 1; }
		bin=$REPO_ROOT/test/k8s/npd-standin.bash
		NPD_IMPL="test/k8s/npd-standin.bash (node-problem-detector not built: $(cat "$K8S_BIN/../npd-unavailable" 2>/dev/null || echo "no binary"))"
	fi
	export NPD_IMPL
	NPD_STANDIN_STDERR=$K8S_WORK/logs/npd-checks.log "$bin" --config.custom-plugin-monitor="$cfg" \
		--hostname-override="$NODE" \
		--apiserver-override="https://127.0.0.1:6443?inClusterConfig=false&auth=$K8S_WORK/kubelet/kubelet.kubeconfig" \
		--port=0 --prometheus-port=0 --logtostderr --v=2 >>"$K8S_WORK/logs/npd.log" 2>&1 &
	echo $! >"$K8S_WORK/npd.pid"
	# Up when the condition is on the Node (the initial status, or the
	# first check's).
	kc wait --for=jsonpath="{.status.conditions[?(@.type==\"$NPD_CONDITION\")].type}"="$NPD_CONDITION" "node/$NODE" \
		--timeout=60s >/dev/null || { echo "node-problem-detector did not set $NPD_CONDITION:" >&2; tail -20 "$K8S_WORK/logs/npd.log" >&2; return 1; }
}

npd_stop() {
	stop_pidfile "$K8S_WORK/npd.pid" 100 || true
}

# node_watch_start: a watch of our Node (kubectl get -w) that appends, for
# every update, the receive time (epoch) and the Ready and NPD conditions to
# K8S_WORK/logs/node-conditions.jsonl, for node_cond_first and
# node_cond_count. Restarted if the API server ends the watch.
node_watch_start() {
	(
		while :; do
			kubectl --kubeconfig "$KUBECONFIG" get node "$NODE" -w -o json 2>/dev/null |
				jq --unbuffered -c --arg c "$NPD_CONDITION" '{t: now, c: [.status.conditions[]? |
					select(.type == "Ready" or .type == $c) | {type, status, reason, message, lastTransitionTime}]}'
			sleep 0.2
		done
	) >>"$K8S_WORK/logs/node-conditions.jsonl" 2>/dev/null &
	echo $! >"$K8S_WORK/node-watch.pid"
}

# node_cond_first TYPE STATUS AFTER [SECONDS]: the receive time (epoch) of
# the first Node update at or after AFTER (epoch) in which condition TYPE
# has STATUS, waiting up to SECONDS (default 120) for the watch to bring it.
node_cond_first() {
	local deadline=$((SECONDS + ${4:-120})) t
	while :; do
		t=$(jq -r --arg ty "$1" --arg st "$2" --argjson a "$3" \
			'select(.t >= $a and any(.c[]; .type == $ty and .status == $st)) | .t' \
			"$K8S_WORK/logs/node-conditions.jsonl" 2>/dev/null | head -1)
		[[ -n $t ]] && { echo "$t"; return 0; }
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

# node_wait_condition TYPE STATUS [TIMEOUT]: the Node's condition TYPE is
# (or becomes, through a watch) STATUS.
node_wait_condition() {
	kc wait --for=jsonpath="{.status.conditions[?(@.type==\"$1\")].status}"="$2" "node/$NODE" --timeout="${3:-60s}" >/dev/null
}

# node_cond_count TYPE STATUS FROM TO: how many Node updates received
# between FROM and TO (epochs) had condition TYPE with STATUS.
node_cond_count() {
	jq -s --arg ty "$1" --arg st "$2" --argjson a "$3" --argjson b "$4" \
		'[.[] | select(.t >= $a and .t <= $b and any(.c[]; .type == $ty and .status == $st))] | length' \
		"$K8S_WORK/logs/node-conditions.jsonl"
}

# node_condition TYPE FIELD: a field (status, reason, message,
# lastTransitionTime) of the Node's condition TYPE.
node_condition() {
	kc get node "$NODE" -o json | jq -r --arg t "$1" --arg f "$2" '.status.conditions[] | select(.type == $t) | .[$f]'
}

# describe_node_conditions: the Conditions section of kubectl describe
# node, as an operator reads it, without the heartbeat column's churn.
describe_node_conditions() {
	kc describe node "$NODE" | sed -n '/^Conditions:/,/^Addresses:/p' | sed '$d'
}

# node_events REASON_REGEX: the events about our Node whose reason matches,
# as "TYPE REASON: MESSAGE" lines, oldest first.
node_events() {
	kc get events -A -o json --field-selector "involvedObject.kind=Node,involvedObject.name=$NODE" |
		jq -r --arg re "$1" '.items | sort_by(.lastTimestamp // .eventTime) | .[] | select(.reason | test($re)) |
			"\(.type) \(.reason): \(.message)"'
}

# ms A B: (B - A) in milliseconds, no decimals.
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) * 1000 }'; }

# --- tear-down --------------------------------------------------------------

# k8s_down: stop everything k8s_up started (by its pid files and by the
# work directory in a command line), remove the pods' containers, cgroups,
# the CNI bridge, restore the sysctls; keep the logs in K8S_RESULTS.
k8s_down() {
	[[ -n ${K8S_WORK:-} && -d $K8S_WORK ]] || return 0
	local pid
	pid=$(cat "$K8S_WORK/kubelet.pid" 2>/dev/null) && kill -TERM "$pid" 2>/dev/null
	pid=$(cat "$K8S_WORK/outage-heartbeat.pid" 2>/dev/null) && kill "$pid" 2>/dev/null || true
	pid=$(cat "$K8S_WORK/node-watch.pid" 2>/dev/null) && kill "$pid" 2>/dev/null || true
	npd_stop
	if [[ -n ${CRI_SOCK:-} && -S $CRI_SOCK ]] && crictl_k info >/dev/null 2>&1; then
		local c
		for c in $(crictl_k ps -q 2>/dev/null); do crictl_k stop -t 0 "$c" >/dev/null 2>&1; done
		crictl_k rmp -fa >/dev/null 2>&1
	fi
	runtime_stop
	# Control plane, etcd, conmon, shims, cristatus, the namespace holder:
	# every process whose command line names the work directory.
	local round
	for round in TERM KILL; do
		for pid in $(grep -lsF "$K8S_WORK" /proc/[0-9]*/cmdline | cut -d/ -f3); do
			[[ $pid != "$$" && $pid != "$BASHPID" ]] && kill "-$round" "$pid" 2>/dev/null
		done
		[[ $round == TERM ]] && sleep 1
	done
	pid=$(cat "$K8S_WORK/ns.pid" 2>/dev/null) && kill -KILL "$pid" 2>/dev/null
	local r
	for r in "$K8S_WORK"/crio/runc "$K8S_WORK"/containerd/runc; do
		[[ -d $r ]] || continue
		for c in $(runc --root "$r" list -q 2>/dev/null); do
			runc --root "$r" kill "$c" KILL 2>/dev/null
			runc --root "$r" delete --force "$c" 2>/dev/null
		done
	done
	awk -v d="$K8S_WORK/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null
	done
	[[ -n ${CNI_BRIDGE:-} ]] && ip link delete "$CNI_BRIDGE" 2>/dev/null
	if [[ -n ${CGROUP_ROOT:-} ]]; then
		local h
		for h in /sys/fs/cgroup/*/; do
			[[ -d $h${CGROUP_ROOT#/} ]] && find "$h${CGROUP_ROOT#/}" -depth -type d -exec rmdir {} + 2>/dev/null
		done
	fi
	k8s_restore_sysctls
	# Nothing of the host's iptables rules or /etc/cni may have changed.
	if [[ -f $K8S_WORK/host.before ]]; then
		if host_snapshot | diff "$K8S_WORK/host.before" - >"$K8S_WORK/logs/host.diff"; then
			log "host iptables rules and /etc/cni unchanged"
			record teardown host_unchanged yes
		else
			record teardown host_unchanged "NO: $(head -5 "$K8S_WORK/logs/host.diff")"
			log "host iptables rules or /etc/cni changed (see logs/host.diff):"
			head -20 "$K8S_WORK/logs/host.diff" >&2
		fi
	fi
	mkdir -p "$K8S_RESULTS/logs-$K8S_RUNTIME"
	cp -r "$K8S_WORK/logs/." "$K8S_RESULTS/logs-$K8S_RUNTIME/" 2>/dev/null
	if [[ -z ${K8S_KEEP:-} ]]; then
		rm -rf "$K8S_WORK" 2>/dev/null || { sleep 1; rm -rf "$K8S_WORK"; }
	else
		echo "kept $K8S_WORK" >&2
	fi
}

k8s_restore_sysctls() {
	local s v cur
	[[ -f $K8S_WORK/sysctl.saved ]] || return 0
	while read -r s v; do
		cur=$(cat "/proc/sys/${s//.//}" 2>/dev/null)
		if [[ $cur != "$v" ]]; then
			echo "$v" >"/proc/sys/${s//.//}" && log "restored $s = $v (was $cur)" && record teardown sysctl_restored "$s = $v (was $cur)"
		fi
	done <"$K8S_WORK/sysctl.saved"
}

# --- the plugin's DaemonSet ---------------------------------------------------

# ds_manifest: contrib/kubernetes/device-injector-daemonset.yaml as the test
# applies it. Three substitutions, each checked to hit exactly one line:
#  - the image: the plugin image this test builds (nri-faulty registering
#    as device-injector) instead of upstream's sample;
#  - the hostPath of the NRI socket directory: the runtime's private one;
#  - priorityClassName: system-node-critical is dropped: the kubelet then
#    sets oom_score_adj -997, which runc cannot apply on these VMs (no
#    CAP_SYS_RESOURCE in the bounding set). Keep it on a real node.
ds_manifest() {
	local src=${1:-$DAEMONSET_MANIFEST} img=${2:-$PLUGIN_IMAGE} n f
	f=$K8S_WORK/$(basename "$src")
	sed -e "s|^\(\s*image:\s*\).*$|\1$img|" \
		-e "s|^\(\s*path:\s*\)/var/run/nri\s*$|\1$K8S_WORK/nri|" \
		-e '/^\s*priorityClassName:\s*system-node-critical\s*$/d' "$src" >"$f"
	n=$(diff "$src" "$f" | grep -c '^<')
	[[ $n == 3 ]] || { echo "ds_manifest: expected 3 substituted lines in $src, got $n" >&2; return 1; }
	echo "$f"
}

# The DaemonSet helpers take the DaemonSet's name (its pods' label
# app.kubernetes.io/name): DS_NAME (default) or DS2_NAME, the two-plugin
# variant's, whose manifest and image ds_apply knows.
ds_apply() {
	local f
	case ${1:-$DS_NAME} in
	"$DS_NAME") f=$(ds_manifest) ;;
	"$DS2_NAME") f=$(ds_manifest "$DS2_MANIFEST" "$PLUGIN2_IMAGE") ;;
	esac || return
	kc apply -f "$f" >/dev/null
}

# ds_delete [NAME]: the DaemonSet gone and its pod with it (the plugin absent).
ds_delete() {
	local ds=${1:-$DS_NAME}
	kc -n "$DS_NS" delete ds "$ds" --ignore-not-found --wait=true >/dev/null || return
	kc -n "$DS_NS" wait --for=delete pod -l app.kubernetes.io/name="$ds" --timeout=60s >/dev/null 2>&1 || true
}

# ds_pod [NAME]: the name of the DaemonSet's pod on our node.
ds_pod() {
	kc -n "$DS_NS" get pods -l app.kubernetes.io/name="${1:-$DS_NAME}" --field-selector "spec.nodeName=$NODE" -o json |
		jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name][0] // empty'
}

# ds_wait_ready [TIMEOUT [NAME]]: the DaemonSet's pod on our node Ready.
ds_wait_ready() {
	local t=${1:-120s} ds=${2:-$DS_NAME} deadline=$((SECONDS + 120)) p
	until p=$(ds_pod "$ds") && [[ -n $p ]]; do
		((SECONDS < deadline)) || return 1
		kc -n "$DS_NS" wait --for=create pod -l app.kubernetes.io/name="$ds" --timeout=5s >/dev/null 2>&1 || true
	done
	kc -n "$DS_NS" wait --for=condition=Ready "pod/$p" --timeout="$t" >/dev/null
}

# plugin_ready_times [NAME]: the "ready <RFC3339>" lines the plugin of
# DaemonSet NAME prints on stdout after each Synchronize, from its
# containers' logs (all restarts; the kubelet's log directories are
# NAMESPACE_POD_UID, and a DaemonSet's pods are named NAME-xxxxx).
plugin_ready_times() {
	cat "$K8S_WORK"/pod-logs/${DS_NS}_${1:-$DS_NAME}-*/plugin/*.log 2>/dev/null |
		awk '$2 == "stdout" && $4 == "ready" { print $5 }' | sort
}

# plugin_pid: the host pid of the running plugin process.
plugin_pid() {
	local id
	id=$(crictl_k ps -q --name '^plugin$' --state running | head -1)
	[[ -n $id ]] || return 1
	crictl_k inspect -o go-template --template '{{.info.pid}}' "$id"
}

# --- nodes ------------------------------------------------------------------

node_ready() { kc get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'; }
node_wait_ready() { kc wait --for=condition=Ready "node/$NODE" --timeout="${1:-120s}" >/dev/null; }
node_wait_notready() {
	kc wait --for=jsonpath='{.status.conditions[?(@.type=="Ready")].status}'=False "node/$NODE" --timeout="${1:-60s}" >/dev/null
}
node_ready_message() { kc get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}'; }

# cristatus_first LOG STATE EPOCH: the first time (epoch) a cristatus log
# (networkready.log, nripluginsready.log) recorded STATE ("NetworkReady=true",
# "NRIPluginsReady=false") at or after EPOCH.
cristatus_first() {
	local line t
	while read -r line; do
		[[ $line == *" $2 "* ]] || continue
		t=$(rfc_epoch "${line%% *}")
		awk -v a="$t" -v b="$3" 'BEGIN { exit !(a >= b) }' && { echo "$t"; return 0; }
	done <"$K8S_WORK/logs/$1"
	return 1
}

# networkready_true_after EPOCH: the first time (epoch) the runtime's CRI
# Status reported NetworkReady=true at or after EPOCH.
networkready_true_after() { cristatus_first networkready.log NetworkReady=true "$1"; }

# --- workloads --------------------------------------------------------------

# ns_create NS: a namespace whose default service account exists (pods are
# rejected until the controller manager created it).
ns_create() {
	kc create namespace "$1" >/dev/null 2>&1 || true
	kc -n "$1" wait --for=create serviceaccount/default --timeout=60s >/dev/null
}

# deployment NS NAME REPLICAS [EXTRA_POD_SPEC_JSON]: a Deployment of the
# busybox test image whose container sleeps and exits at once on TERM.
deployment() {
	local ns=$1 name=$2 n=$3 extra=${4:-'{}'}
	jq -n --arg ns "$ns" --arg n "$name" --argjson r "$n" --arg img "$TEST_IMAGE_NAME" --argjson extra "$extra" '{
		apiVersion: "apps/v1", kind: "Deployment", metadata: {name: $n, namespace: $ns},
		spec: {replicas: $r, selector: {matchLabels: {app: $n}},
			template: {metadata: {labels: {app: $n}},
				spec: ({terminationGracePeriodSeconds: 1, automountServiceAccountToken: false,
					containers: [{name: "app", image: $img, imagePullPolicy: "Never",
						command: ["sh", "-c", "trap \"exit 0\" TERM; while :; do sleep 1 & wait; done"]}]} + $extra)}}}' |
		kc apply -f - >/dev/null
}

# pod_json NS NAME [EXTRA_METADATA_JSON] [EXTRA_SPEC_JSON]: a bare pod.
pod_json() {
	jq -n --arg ns "$1" --arg n "$2" --arg img "$TEST_IMAGE_NAME" --argjson m "${3:-{\}}" --argjson s "${4:-{\}}" '{
		apiVersion: "v1", kind: "Pod", metadata: ({name: $n, namespace: $ns} * $m),
		spec: ({terminationGracePeriodSeconds: 1, automountServiceAccountToken: false,
			containers: [{name: "app", image: $img, imagePullPolicy: "Never",
				command: ["sh", "-c", "trap \"exit 0\" TERM; while :; do sleep 1 & wait; done"]}]} * $s)}'
}

# wait_running NS SELECTOR N [TIMEOUT]: N pods matching SELECTOR, all
# Running (watch-based kubectl wait on each).
wait_running() {
	local ns=$1 sel=$2 n=$3 t=${4:-180s} deadline=$((SECONDS + 180))
	until [[ $(kc -n "$ns" get pods -l "$sel" -o name | wc -l) -ge $n ]]; do
		((SECONDS < deadline)) || { echo "fewer than $n pods $sel in $ns" >&2; return 1; }
		kc -n "$ns" wait --for=create pod -l "$sel" --timeout=5s >/dev/null 2>&1 || sleep 0.5
	done
	kc -n "$ns" wait --for=jsonpath='{.status.phase}'=Running pod -l "$sel" --timeout="$t" >/dev/null
}

# last_running_epoch NS SELECTOR: when the last matching pod's container
# started (epoch, second resolution of the API's startedAt).
last_running_epoch() {
	local t
	t=$(kc -n "$1" get pods -l "$2" -o json |
		jq -r '[.items[].status.containerStatuses[]?.state.running.startedAt // empty] | max // empty')
	[[ -n $t ]] && rfc_epoch "$t"
}

# check_injection NS SELECTOR [INJECTION]: for every container of every
# matching pod,
# its environment through crictl exec (kubectl exec needs a node address,
# which a kubelet on 127.0.0.1 does not get). Prints "PODS MISSING" where
# MISSING counts containers without the plugin's injection; lists them on
# stderr.
check_injection() {
	local ns=$1 sel=$2 inj=${3:-$INJECTION} pods=0 missing=0 id pod
	while read -r pod id; do
		[[ -n $id ]] || continue
		pods=$((pods + 1))
		if ! crictl_k exec "${id#*://}" env 2>/dev/null | grep -qx "$inj"; then
			missing=$((missing + 1))
			echo "container of $ns/$pod ($id) without $inj" >&2
		fi
	done < <(kc -n "$ns" get pods -l "$sel" -o json |
		jq -r '.items[] | .metadata.name as $p | .status.containerStatuses[]? | "\($p) \(.containerID // "")"')
	echo "$pods $missing"
}

# nri_events NS: the kubelet's events in NS whose message carries the
# policy's refusal (REFUSAL_RE), as JSON lines {reason, count, message}.
nri_events() {
	kc -n "$1" get events -o json |
		jq -c --arg re "$REFUSAL_RE" '.items[] | select(.message | test($re)) | {reason, count: (.count // 1), message}'
}
# refusals NS: how many refusals the kubelet reported (events x count).
refusals() { nri_events "$1" | jq -s 'map(.count) | add // 0'; }
# record_outcome SCENARIO NS SELECTOR [DECISIONS_BEFORE]: record the pods
# SELECTOR matches in NS and how many lack the injection (also set as PODS
# and MISSING), the refusal and NetworkNotReady events and the first refusal
# event; given decisions of before, also the waits and refusals the runtime
# counted since.
record_outcome() {
	local s=$1 ns=$2 m0=${4:-} m1 ev
	read -r PODS MISSING < <(check_injection "$ns" "$3")
	record "$s" pods "$PODS"
	record "$s" missing "$MISSING"
	if [[ -n $m0 ]]; then
		m1=$(decisions)
		record "$s" waited "$(($(cut -d' ' -f1 <<<"$m1") - $(cut -d' ' -f1 <<<"$m0")))"
		record "$s" refused_metric "$(($(cut -d' ' -f2 <<<"$m1") - $(cut -d' ' -f2 <<<"$m0")))"
	fi
	record "$s" refusals "$(refusals "$ns")"
	record "$s" netnotready "$(netnotready_events "$ns")"
	ev=$(nri_events "$ns" | head -1)
	[[ -z $ev ]] || record "$s" refusal_event "$(jq -r '"\(.reason): \(.message)"' <<<"$ev")"
}

# netnotready_events NS: how many times the kubelet held a pod back because
# the runtime's network was not ready.
netnotready_events() {
	kc -n "$1" get events -o json | jq '[.items[] | select(.reason == "NetworkNotReady") | (.count // 1)] | add // 0'
}

# metric EVENT OUTCOME: the runtime's policy decision counter for our key.
metric() {
	curl -sf "$METRICS_URL" | awk -v ev="$1" -v oc="$2" -v k="$POLICY_KEY" '
		index($0, "'"$METRIC_DECISIONS"'{") == 1 && index($0, "event=\"" ev "\"") && index($0, "outcome=\"" oc "\"") &&
		index($0, "plugin=\"" k "\"") { s += $NF } END { print s + 0 }'
}
# decisions: "allowed refused ignored" summed over events, for deltas.
decisions() {
	local o a=0 v
	for o in allowed refused ignored; do
		v=$(($(metric RunPodSandbox "$o") + $(metric CreateContainer "$o")))
		printf '%s ' "$v"
	done
	echo
}

# wait_event NS OBJECT REGEX SECONDS: the first event about OBJECT whose
# message matches REGEX, as JSON, through a watch (kubectl get -w lists the
# existing events first); nothing if none came in time.
wait_event() {
	local line
	read -r line < <(timeout "$4" kubectl --kubeconfig "$KUBECONFIG" -n "$1" get events -w -o json \
		--field-selector "involvedObject.name=$2" 2>/dev/null |
		jq -c --unbuffered --arg re "$3" 'select(.message | test($re))')
	[[ -n $line ]] && echo "$line"
}

# describe_events NS POD: the Events section of kubectl describe pod, as an
# operator reads it.
describe_events() {
	kc -n "$1" describe pod "$2" | sed -n '/^Events:/,$p'
}

# fake_node_start NAME: a second node object kept Ready through the API
# (its Lease renewed and its Ready heartbeat refreshed every 5 s by a
# background loop), tainted so that nothing is scheduled onto it: with one
# of two nodes Ready the node lifecycle controller is not in full-disruption
# mode and taints a NotReady node NoExecute.
fake_node_start() {
	local n=$1
	jq -n --arg n "$n" '{apiVersion: "v1", kind: "Node", metadata: {name: $n, labels: {"nrigate.test/fake": "true"}},
		spec: {taints: [{key: "nrigate.test/fake", value: "true", effect: "NoSchedule"}]}}' | kc apply -f - >/dev/null || return
	(
		while :; do
			ts=$(date -u +%Y-%m-%dT%H:%M:%SZ)
			ms=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)
			kc patch node "$n" --subresource=status --type=merge -p "$(jq -cn --arg t "$ts" '{status: {conditions: [
				{type: "Ready", status: "True", reason: "FakeNodeReady", message: "kept Ready by test/k8s", lastHeartbeatTime: $t, lastTransitionTime: "2020-01-01T00:00:00Z"}]}}')" >/dev/null 2>&1
			if kc -n kube-node-lease get lease "$n" >/dev/null 2>&1; then
				kc -n kube-node-lease patch lease "$n" --type=merge -p "{\"spec\":{\"renewTime\":\"$ms\"}}" >/dev/null 2>&1
			else
				jq -n --arg n "$n" --arg t "$ms" '{apiVersion: "coordination.k8s.io/v1", kind: "Lease",
					metadata: {name: $n, namespace: "kube-node-lease"},
					spec: {holderIdentity: $n, leaseDurationSeconds: 40, renewTime: $t}}' | kc apply -f - >/dev/null 2>&1
			fi
			sleep 5
		done
	) &
	echo $! >"$K8S_WORK/outage-heartbeat.pid"
	kc wait --for=condition=Ready "node/$n" --timeout=60s >/dev/null
}

fake_node_stop() {
	local pid
	pid=$(cat "$K8S_WORK/outage-heartbeat.pid" 2>/dev/null) && { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; } || true
	rm -f "$K8S_WORK/outage-heartbeat.pid"
	kc delete node "$1" --ignore-not-found >/dev/null
	kc -n kube-node-lease delete lease "$1" --ignore-not-found >/dev/null
}

# runtime_dropin: the shipped policy drop-in of K8S_RUNTIME.
runtime_dropin() {
	case $K8S_RUNTIME in crio) echo "$CRIO_DROPIN" ;; containerd) echo "$CONTAINERD_DROPIN" ;; esac
}

# runtime_dropin2: the two-plugin variant's second drop-in of K8S_RUNTIME.
runtime_dropin2() {
	case $K8S_RUNTIME in
	crio) echo "$TWO_PLUGINS/crio.conf.d/21-ulimit-adjuster.conf" ;;
	containerd) echo "$TWO_PLUGINS/containerd.conf.d/21-ulimit-adjuster.toml" ;;
	esac
}

# dropin_variant NAME KEY=VALUE...: the shipped drop-in with each KEY's
# value replaced (KEY = "x" lines, in either runtime's spelling), written to
# K8S_WORK/NAME-<file>; each KEY must be on exactly one line. Prints the
# file's path.
dropin_variant() {
	local src out kv k n
	src=$(runtime_dropin)
	out=$K8S_WORK/$1-$(basename "$src")
	shift
	cp "$src" "$out"
	for kv in "$@"; do
		k=${kv%%=*}
		n=$(grep -c "^\s*$k\s*=" "$src")
		[[ $n == 1 ]] || { echo "dropin_variant: $k is on $n lines of $src, want 1" >&2; return 1; }
		sed -i "s|^\(\s*$k\s*=\s*\).*$|\1${kv#*=}|" "$out"
	done
	echo "$out"
}

# plugin_ready_after EPOCH [SECONDS [NAME]]: the first "ready" time the
# plugin (of DaemonSet NAME, default DS_NAME) printed after EPOCH (RFC 3339), waiting for it to appear in the
# container's log (the pod turns Ready when the container starts, before
# the plugin has registered and synchronized).
plugin_ready_after() {
	local after deadline=$((SECONDS + ${2:-120})) t
	after=$(date -u -d "@$1" +%Y-%m-%dT%H:%M:%S.%NZ)
	while :; do
		t=$(plugin_ready_times "${3:-$DS_NAME}" | awk -v t="$after" '$1 > t' | head -1)
		[[ -n $t ]] && { echo "$t"; return 0; }
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

# plugin_log_after EPOCH REGEX [SECONDS]: the first line the plugin of the
# DaemonSet logged (stderr of its containers, all restarts) after EPOCH
# that matches the extended REGEX, waiting up to SECONDS (default 60). The
# line is the plugin's own, from its timestamp on (UTC, fixed width, so
# that it compares as a string; the kubelet's log prefix is dropped).
plugin_log_after() {
	local after deadline=$((SECONDS + ${3:-60})) l
	after=$(date -u -d "@$1" +%Y-%m-%dT%H:%M:%S.%NZ)
	while :; do
		l=$(cat "$K8S_WORK"/pod-logs/${DS_NS}_${DS_NAME}-*/plugin/*.log 2>/dev/null |
			awk -v t="$after" '$2 == "stderr" && $4 > t { sub(/^[^ ]+ [^ ]+ [^ ]+ /, ""); print }' |
			sort | grep -E -m1 -- "$2")
		[[ -n $l ]] && { echo "$l"; return 0; }
		((SECONDS < deadline)) || return 1
		sleep 0.2
	done
}

# plugin_fault MODE [ARG]: the fault the plugin of the DaemonSet injects
# from its next request on ("hang 10m"; "ok": none), as nri-faulty's control
# file says it.
plugin_fault() { echo "$*" >"$K8S_WORK/nri/$PLUGIN_CONTROL"; }

# sandboxes NS: the runtime's pod sandboxes of namespace NS, "ID STATE" a
# line (crictl pods); fails if crictl does.
sandboxes() {
	local out
	out=$(crictl_k pods --namespace "$1" -o json) || return
	jq -r '.items[] | "\(.id) \(.state)"' <<<"$out"
}

# unrelayed_restore_re SANDBOX_ID: what the runtime logs, as an extended
# regex, when it restarts with the sandbox whose RunPodSandbox relay had not
# completed when it stopped: CRI-O removes it, containerd stops it and
# reports it NotReady.
unrelayed_restore_re() {
	case $K8S_RUNTIME in
	crio) echo "Removing sandbox $1 whose creation did not complete" ;;
	containerd) echo "NRI plugins did not act on the sandbox before containerd stopped.* sandbox=$1" ;;
	esac
}

# ready_sandbox POD_UID: the ID of the pod's READY sandbox.
ready_sandbox() {
	crictl_k pods --label "io.kubernetes.pod.uid=$1" --state ready -q --no-trunc
}

# host_snapshot: the host's iptables rules (without counters) and what is
# under /etc/cni, to compare before and after.
host_snapshot() {
	local t
	for t in iptables-save ip6tables-save; do
		command -v "$t" >/dev/null && "$t" 2>/dev/null | grep -v '^#' | sed 's/\[[0-9]*:[0-9]*\]//'
	done
	command -v nft >/dev/null && nft list ruleset 2>/dev/null
	find /etc/cni -printf '%p %s %T@\n' 2>/dev/null | sort
}
