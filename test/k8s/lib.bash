# test/k8s/lib.bash: one Kubernetes v1.37.2 cluster of two nodes on one
# machine, node 1 on patched CRI-O and node 2 on patched containerd
# (K8S_NODES), for test/k8s/k8s.bats (make test-k8s) and any suite that
# drives the same cluster (the soak). Every step is a function here, so that
# a suite starts and stops the cluster, a node's runtime, kubelet, plugin
# and node-problem-detector the same way:
#
#   k8s_up                 control plane, both nodes, node-problem-detector
#   k8s_down               everything stopped and removed, the host restored
#   rt_start N [POLICY...] node N's runtime (configured, images imported)
#   rt_stop N / rt_kill N  SIGTERM (as systemd stops it) / SIGKILL
#   rt_reload N POLICY...  CRI-O's drop-ins replaced, SIGHUP (systemctl reload)
#   rt_pid N, rt_metrics N the runtime's pid, its Prometheus metrics
#   kubelet_start N / kubelet_stop N
#   ds_apply / ds_delete   the plugin's DaemonSet (contrib/kubernetes)
#   plugin_pid N, plugin_fault N MODE, plugin_cut N / plugin_uncut N
#   npd_apply, npd_pod N, npd_pid N
#
# Nodes are numbered from 1; node N is named nrigate-N (node_name N). What a
# node is made of, and why:
#
#   Mount namespace. Each node's runtime and kubelet run in a private mount
#   namespace of their own (unshare -m, held by a sleeping process), as a
#   kind node is a container: there /run, /var/lib, /var/log and /opt are
#   the node's own directories (K8S_WORK/nN/run, lib, log, opt, bind-mounted
#   over the host's), and /sys/kernel/mm/hugepages is an empty tmpfs (this host has
#   no v1 hugetlb hierarchy: runc fails on the hugepage limits the kubelet
#   sets otherwise). So the files of contrib/kubernetes resolve to each
#   node's own paths with nothing substituted: the plugin DaemonSet's
#   hostPath /var/run/nri is the node's NRI socket directory, NPD's
#   /var/run/crio and /run/containerd its runtime's socket directory, NPD's
#   /opt/nrigate/bin its check. Each runtime listens where it does on a
#   real node (/var/run/crio/crio.sock, /run/containerd/containerd.sock,
#   NRI on /var/run/nri/nri.sock); the test reaches them at the host path
#   K8S_WORK/nN/run/... (node_cri_sock N). What a kubelet or a runtime
#   keeps at a fixed path stays the node's: the kubelet's device plugin
#   socket (/var/lib/kubelet/device-plugins/kubelet.sock, whatever its
#   --root-dir: two kubelets on the host's /var/lib would take it from
#   each other), CNI's result cache (/var/lib/cni), the kubelet's
#   /var/log/containers links. Every mount vanishes with the namespace.
#   Addresses. The kubelet refuses a loopback node IP, and a node without an
#   address has no kubectl exec or logs. Node N gets 198.51.100.N/32 (TEST-NET-2)
#   on the host's lo, where only this host reaches it; both kubelets listen
#   on their own address, on the standard ports 10250 and 10248. There is no
#   kube-proxy (it would write iptables rules), so the API server listens on
#   the kubernetes Service's ClusterIP itself, 10.96.0.1:443 (also on lo):
#   in-cluster clients such as NPD's DaemonSet reach it as they would
#   through kube-proxy. k8s_down removes the addresses it added.
#   Pod network. The controller manager allocates each node a /24 of
#   10.244.0.0/16 (--allocate-node-cidrs); once the node has its podCIDR the
#   test writes the node's CNI conflist (a bridge of its own, host-local
#   IPAM on that CIDR, no ipMasq), as a CNI daemon does; the runtimes pick
#   it up (they watch their CNI directory).
#   cgroups. Each kubelet has a cgroupRoot of its own in every hierarchy
#   (/<work dir>-nN), which k8s_down removes.
#
#   Certificates. Each kubelet has a client certificate system:node:NAME
#   and a serving certificate for its name and address, both signed by
#   local-up-cluster.sh's client CA (which the API server checks kubelets
#   against: --kubelet-certificate-authority).
#
# Nothing touches iptables (makeIPTablesUtilChains: false, no kube-proxy,
# the CNI bridge without ipMasq) or /etc/cni (the runtimes' CNI configs are
# private). The kubelet and the CNI bridge plugin set sysctls
# (vm.overcommit_memory, kernel.panic*, net.ipv4.ip_forward...): k8s_up
# records them and k8s_down writes back every one that changed, and checks
# the host's iptables rules, /etc/cni and lo's addresses against a snapshot.
#
# Environment:
#   K8S_NODES        the runtime of each node, in order (default "crio containerd")
#   K8S_BIN          Kubernetes, etcd, cfssl, node-problem-detector (default build/k8s/bin, make k8s)
#   RUNTIME_BINDIR   crio, pinns, crio-copyimg, containerd, shim, ctr (bin/)
#   K8S_RESULTS      directory of the JSON records docs/kubernetes.md is
#                    generated from (default bin/test-logs/k8s)
#   K8S_KEEP         keep the work directory (logs) after k8s_down
#   CRISTATUS_INTERVAL  how often the CRI Status watchers ask each runtime
#                    (default 2ms)

REPO_ROOT=${REPO_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
K8S_VERSION=v1.37.2
K8S_BIN=${K8S_BIN:-$REPO_ROOT/build/k8s/bin}
RUNTIME_BINDIR=${RUNTIME_BINDIR:-$REPO_ROOT/bin}
K8S_NODES=${K8S_NODES:-crio containerd}
K8S_RESULTS=${K8S_RESULTS:-$REPO_ROOT/bin/test-logs/k8s}
# Addresses and ranges (see above).
API_IP=10.96.0.1
API_PORT=443
SERVICE_CIDR=10.96.0.0/24
CLUSTER_CIDR=10.244.0.0/16
NODE_IP_PREFIX=198.51.100.
# Images, built by k8s_images as OCI archives (no docker, no registry).
TEST_IMAGE_NAME=localhost/busybox:latest
CRIO_PAUSE_IMAGE=registry.k8s.io/pause:3.10.1
CONTAINERD_PAUSE_IMAGE=registry.k8s.io/pause:3.10.2
PLUGIN_IMAGE=localhost/nri-faulty:k8s-test
# The same plugin under a second tag: the DaemonSet's rollout to a new image.
PLUGIN_IMAGE_NEXT=localhost/nri-faulty:k8s-test-next
PLUGIN2_IMAGE=localhost/nri-faulty-ulimit:k8s-test
NPD_IMAGE_UPSTREAM=registry.k8s.io/node-problem-detector/node-problem-detector
NPD_IMAGE_NAME=localhost/node-problem-detector
# The files a node operator installs; the test applies exactly these.
K8S_CONTRIB=$REPO_ROOT/contrib/kubernetes
DAEMONSET_MANIFEST=$K8S_CONTRIB/device-injector-daemonset.yaml
CRIO_DROPIN=$K8S_CONTRIB/crio.conf.d/20-device-injector.conf
CONTAINERD_DROPIN=$K8S_CONTRIB/containerd.conf.d/20-device-injector.toml
NPD_DIR=$K8S_CONTRIB/npd
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
# FailedPrecondition desc = ".
REFUSAL_RE="required NRI plugin \"$POLICY_KEY\""
# The env var nri-faulty puts into every container it acts on.
INJECTION=NRI_FAULTY_ACTED=device-injector
# The file in a node's NRI socket directory, which the DaemonSet mounts,
# that the plugin reads its fault from (nri-faulty --control; plugin_fault).
PLUGIN_CONTROL=nri-faulty.control
# The two-plugin variant (contrib/kubernetes/two-plugins): a second
# required plugin, nri-faulty registering as ulimit-adjuster, index 20,
# injecting under keys of its own.
TWO_PLUGINS=$K8S_CONTRIB/two-plugins
DS2_NAME=ulimit-adjuster
DS2_MANIFEST=$TWO_PLUGINS/ulimit-adjuster-daemonset.yaml
POLICY_KEY2=20-ulimit-adjuster
INJECTION2=NRI_FAULTY_ACTED_2=ulimit-adjuster
# node-problem-detector: the DaemonSet and config of contrib/kubernetes/npd
# (kubectl apply -k), its condition and check period (the shipped
# invoke_interval).
NPD_NS=kube-system
NPD_DS=nri-node-problem-detector
NPD_CONDITION=NRIPluginsNotReady
NPD_INTERVAL=$(jq -r '.pluginConfig.invoke_interval | rtrimstr("s")' "$NPD_DIR/nri-plugins-monitor.json" 2>/dev/null)
# The sysctls the kubelet (setupKernelTunables) and the CNI bridge plugin
# (isGateway) write; k8s_down restores each that changed.
K8S_SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
kernel.keys.root_maxbytes net.ipv4.ip_forward net.ipv6.conf.all.forwarding net.ipv4.conf.all.route_localnet"

export PATH=$K8S_BIN:$RUNTIME_BINDIR:/usr/local/go/bin:$PATH
command -v crictl >/dev/null || export PATH=$PATH:$(go env GOPATH 2>/dev/null)/bin

now() { echo "$EPOCHREALTIME"; }
# since T0: seconds from T0 to now, two decimals.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }
# ms A B: (B - A) in milliseconds, no decimals.
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) * 1000 }'; }
# rfc_epoch RFC3339: the timestamp as epoch seconds with fraction.
rfc_epoch() { date -d "$1" +%s.%N; }
log() { { echo "# $(date -u +%T.%3N) $*" >&3; } 2>/dev/null || echo "# $*" >&2; }

kc() { kubectl --kubeconfig "$KUBECONFIG" "$@"; }

# --- nodes: names and paths -------------------------------------------------

# nodes: the node numbers, 1..N.
nodes() { seq "$(wc -w <<<"$K8S_NODES")"; }
node_name() { echo "nrigate-$1"; }
node_rt() { awk -v n="$1" '{ print $n }' <<<"$K8S_NODES"; }
node_dir() { echo "$K8S_WORK/n$1"; }
node_ip() { echo "$NODE_IP_PREFIX$1"; }
# node_cri_sock_in N: the runtime's CRI socket as the node sees it (where
# it is on a real node); node_cri_sock N: the same socket from the host.
node_cri_sock_in() {
	case $(node_rt "$1") in
	crio) echo /var/run/crio/crio.sock ;;
	containerd) echo /run/containerd/containerd.sock ;;
	esac
}
node_cri_sock() { local p; p=$(node_cri_sock_in "$1"); echo "$(node_dir "$1")/run/${p#/*run/}"; }
# node_nri_dir N: the node's /var/run/nri from the host (the runtime's NRI
# socket and the plugin's control file).
node_nri_dir() { echo "$(node_dir "$1")/run/nri"; }
node_pod_logs() { echo "$(node_dir "$1")/log/pods"; }
node_cgroup_root() { echo "/$(basename "$K8S_WORK")-n$1"; }
node_ns_pid() { cat "$(node_dir "$1")/ns.pid"; }
# node_runtime_name N: "CRI-O" or "containerd".
node_runtime_name() { case $(node_rt "$1") in crio) echo CRI-O ;; containerd) echo containerd ;; esac; }

crictl_n() {
	local s
	s=$(node_cri_sock "$1")
	shift
	CRI_CONFIG_FILE=/dev/null crictl --runtime-endpoint "unix://$s" --image-endpoint "unix://$s" --timeout 30s "$@"
}
# in_ns N CMD...: run CMD in node N's mount namespace. (Daemons are
# started with nsenter itself in the background, not through this function:
# a function in the background is a subshell whose pid is not the daemon's.)
in_ns() { local p; p=$(node_ns_pid "$1"); shift; nsenter -t "$p" -m -- "$@"; }

# pin N: the pod spec fragment (JSON) that places a pod on node N.
pin() { jq -cn --arg n "$(node_name "$1")" '{nodeSelector: {"kubernetes.io/hostname": $n}}'; }

# record SCENARIO KEY VALUE [N]: one result for docs/kubernetes.md
# (hack/k8s-docs.sh); VALUE is stored as a string. With N, the result is
# node N's (its name and runtime are stored with it).
record() {
	mkdir -p "$K8S_RESULTS"
	local node="" rt=""
	if [[ -n ${4:-} ]]; then node=$(node_name "$4") rt=$(node_rt "$4"); fi
	jq -cn --arg s "$1" --arg k "$2" --arg v "$3" --arg n "$node" --arg rt "$rt" \
		'{scenario: $s, key: $k, value: $v} + (if $n == "" then {} else {node: $n, runtime: $rt} end)' >>"$K8S_RESULTS/k8s.jsonl"
}

# --- bring-up ---------------------------------------------------------------

k8s_check_prereqs() {
	local b n
	for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl etcd cfssl cfssljson; do
		[[ -x $K8S_BIN/$b ]] || { echo "$K8S_BIN/$b missing: run make k8s" >&2; return 1; }
	done
	for n in $(nodes); do
		case $(node_rt "$n") in
		crio) for b in crio pinns crio-copyimg; do [[ -x $RUNTIME_BINDIR/$b ]] || { echo "$RUNTIME_BINDIR/$b missing: run make crio" >&2; return 1; }; done ;;
		containerd) for b in containerd containerd-shim-runc-v2 ctr; do [[ -x $RUNTIME_BINDIR/$b ]] || { echo "$RUNTIME_BINDIR/$b missing: run make containerd" >&2; return 1; }; done ;;
		*) echo "K8S_NODES=$K8S_NODES: node $n's runtime $(node_rt "$n") is neither crio nor containerd" >&2; return 1 ;;
		esac
	done
	for b in crictl jq openssl unshare nsenter runc curl ss ip; do
		command -v "$b" >/dev/null || { echo "$b not found (make install-deps)" >&2; return 1; }
	done
	local p
	for p in 2379 "$API_PORT" 10248 10250 10257 10259; do
		[[ -z $(ss -Hltn "sport = :$p") ]] || { echo "port $p is in use: another cluster is running?" >&2; return 1; }
	done
	k8s_check_disk
}

# k8s_check_disk: the filesystem of the nodes' directories (under /tmp) has
# room for a run. Below 1 % free the kubelets evict every pod (evictionHard
# nodefs.available, imagefs.available), the plugins' first of all, and the
# cluster never comes up with its plugins; a run writes images, containers'
# layers and logs on top. K8S_MIN_FREE_GIB (default 4) and 2 % of the
# filesystem, whichever is more.
k8s_check_disk() {
	local avail size need
	read -r avail size < <(df -B1 --output=avail,size /tmp | tail -1) || { echo "df /tmp failed" >&2; return 1; }
	need=$((${K8S_MIN_FREE_GIB:-4} << 30))
	((size / 50 > need)) && need=$((size / 50))
	((avail >= need)) || {
		printf '/tmp has %d MiB free of %d GiB, under the %d MiB a cluster needs (the kubelets evict every pod below 1 %%): free some space first\n' \
			$((avail >> 20)) $((size >> 30)) $((need >> 20)) >&2
		return 1
	}
}

# npd_available: node-problem-detector was built (make k8s); otherwise
# build/k8s/npd-unavailable says why (test/k8s/build-npd.sh).
npd_available() { [[ -x $K8S_BIN/node-problem-detector ]]; }
npd_unavailable_reason() { cat "$K8S_BIN/../npd-unavailable" 2>/dev/null || echo "$K8S_BIN/node-problem-detector not built (make k8s)"; }

# k8s_up: the whole cluster; on failure what was started is stopped again
# by k8s_down (the caller's).
k8s_up() {
	k8s_check_prereqs || return
	k8s_reap_dead_runs
	K8S_WORK=$(mktemp -d /tmp/nk8s.XXXXXX)
	export K8S_WORK
	mkdir -p "$K8S_WORK"/{logs,sbin,images}
	echo "$$" >"$K8S_WORK/owner.pid"
	: >"$K8S_WORK/sysctl.saved"
	local s n
	for s in $K8S_SYSCTLS; do
		[[ -r /proc/sys/${s//.//} ]] && echo "$s $(cat "/proc/sys/${s//.//}")" >>"$K8S_WORK/sysctl.saved"
	done
	host_snapshot >"$K8S_WORK/host.before"
	log "work directory $K8S_WORK (nodes: $K8S_NODES)"
	stale_crio_cgroups_remove
	local t0
	t0=$(now)
	k8s_addresses && k8s_images && k8s_control_plane || return
	node_watch_start
	for n in $(nodes); do
		node_up "$n" || return
	done
	record setup nodes_up_seconds "$(since "$t0")"
	if npd_available; then
		npd_apply || return
	else
		log "node-problem-detector not deployed: $(npd_unavailable_reason)"
	fi
}

# k8s_reap_dead_runs: k8s_down for each work directory whose run is gone
# (its owner.pid not alive: a run killed before its teardown), so that
# its addresses, sysctls, mounts, bridges and cgroups do not become the
# next run's idea of the host as it was.
k8s_reap_dead_runs() {
	local d pid
	for d in /tmp/nk8s.*/; do
		d=${d%/}
		[[ -f $d/owner.pid ]] || continue
		pid=$(cat "$d/owner.pid")
		[[ $pid =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null || continue
		log "tearing down $d, left by a run that is gone (pid $pid)"
		(K8S_WORK=$d K8S_RESULTS=$d.reaped k8s_down) >/dev/null 2>&1 3>/dev/null
		rm -rf "$d" "$d.reaped"
	done
}

# stale_crio_cgroups_remove: remove the empty crio-<ID> cgroups at the
# roots of the host's hierarchies and under their /crio (CRI-O's parent for
# pods without one), what CRI-O instances that are gone left there. Of the
# CRI-O suites, checked one at a time (crio-nri-suite, test-bats-crio,
# contrib/cri-o/test), one left such a cgroup on every run:
# crio-restore.bats' "marker without the sandbox's config.json" (CRI-O
# cannot remove the cgroup of a sandbox it cannot restore: its parent was
# in the config.json), which now removes it itself (issue 37). This stays
# as a guard: a suite interrupted before its teardown, or another
# checkout's run on the same machine, still leaves them.
# Before it registers its node, a kubelet's cAdvisor asks the node's CRI-O
# about every such cgroup and spends about 3 s on each one that CRI-O does
# not know: eight of them kept a node from registering within a minute.
# Only empty ones (no process, no child): a live container's cgroup has its
# processes; removing a stopped container's is what runc does on delete.
stale_crio_cgroups_remove() {
	local d removed=0
	for d in /sys/fs/cgroup/*/crio-*/ /sys/fs/cgroup/crio-*/ /sys/fs/cgroup/*/crio/crio-*/ /sys/fs/cgroup/crio/crio-*/; do
		[[ -d $d && $(basename "$d") =~ ^crio-[0-9a-f]{64}$ ]] || continue
		[[ -s $d/cgroup.procs ]] && continue
		rmdir "$d" 2>/dev/null && removed=$((removed + 1))
	done
	((removed == 0)) || log "removed $removed empty crio-<ID> cgroups of the host (left by CRI-O instances that are gone)"
}

# k8s_addresses: the API server's and the nodes' addresses on lo (see the
# header); each that was not there is noted for k8s_down to remove.
k8s_addresses() {
	local a n
	for a in "$API_IP" $(for n in $(nodes); do node_ip "$n"; done); do
		if ! ip -o addr show dev lo | grep -qF " $a/32 "; then
			ip addr add "$a/32" dev lo || { echo "cannot add $a/32 to lo" >&2; return 1; }
			echo "$a" >>"$K8S_WORK/addresses.added"
		fi
	done
}

# node_up N: node N's mount namespace, runtime (the shipped drop-in),
# kubelet, then its pod network once the controller manager gave it a
# podCIDR.
node_up() {
	local n=$1
	mkdir -p "$(node_dir "$n")"/{run,lib,log,opt/nrigate/bin,kubelet,static-pods}
	node_ns_start "$n" && rt_start "$n" && kubelet_start "$n" && node_network "$n" && npd_install_check "$n"
}

# node_ns_start N: node N's mount namespace (see the header), held by a
# sleeping process whose pid is in nN/ns.pid.
node_ns_start() {
	local d pid i
	d=$(node_dir "$1")
	unshare -m --propagation private -- sh -c '
		set -e
		mount -t tmpfs -o size=4k,mode=0755 nrigate-no-hugepages /sys/kernel/mm/hugepages
		mount --bind "$1/run" /run
		mount --bind "$1/lib" /var/lib
		mount --bind "$1/log" /var/log
		mount --bind "$1/opt" /opt
		touch "$1/ns.ready"
		exec sleep 1000000' sh "$d" >"$K8S_WORK/logs/n$1-mountns.log" 2>&1 &
	pid=$!
	echo "$pid" >"$d/ns.pid"
	for i in $(seq 200); do
		[[ -f $d/ns.ready ]] && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.02
	done
	echo "node $1's mount namespace did not come up:" >&2
	cat "$K8S_WORK/logs/n$1-mountns.log" >&2
	return 1
}

# k8s_images: the busybox test image (hack/make-test-image.sh), the plugin
# images (test/k8s/make-image.sh: a static nri-faulty on the busybox
# layer, registering as device-injector, under two tags; the second plugin
# of the two-plugin variant) and node-problem-detector's (the binary of
# make k8s where upstream's image has it), as OCI archives.
k8s_images() {
	local d=$K8S_WORK/images mk=$REPO_ROOT/test/k8s/make-image.sh
	"$REPO_ROOT/hack/make-test-image.sh" "$d/busybox.tar" "$TEST_IMAGE_NAME" >/dev/null || return
	CGO_ENABLED=0 go build -trimpath -o "$d/nri-faulty" "$REPO_ROOT/contrib/plugins/nri-faulty" || return
	local t
	for t in "plugin.tar $PLUGIN_IMAGE" "plugin-next.tar $PLUGIN_IMAGE_NEXT"; do
		set -- $t
		"$mk" "$d/$1" "$2" "$d/busybox.tar" "$d/nri-faulty:/usr/bin/nri-faulty" -- \
			/usr/bin/nri-faulty --name "$DS_NAME" --control "/var/run/nri/$PLUGIN_CONTROL" >/dev/null || return
	done
	"$mk" "$d/plugin2.tar" "$PLUGIN2_IMAGE" "$d/busybox.tar" "$d/nri-faulty:/usr/bin/nri-faulty" -- \
		/usr/bin/nri-faulty --name "$DS2_NAME" --acted-env "${INJECTION2%%=*}" \
		--acted-annotation nri-faulty.nrigate.io/acted-2 >/dev/null || return
	if npd_available; then
		NPD_IMAGE=$NPD_IMAGE_NAME:$("$K8S_BIN/node-problem-detector" --version 2>/dev/null | awk '{ print $NF }')
		"$mk" "$d/npd.tar" "$NPD_IMAGE" "$d/busybox.tar" "$K8S_BIN/node-problem-detector:/node-problem-detector" >/dev/null || return
		echo "$NPD_IMAGE" >"$d/npd.name"
	fi
	go build -o "$K8S_WORK/cristatus" "$REPO_ROOT/test/k8s/cristatus" || return
	CGO_ENABLED=0 go build -trimpath -o "$d/nri-npd-check" "$REPO_ROOT/tools/nri-npd-check" || return
	TEST_IMAGE_ARCHIVE=$d/busybox.tar "$REPO_ROOT/contrib/containerd/containerd-test-images.sh" \
		"$d/containerd-images.tar" "$TEST_IMAGE_NAME" "$CONTAINERD_PAUSE_IMAGE" >/dev/null || return
}

# k8s_image_archives: "ARCHIVE NAME..." lines of the images every node
# gets (CRI-O's copyimg takes the names; containerd's archives carry them).
k8s_image_archives() {
	echo "plugin.tar $PLUGIN_IMAGE"
	echo "plugin-next.tar $PLUGIN_IMAGE_NEXT"
	echo "plugin2.tar $PLUGIN2_IMAGE"
	[[ -f $K8S_WORK/images/npd.tar ]] && echo "npd.tar $(cat "$K8S_WORK/images/npd.name")"
	return 0
}

# rt_config N POLICY [MORE_DROPINS...]: node N's runtime config with the
# policy drop-in (the shipped one of contrib/kubernetes, or a variant) and,
# after it, more drop-ins (the two-plugin variant's); the drop-ins of an
# earlier call are removed. The CNI config is the node's (node_cni_config).
# NRI_REQUEST_TIMEOUT (default 2s) is NRI's plugin request timeout.
rt_config() {
	local n=$1 policy=$2 out f d
	shift 2
	d=$(node_dir "$n")/$(node_rt "$n")
	local port=$((19190 + n))
	case $(node_rt "$n") in
	crio)
		rm -rf "$d/crio.conf.d"
		out=$(CRIO_BINDIR=$RUNTIME_BINDIR CRI_SOCK=$(node_cri_sock_in "$n") NRI_SOCK=/var/run/nri/nri.sock \
			PAUSE_IMAGE=$CRIO_PAUSE_IMAGE NRI_REQUEST_TIMEOUT=${NRI_REQUEST_TIMEOUT:-2s} CRIO_METRICS_PORT=$port \
			"$REPO_ROOT/contrib/cri-o/crio-test-config.sh" "$d" "$policy") || return
		echo "$out" >"$d/paths"
		# The node's pods use the node's own bridge (node_network); the one
		# crio-test-config.sh makes for its own conflist is not used here.
		ip link del "$(sed -n 's/^CRIO_CNI_BRIDGE=//p' <<<"$out")" 2>/dev/null || true
		for f in "$@"; do cp "$f" "$(sed -n 's/^CRIO_CONFIG_DIR=//p' <<<"$out")/"; done
		;;
	containerd)
		out=$(NRI_SOCK=/var/run/nri/nri.sock CNI_CONF_DIR=$d/cni PAUSE_IMAGE=$CONTAINERD_PAUSE_IMAGE \
			NRI_PLUGIN_REQUEST_TIMEOUT=${NRI_REQUEST_TIMEOUT:-2s} METRICS_ADDRESS=127.0.0.1:$port \
			"$REPO_ROOT/contrib/containerd/containerd-test-config.sh" "$d") || return
		echo "$out" >"$d/paths"
		f=$(sed -n 's/^CONFIG=//p' <<<"$out")
		# The CRI socket where a node has it; the line is checked to
		# be there once.
		[[ $(grep -c "^\s*address = \"$d/containerd.sock\"" "$f") == 1 ]] ||
			{ echo "rt_config: no single [grpc] address line in $f" >&2; return 1; }
		sed -i "s|^\(\s*address = \)\"$d/containerd.sock\"|\1\"$(node_cri_sock_in "$n")\"|" "$f"
		# The drop-in goes where `containerd config default` imports
		# drop-ins from (/etc/containerd/conf.d/*.toml), here a private
		# directory: the one line an operator's config.toml has too.
		rm -rf "$d/conf.d" && mkdir -p "$d/conf.d"
		cp "$policy" "$@" "$d/conf.d/"
		sed -i "1a imports = [\"$d/conf.d/*.toml\"]" "$f"
		;;
	esac
	node_cni_config "$n"
}

# node_cni_dir N: the directory node N's runtime reads its CNI config from.
node_cni_dir() { echo "$(node_dir "$1")/$(node_rt "$1")/cni"; }

# node_cni_config N: the node's own conflist in its runtime's CNI directory
# (written by node_network once the node has a podCIDR) and no other; until
# then none, and the runtime reports NetworkReady=false for CNI.
node_cni_config() {
	local dir f
	dir=$(node_cni_dir "$1")
	mkdir -p "$dir"
	for f in "$dir"/*.conflist "$dir"/*.conf; do
		[[ -e $f ]] && rm -f "$f"
	done
	if [[ -f $(node_dir "$1")/cni.conflist ]]; then
		cp "$(node_dir "$1")/cni.conflist" "$dir/.10-nrigate-k8s.tmp" && mv "$dir/.10-nrigate-k8s.tmp" "$dir/10-nrigate-k8s.conflist"
	fi
}

# node_bridge N: node N's CNI bridge (unique per work directory).
node_bridge() { echo "nk$(printf %s "$K8S_WORK" | md5sum | cut -c1-10)$1"; }

# node_network N: wait for node N's podCIDR (the controller manager's
# allocation), then write its conflist: a bridge of its own, host-local
# IPAM on that CIDR, the gateway on the bridge, no ipMasq.
node_network() {
	local n=$1 cidr
	kc wait --for=jsonpath='{.spec.podCIDR}' "node/$(node_name "$n")" --timeout=60s >/dev/null ||
		{ echo "node $(node_name "$n") got no podCIDR (kube-controller-manager --allocate-node-cidrs)" >&2; return 1; }
	cidr=$(kc get node "$(node_name "$n")" -o jsonpath='{.spec.podCIDR}')
	jq -n --arg br "$(node_bridge "$n")" --arg cidr "$cidr" --arg ipam "$(node_dir "$n")/cni-ipam" '{
		cniVersion: "1.0.0", name: "nrigate-k8s", plugins: [
			{type: "bridge", bridge: $br, isGateway: true, ipMasq: false,
			 ipam: {type: "host-local", ranges: [[{subnet: $cidr}]], dataDir: $ipam}},
			{type: "loopback"}]}' >"$(node_dir "$n")/cni.conflist"
	node_cni_config "$n"
	record setup pod_cidr "$cidr" "$n"
}

# rt_start N [POLICY_FILE [MORE_DROPINS...]]: configure (first time, or
# a new policy) and start node N's runtime in its mount namespace. Without
# arguments: the shipped drop-in alone; "none": no policy drop-in.
rt_start() {
	local n=$1 policy=${2:-} d pid
	if [[ -z $policy ]]; then
		policy=$(rt_dropin "$n")
	fi
	if [[ $policy == none ]]; then
		policy=$K8S_WORK/no-policy.conf
		: >"$policy"
	fi
	[[ -f $policy ]] || { echo "rt_start: policy file $policy not found" >&2; return 1; }
	rt_config "$n" "$policy" "${@:3}" || return
	d=$(node_dir "$n")/$(node_rt "$n")
	local logf=$K8S_WORK/logs/n$n-runtime.log
	case $(node_rt "$n") in
	crio)
		if [[ ! -f $d/imported ]]; then
			# copyimg writes CRI-O's store directly, before CRI-O starts.
			local img
			while read -r img; do
				set -- $img
				in_ns "$n" env CRIO_BINDIR="$RUNTIME_BINDIR" "$REPO_ROOT/contrib/cri-o/crio-import-image.sh" \
					"$d" "$K8S_WORK/images/$1" "${@:2}" >>"$K8S_WORK/logs/n$n-import.log" 2>&1 ||
					{ cat "$K8S_WORK/logs/n$n-import.log" >&2; return 1; }
			done < <(echo "busybox.tar $TEST_IMAGE_NAME $CRIO_PAUSE_IMAGE"; k8s_image_archives)
			touch "$d/imported"
		fi
		nsenter -t "$(node_ns_pid "$n")" -m -- "$RUNTIME_BINDIR/crio" \
			--config "$(sed -n 's/^CRIO_CONFIG=//p' "$d/paths")" --config-dir "$(sed -n 's/^CRIO_CONFIG_DIR=//p' "$d/paths")" \
			>>"$logf" 2>&1 &
		;;
	containerd)
		nsenter -t "$(node_ns_pid "$n")" -m -- env PATH="$RUNTIME_BINDIR:$PATH" "$RUNTIME_BINDIR/containerd" \
			--config "$(sed -n 's/^CONFIG=//p' "$d/paths")" >>"$logf" 2>&1 &
		;;
	esac
	pid=$!
	echo "$pid" >"$(node_dir "$n")/runtime.pid"
	local deadline=$((SECONDS + 30))
	until crictl_n "$n" info >/dev/null 2>&1; do
		kill -0 "$pid" 2>/dev/null || { echo "node $n's runtime exited:" >&2; tail -5 "$logf" >&2; return 1; }
		((SECONDS < deadline)) || { echo "node $n's runtime not up in 30s" >&2; return 1; }
		sleep 0.05
	done
	# The answer must have come from this instance.
	kill -0 "$pid" 2>/dev/null || { echo "node $n's runtime exited:" >&2; tail -5 "$logf" >&2; return 1; }
	if [[ $(node_rt "$n") == containerd && ! -f $d/imported ]]; then
		local a
		for a in containerd-images.tar $(k8s_image_archives | cut -d' ' -f1); do
			ctr --address "$(node_cri_sock "$n")" -n k8s.io images import "$K8S_WORK/images/$a" >>"$K8S_WORK/logs/n$n-import.log" 2>&1 ||
				{ cat "$K8S_WORK/logs/n$n-import.log" >&2; return 1; }
		done
		touch "$d/imported"
	fi
	# The CRI Status watchers: every change of NetworkReady and of
	# NRIPluginsReady, time-stamped, every CRISTATUS_INTERVAL (default
	# 2ms: the scenarios time the runtime's part to 100 ms; the soak,
	# which runs for half an hour on the same two cores, asks less often).
	"$K8S_WORK/cristatus" -endpoint "unix://$(node_cri_sock "$n")" -interval "${CRISTATUS_INTERVAL:-2ms}" \
		>>"$K8S_WORK/logs/n$n-networkready.log" 2>&1 &
	echo $! >"$(node_dir "$n")/cristatus.pid"
	"$K8S_WORK/cristatus" -endpoint "unix://$(node_cri_sock "$n")" -interval "${CRISTATUS_INTERVAL:-2ms}" -condition NRIPluginsReady \
		>>"$K8S_WORK/logs/n$n-nripluginsready.log" 2>&1 &
	echo $! >>"$(node_dir "$n")/cristatus.pid"
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

# rt_stop N: SIGTERM node N's runtime (containers keep running: conmon and
# the shims outlive it, as with a systemd restart) and wait for it to exit.
rt_stop() {
	cristatus_stop "$1"
	stop_pidfile "$(node_dir "$1")/runtime.pid" 200 || return 0
	! crictl_n "$1" info >/dev/null 2>&1 || { echo "rt_stop: node $1's CRI socket still answers" >&2; return 1; }
}

# rt_kill N: node N's runtime SIGKILLed, as a crash ends it (nothing of its
# own shutdown runs), and reaped if it is a child of this shell.
rt_kill() {
	local pid
	cristatus_stop "$1"
	pid=$(cat "$(node_dir "$1")/runtime.pid") || return
	kill -KILL "$pid" || { echo "rt_kill: no runtime process $pid on node $1" >&2; return 1; }
	wait "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null; do sleep 0.02; done
}

# rt_pid N: the pid of node N's runtime process (what rt_start started).
rt_pid() { cat "$(node_dir "$1")/runtime.pid"; }

# rt_reload N POLICY_FILE [MORE_DROPINS...]: node N's CRI-O drop-ins
# replaced as rt_config writes them (the policy as 10-policy.conf, the
# others by name) and CRI-O sent SIGHUP, as `systemctl reload crio` does;
# returns once CRI-O logged that it took the new required plugins (0) or
# kept the ones in force (1, its message on stderr). The drop-ins must
# change the required plugins: an unchanged set is not logged. containerd
# has no configuration reload.
rt_reload() {
	local n=$1 policy=$2 d dir logf lines pid deadline=$((SECONDS + 30)) l
	shift 2
	[[ $(node_rt "$n") == crio ]] || { echo "rt_reload: node $n runs $(node_rt "$n"), which has no configuration reload" >&2; return 1; }
	d=$(node_dir "$n")/crio
	dir=$(sed -n 's/^CRIO_CONFIG_DIR=//p' "$d/paths")
	[[ -d $dir ]] || { echo "rt_reload: no CRI-O config directory for node $n (rt_start first)" >&2; return 1; }
	rm -f "$dir"/*
	cp "$policy" "$dir/10-policy.conf" && { [[ $# == 0 ]] || cp "$@" "$dir/"; } || return
	logf=$K8S_WORK/logs/n$n-runtime.log
	lines=$(wc -l <"$logf")
	pid=$(rt_pid "$n") && kill -HUP "$pid" || { echo "rt_reload: node $n's runtime is not running" >&2; return 1; }
	while :; do
		l=$(tail -n +"$((lines + 1))" "$logf" | grep -m1 -E 'Set config crio\.nri\.required_plugins|Unable to reload the required NRI plugins')
		case $l in
		*"Set config"*) return 0 ;;
		?*) echo "rt_reload: node $n kept its required plugins: $l" >&2; return 1 ;;
		esac
		((SECONDS < deadline)) || { echo "rt_reload: node $n logged no reload of its required plugins in 30s" >&2; return 1; }
		sleep 0.1
	done
}

# rt_metrics N: node N's runtime's Prometheus metrics (its policy's counters,
# the Go runtime's go_goroutines...), as text.
rt_metrics() {
	case $(node_rt "$1") in
	crio) curl -sf --max-time 5 "http://127.0.0.1:$((19190 + $1))/metrics" ;;
	containerd) curl -sf --max-time 5 "http://127.0.0.1:$((19190 + $1))/v1/metrics" ;;
	esac
}

# cristatus_stop N: the CRI Status watchers rt_start started stopped.
cristatus_stop() {
	local pid f
	f=$(node_dir "$1")/cristatus.pid
	for pid in $(cat "$f" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
	rm -f "$f"
}

# k8s_control_plane: upstream's hack/local-up-cluster.sh from the
# k8s.io/kubernetes module with the binaries of make k8s, in daemon mode,
# every path private, the API server on the kubernetes Service's ClusterIP
# (see the header); no kubelet, kube-proxy, DNS or storage class. There is
# no sudo on these machines and we are root: a stand-in that runs its
# arguments is first on PATH; the script runs every control-plane command
# through CONTROLPLANE_SUDO, a wrapper that adds the two flags the script
# has no setting for: node CIDR allocation to kube-controller-manager's,
# kubelet address types (InternalIP first) to kube-apiserver's.
k8s_control_plane() {
	local src
	src=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | jq -r .Dir) || return
	[[ -f $src/hack/local-up-cluster.sh ]] || { echo "no hack/local-up-cluster.sh in $src" >&2; return 1; }
	printf '#!/bin/sh\n[ "$1" = -E ] && shift\nexec "$@"\n' >"$K8S_WORK/sbin/sudo"
	cat >"$K8S_WORK/sbin/controlplane-run" <<-EOF
		#!/bin/sh
		# local-up-cluster.sh's CONTROLPLANE_SUDO: runs its arguments;
		# kube-controller-manager also allocates each node a podCIDR, and
		# kube-apiserver reaches kubelets at their InternalIP first (as
		# kubeadm sets it: the nodes' names resolve nowhere).
		case \$(basename "\$1") in
		kube-controller-manager) exec "\$@" --allocate-node-cidrs=true --cluster-cidr=$CLUSTER_CIDR --node-cidr-mask-size=24 ;;
		kube-apiserver) exec "\$@" --kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname ;;
		esac
		exec "\$@"
	EOF
	chmod +x "$K8S_WORK/sbin/sudo" "$K8S_WORK/sbin/controlplane-run"
	CERT_DIR=$K8S_WORK/certs
	KUBECONFIG=$CERT_DIR/admin.kubeconfig
	export CERT_DIR KUBECONFIG
	local t0
	t0=$(now)
	if ! env PATH="$K8S_WORK/sbin:$PATH" GO_OUT="$K8S_BIN" START_MODE=nokubelet,nokubeproxy ENABLE_DAEMON=true \
		CONTROLPLANE_SUDO="$K8S_WORK/sbin/controlplane-run" \
		API_BIND_ADDR=$API_IP API_HOST=$API_IP API_HOST_IP=$API_IP API_SECURE_PORT=$API_PORT \
		SERVICE_CLUSTER_IP_RANGE=$SERVICE_CIDR FIRST_SERVICE_CLUSTER_IP=$API_IP CLUSTER_CIDR=$CLUSTER_CIDR \
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

# kubelet_start N: node N's kubelet in its mount namespace, with a client
# certificate system:node:NAME signed by the script's client CA, listening
# on the node's address.
kubelet_start() {
	local n=$1 d name ip
	d=$(node_dir "$n")/kubelet
	name=$(node_name "$n") ip=$(node_ip "$n")
	if [[ ! -f $d/kubelet.kubeconfig ]]; then
		openssl req -new -newkey rsa:2048 -nodes -keyout "$d/client.key" -subj "/O=system:nodes/CN=system:node:$name" \
			-out "$d/client.csr" 2>/dev/null &&
			openssl x509 -req -in "$d/client.csr" -CA "$CERT_DIR/client-ca.crt" -CAkey "$CERT_DIR/client-ca.key" \
				-CAcreateserial -days 2 -out "$d/client.crt" 2>/dev/null || return
		kubectl config --kubeconfig "$d/kubelet.kubeconfig" set-cluster local --server="https://$API_IP:$API_PORT" \
			--certificate-authority="$CERT_DIR/server-ca.crt" >/dev/null
		kubectl config --kubeconfig "$d/kubelet.kubeconfig" set-credentials kubelet \
			--client-certificate="$d/client.crt" --client-key="$d/client.key" >/dev/null
		kubectl config --kubeconfig "$d/kubelet.kubeconfig" set-context local --cluster=local --user=kubelet >/dev/null
		kubectl config --kubeconfig "$d/kubelet.kubeconfig" use-context local >/dev/null
		# The kubelet's serving certificate, for the node's name and
		# address, signed by the CA the API server checks kubelets
		# against (local-up-cluster.sh: --kubelet-certificate-authority
		# is its client CA), so that kubectl logs and exec work.
		openssl req -new -newkey rsa:2048 -nodes -keyout "$d/serving.key" -subj "/CN=$name" -out "$d/serving.csr" 2>/dev/null &&
			openssl x509 -req -in "$d/serving.csr" -CA "$CERT_DIR/client-ca.crt" -CAkey "$CERT_DIR/client-ca.key" \
				-CAcreateserial -days 2 -out "$d/serving.crt" \
				-extfile <(printf 'subjectAltName = DNS:%s, IP:%s\nextendedKeyUsage = serverAuth\n' "$name" "$ip") 2>/dev/null || return
	fi
	# A cgroup root of our own in every hierarchy: the pods' cgroups go
	# under it and k8s_down removes it.
	local cg h
	cg=$(node_cgroup_root "$n")
	for h in /sys/fs/cgroup/*/; do
		[[ -e $h/cgroup.procs ]] && mkdir -p "$h${cg#/}"
	done
	cat >"$d/config.yaml" <<-YAML
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		address: $ip
		port: 10250
		readOnlyPort: 0
		healthzBindAddress: $ip
		healthzPort: 10248
		authentication:
		  anonymous: {enabled: false}
		  webhook: {enabled: true}
		  x509: {clientCAFile: "$CERT_DIR/client-ca.crt"}
		authorization: {mode: Webhook}
		tlsCertFile: "$d/serving.crt"
		tlsPrivateKeyFile: "$d/serving.key"
		containerRuntimeEndpoint: "unix://$(node_cri_sock_in "$n")"
		cgroupDriver: cgroupfs
		cgroupRoot: "$cg"
		failCgroupV1: false
		failSwapOn: false
		makeIPTablesUtilChains: false
		staticPodPath: "$(node_dir "$n")/static-pods"
		volumePluginDir: "$d/volume-plugins"
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
		resolvConf: /etc/resolv.conf
	YAML
	nsenter -t "$(node_ns_pid "$n")" -m -- "$K8S_BIN/kubelet" --config "$d/config.yaml" --kubeconfig "$d/kubelet.kubeconfig" \
		--hostname-override "$name" --node-ip "$ip" --root-dir "$d/root" --cert-dir "$d/pki" --v=2 \
		>>"$K8S_WORK/logs/n$n-kubelet.log" 2>&1 &
	echo $! >"$(node_dir "$n")/kubelet.pid"
	# Before it registers the node, the kubelet's cAdvisor looks at every
	# cgroup on the host, and its CRI-O handler spends about 3 s on each
	# crio-ID cgroup that the node's CRI-O does not know (it retries): on a
	# machine where other CRI-O instances left such cgroups, a minute was
	# not enough (eight of them at the host's root and the node's own
	# after a restart).
	kc wait --for=create "node/$name" --timeout="${K8S_REGISTER_TIMEOUT:-180s}" >/dev/null || {
		echo "node $name not registered:" >&2
		tail -20 "$K8S_WORK/logs/n$n-kubelet.log" >&2
		return 1
	}
}

# kubelet_stop N: SIGTERM node N's kubelet, as systemd stops it, and wait
# for it to exit (the pods' containers keep running).
kubelet_stop() {
	stop_pidfile "$(node_dir "$1")/kubelet.pid" 200 || return 0
	! curl -sf "http://$(node_ip "$1"):10248/healthz" >/dev/null 2>&1 ||
		{ echo "kubelet_stop: node $1's kubelet still answers" >&2; return 1; }
}

# pods_kill N: what a reboot does to node N's pods: SIGKILL to every
# process in the pods' cgroups (under the kubelet's cgroupRoot: the
# containers, and CRI-O's conmon, which runs in the pod's cgroup), until
# none is left. Prints how many processes it killed.
pods_kill() {
	local h pids n=0 round p cg
	cg=$(node_cgroup_root "$1")
	for round in $(seq 100); do
		pids=$(for h in /sys/fs/cgroup/*/; do
			[[ -d $h${cg#/} ]] && find "$h${cg#/}" -name cgroup.procs -exec cat {} + 2>/dev/null
		done | sort -u)
		[[ -n $pids ]] || { echo "$n"; return 0; }
		for p in $pids; do kill -KILL "$p" 2>/dev/null && n=$((n + 1)); done
		sleep 0.05
	done
	echo "pods_kill: processes left in $cg" >&2
	return 1
}

# --- node-problem-detector ---------------------------------------------------

# npd_install_check N: the check node-problem-detector runs, where the
# shipped DaemonSet mounts it from (/opt/nrigate/bin on the node), as the
# operator installs it (docs/kubernetes.md).
npd_install_check() {
	install -m 0755 "$K8S_WORK/images/nri-npd-check" "$(node_dir "$1")/opt/nrigate/bin/nri-npd-check"
}

# npd_manifest: contrib/kubernetes/npd as kubectl apply -k renders it, with
# NPD's image replaced by the one k8s_images built from make k8s's binary
# (a kustomize images: entry, as an operator points NPD at a mirror) and
# priorityClassName: system-node-critical dropped (the kubelet would set
# oom_score_adj -997, which runc cannot apply on these VMs: no
# CAP_SYS_RESOURCE in the bounding set; keep it on a real node). Both
# changes are checked: the rendered manifest differs from the shipped one
# in exactly those two lines.
npd_manifest() {
	local o=$K8S_WORK/npd-overlay img shipped out
	img=$(cat "$K8S_WORK/images/npd.name") || return
	mkdir -p "$o"
	# kustomize takes a base by a relative path only.
	cat >"$o/kustomization.yaml" <<-EOF
		apiVersion: kustomize.config.k8s.io/v1beta1
		kind: Kustomization
		resources:
		  - $(realpath --relative-to="$o" "$NPD_DIR")
		images:
		  - name: $NPD_IMAGE_UPSTREAM
		    newName: ${img%:*}
		    newTag: ${img##*:}
		patches:
		  - target: {kind: DaemonSet, name: $NPD_DS}
		    patch: '[{"op": "remove", "path": "/spec/template/spec/priorityClassName"}]'
	EOF
	shipped=$(kc kustomize "$NPD_DIR") || return
	out=$(kc kustomize "$o") || return
	local n
	n=$(diff <(echo "$shipped") <(echo "$out") | grep -c '^<')
	[[ $n == 2 ]] || { echo "npd_manifest: expected 2 changed lines in contrib/kubernetes/npd, got $n" >&2; return 1; }
	echo "$out" >"$o/rendered.yaml"
	echo "$o/rendered.yaml"
}

# npd_apply: node-problem-detector's DaemonSet applied (npd_manifest) and
# its pod running on every node, each having put the condition on its Node.
npd_apply() {
	local f n
	f=$(npd_manifest) || return
	kc apply -f "$f" >/dev/null || return
	for n in $(nodes); do
		npd_wait "$n" || return
	done
	record setup npd "node-problem-detector $(npd_version) (the DaemonSet of contrib/kubernetes/npd)"
	record setup npd_interval_seconds "$NPD_INTERVAL"
}

npd_version() { "$K8S_BIN/node-problem-detector" --version 2>/dev/null | awk '{ print $NF }'; }

# npd_wait N: NPD's pod on node N Running and the condition on node N (the
# initial status, or the first check's).
npd_wait() {
	local name
	name=$(node_name "$1")
	kc -n "$NPD_NS" wait --for=create pod -l app.kubernetes.io/name="$NPD_DS" --timeout=60s >/dev/null 2>&1
	wait_until 120 "[[ -n \$(npd_pod $1) ]]" || { echo "no NPD pod on $name" >&2; return 1; }
	kc wait --for=jsonpath="{.status.conditions[?(@.type==\"$NPD_CONDITION\")].type}"="$NPD_CONDITION" "node/$name" \
		--timeout=120s >/dev/null || {
		echo "node-problem-detector did not set $NPD_CONDITION on $name:" >&2
		kc -n "$NPD_NS" logs "$(npd_pod "$1")" --tail=20 >&2
		return 1
	}
}

# npd_pod N: the name of NPD's pod on node N.
npd_pod() { ds_pod "$1" "$NPD_DS" "$NPD_NS"; }

# npd_pid N: the host pid of node N's node-problem-detector process.
npd_pid() { container_pid "$1" node-problem-detector; }

# wait_until SECONDS CONDITION: evaluate the shell CONDITION every 0.2 s
# until it holds (0) or SECONDS passed (1). For states that have no watch.
wait_until() {
	local deadline=$((SECONDS + $1))
	until eval "$2"; do
		((SECONDS < deadline)) || return 1
		sleep 0.2
	done
}

# node_watch_start: a watch of every Node (kubectl get -w) that appends, for
# every update, the receive time (epoch), the node's name and its Ready and
# NPD conditions to K8S_WORK/logs/node-conditions.jsonl, for node_cond_first
# and node_cond_count. Restarted if the API server ends the watch.
node_watch_start() {
	(
		while :; do
			kubectl --kubeconfig "$KUBECONFIG" get nodes -w -o json 2>/dev/null |
				jq --unbuffered -c --arg c "$NPD_CONDITION" '{t: now, node: .metadata.name, c: [.status.conditions[]? |
					select(.type == "Ready" or .type == $c) | {type, status, reason, message, lastTransitionTime}]}'
			sleep 0.2
		done
	) >>"$K8S_WORK/logs/node-conditions.jsonl" 2>/dev/null &
	echo $! >"$K8S_WORK/node-watch.pid"
}

# node_cond_first N TYPE STATUS AFTER [SECONDS]: the receive time (epoch) of
# the first update of node N at or after AFTER (epoch) in which condition
# TYPE has STATUS, waiting up to SECONDS (default 120) for the watch to
# bring it.
node_cond_first() {
	local deadline=$((SECONDS + ${5:-120})) t name
	name=$(node_name "$1")
	while :; do
		t=$(jq -r --arg n "$name" --arg ty "$2" --arg st "$3" --argjson a "$4" \
			'select(.node == $n and .t >= $a and any(.c[]; .type == $ty and .status == $st)) | .t' \
			"$K8S_WORK/logs/node-conditions.jsonl" 2>/dev/null | head -1)
		[[ -n $t ]] && { echo "$t"; return 0; }
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

# node_cond_count N TYPE STATUS FROM TO: how many updates of node N
# received between FROM and TO (epochs) had condition TYPE with STATUS.
node_cond_count() {
	jq -s --arg n "$(node_name "$1")" --arg ty "$2" --arg st "$3" --argjson a "$4" --argjson b "$5" \
		'[.[] | select(.node == $n and .t >= $a and .t <= $b and any(.c[]; .type == $ty and .status == $st))] | length' \
		"$K8S_WORK/logs/node-conditions.jsonl"
}

# node_wait_condition N TYPE STATUS [TIMEOUT]: node N's condition TYPE is
# (or becomes, through a watch) STATUS.
node_wait_condition() {
	kc wait --for=jsonpath="{.status.conditions[?(@.type==\"$2\")].status}"="$3" "node/$(node_name "$1")" \
		--timeout="${4:-60s}" >/dev/null
}

# node_condition N TYPE FIELD: a field (status, reason, message,
# lastTransitionTime) of node N's condition TYPE.
node_condition() {
	kc get node "$(node_name "$1")" -o json | jq -r --arg t "$2" --arg f "$3" '.status.conditions[] | select(.type == $t) | .[$f]'
}

# nodes_nri_columns: every node's Ready and NRIPluginsNotReady conditions,
# as an operator lists them with kubectl's custom columns.
nodes_nri_columns() {
	kc get nodes -o 'custom-columns=NAME:.metadata.name,RUNTIME:.status.nodeInfo.containerRuntimeVersion,READY:.status.conditions[?(@.type=="Ready")].status,NRI-PLUGINS-NOT-READY:.status.conditions[?(@.type=="NRIPluginsNotReady")].status,MESSAGE:.status.conditions[?(@.type=="NRIPluginsNotReady")].message'
}

# describe_node_conditions N: the Conditions section of kubectl describe
# node, as an operator reads it.
describe_node_conditions() {
	kc describe node "$(node_name "$1")" | sed -n '/^Conditions:/,/^Addresses:/p' | sed '$d'
}

# node_events N REASON_REGEX: the events about node N whose reason
# matches, as "TYPE REASON: MESSAGE" lines, oldest first.
node_events() {
	kc get events -A -o json --field-selector "involvedObject.kind=Node,involvedObject.name=$(node_name "$1")" |
		jq -r --arg re "$2" '.items | sort_by(.lastTimestamp // .eventTime) | .[] | select(.reason | test($re)) |
			"\(.type) \(.reason): \(.message)"'
}

# --- tear-down --------------------------------------------------------------

# k8s_down: stop everything k8s_up started (by its pid files and by the
# work directory in a command line), remove the pods' containers, cgroups,
# the CNI bridges, the addresses, restore the sysctls; keep the logs in
# K8S_RESULTS.
k8s_down() {
	[[ -n ${K8S_WORK:-} && -d $K8S_WORK ]] || return 0
	local pid n c
	for n in $(nodes); do
		pid=$(cat "$(node_dir "$n")/kubelet.pid" 2>/dev/null) && kill -TERM "$pid" 2>/dev/null
	done
	pid=$(cat "$K8S_WORK/node-watch.pid" 2>/dev/null) && kill "$pid" 2>/dev/null || true
	for n in $(nodes); do
		if [[ -S $(node_cri_sock "$n") ]] && crictl_n "$n" info >/dev/null 2>&1; then
			for c in $(crictl_n "$n" ps -q 2>/dev/null); do crictl_n "$n" stop -t 0 "$c" >/dev/null 2>&1; done
			crictl_n "$n" rmp -fa >/dev/null 2>&1
		fi
		rt_stop "$n"
	done
	# Control plane, etcd, conmon, shims, cristatus, the namespace
	# holders: every process whose command line names the work directory.
	local round
	for round in TERM KILL; do
		for pid in $(grep -lsF "$K8S_WORK" /proc/[0-9]*/cmdline | cut -d/ -f3); do
			[[ $pid != "$$" && $pid != "$BASHPID" ]] && kill "-$round" "$pid" 2>/dev/null
		done
		[[ $round == TERM ]] && sleep 1
	done
	for n in $(nodes); do
		pid=$(cat "$(node_dir "$n")/ns.pid" 2>/dev/null) && kill -KILL "$pid" 2>/dev/null
		local r=$(node_dir "$n")/$(node_rt "$n")/runc
		[[ -d $r ]] || continue
		for c in $(runc --root "$r" list -q 2>/dev/null); do
			runc --root "$r" kill "$c" KILL 2>/dev/null
			runc --root "$r" delete --force "$c" 2>/dev/null
		done
	done
	awk -v d="$K8S_WORK/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null
	done
	local h cg
	for n in $(nodes); do
		ip link delete "$(node_bridge "$n")" 2>/dev/null
		cg=$(node_cgroup_root "$n")
		for h in /sys/fs/cgroup/*/; do
			[[ -d $h${cg#/} ]] && find "$h${cg#/}" -depth -type d -exec rmdir {} + 2>/dev/null
		done
	done
	local a
	for a in $(cat "$K8S_WORK/addresses.added" 2>/dev/null); do
		ip addr del "$a/32" dev lo 2>/dev/null
	done
	k8s_restore_sysctls
	# NPD's DaemonSet mounts both runtimes' drop-in directories
	# (DirectoryOrCreate), which live under the host's /etc here: the
	# kubelet made the ones that were not there, empty.
	local p
	for p in /etc/crio/crio.conf.d /etc/containerd/conf.d; do
		grep -qx "exists: $p" "$K8S_WORK/host.before" 2>/dev/null || rmdir "$p" 2>/dev/null
		grep -qx "exists: ${p%/*}" "$K8S_WORK/host.before" 2>/dev/null || rmdir "${p%/*}" 2>/dev/null
	done
	# Nothing of the host's iptables rules or /etc/cni may have changed.
	if [[ -f $K8S_WORK/host.before ]]; then
		if host_snapshot | diff "$K8S_WORK/host.before" - >"$K8S_WORK/logs/host.diff"; then
			log "host iptables rules, /etc/cni, lo's addresses and the kubelet's fixed paths unchanged"
			record teardown host_unchanged yes
		else
			record teardown host_unchanged "NO: $(head -5 "$K8S_WORK/logs/host.diff")"
			log "host iptables rules, /etc/cni, lo's addresses or the kubelet's fixed paths changed (see logs/host.diff):"
			head -20 "$K8S_WORK/logs/host.diff" >&2
		fi
	fi
	mkdir -p "$K8S_RESULTS/logs"
	cp -r "$K8S_WORK/logs/." "$K8S_RESULTS/logs/" 2>/dev/null
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

# host_snapshot: the host's iptables rules (without counters), what is
# under /etc/cni, lo's addresses and whether the paths a kubelet would
# write outside its --root-dir exist, to compare before and after.
host_snapshot() {
	local p
	for p in /var/lib/kubelet /var/log/pods /var/log/containers /opt/nrigate \
		/etc/crio /etc/crio/crio.conf.d /etc/containerd /etc/containerd/conf.d; do
		[[ -e $p ]] && echo "exists: $p"
	done
	local t
	for t in iptables-save ip6tables-save; do
		command -v "$t" >/dev/null && "$t" 2>/dev/null | grep -v '^#' | sed 's/\[[0-9]*:[0-9]*\]//'
	done
	command -v nft >/dev/null && nft list ruleset 2>/dev/null
	find /etc/cni -printf '%p %s %T@\n' 2>/dev/null | sort
	ip -o addr show dev lo | awk '{ print $3, $4 }'
}

# --- the plugin's DaemonSet ---------------------------------------------------

# ds_manifest [FILE [IMAGE]]: contrib/kubernetes/device-injector-daemonset.yaml
# (or the two-plugin variant's) as the test applies it. Two substitutions,
# each checked to hit exactly one line:
#  - the image: the plugin image this test builds (nri-faulty registering
#    as device-injector) instead of upstream's sample;
#  - priorityClassName: system-node-critical is dropped: the kubelet then
#    sets oom_score_adj -997, which runc cannot apply on these VMs (no
#    CAP_SYS_RESOURCE in the bounding set). Keep it on a real node.
# The hostPath of the NRI socket directory stays /var/run/nri: on each
# node it is that node's (the header).
ds_manifest() {
	local src=${1:-$DAEMONSET_MANIFEST} img=${2:-$PLUGIN_IMAGE} n f
	f=$K8S_WORK/$(basename "$src")
	sed -e "s|^\(\s*image:\s*\).*$|\1$img|" \
		-e '/^\s*priorityClassName:\s*system-node-critical\s*$/d' "$src" >"$f"
	n=$(diff "$src" "$f" | grep -c '^<')
	[[ $n == 2 ]] || { echo "ds_manifest: expected 2 substituted lines in $src, got $n" >&2; return 1; }
	echo "$f"
}

# ds_apply [NAME [IMAGE]]: the DaemonSet NAME (DS_NAME, default, or
# DS2_NAME, the two-plugin variant's) applied, with IMAGE (default: the
# plugin image of that DaemonSet).
ds_apply() {
	local f
	case ${1:-$DS_NAME} in
	"$DS_NAME") f=$(ds_manifest "$DAEMONSET_MANIFEST" "${2:-$PLUGIN_IMAGE}") ;;
	"$DS2_NAME") f=$(ds_manifest "$DS2_MANIFEST" "${2:-$PLUGIN2_IMAGE}") ;;
	esac || return
	kc apply -f "$f" >/dev/null
}

# ds_delete [NAME]: the DaemonSet gone and its pods with it (the plugin
# absent on every node).
ds_delete() {
	local ds=${1:-$DS_NAME}
	kc -n "$DS_NS" delete ds "$ds" --ignore-not-found --wait=true >/dev/null || return
	kc -n "$DS_NS" wait --for=delete pod -l app.kubernetes.io/name="$ds" --timeout=60s >/dev/null 2>&1 || true
}

# ds_pod N [NAME [NAMESPACE]]: the name of the DaemonSet's pod on node N
# (not being deleted).
ds_pod() {
	kc -n "${3:-$DS_NS}" get pods -l app.kubernetes.io/name="${2:-$DS_NAME}" --field-selector "spec.nodeName=$(node_name "$1")" -o json |
		jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name][0] // empty'
}

# ds_wait_ready [TIMEOUT [NAME]]: the DaemonSet's pod Ready on every node.
ds_wait_ready() {
	local n
	for n in $(nodes); do
		ds_wait_ready_on "$n" "${1:-180s}" "${2:-$DS_NAME}" || return
	done
}

# ds_wait_ready_on N [TIMEOUT [NAME]]: the DaemonSet's pod on node N Ready.
ds_wait_ready_on() {
	local p
	wait_until 120 "p=\$(ds_pod $1 ${3:-$DS_NAME}) && [[ -n \$p ]]" ||
		{ echo "no pod of DaemonSet ${3:-$DS_NAME} on $(node_name "$1")" >&2; return 1; }
	kc -n "$DS_NS" wait --for=condition=Ready "pod/$p" --timeout="${2:-180s}" >/dev/null
}

# plugin_ready_times N [NAME]: the "ready <RFC3339>" lines the plugin of
# DaemonSet NAME on node N prints on stdout after each Synchronize, from its
# containers' logs (all restarts; the kubelet's log directories are
# NAMESPACE_POD_UID, and a DaemonSet's pods are named NAME-xxxxx).
plugin_ready_times() {
	cat "$(node_pod_logs "$1")"/${DS_NS}_${2:-$DS_NAME}-*/plugin/*.log 2>/dev/null |
		awk '$2 == "stdout" && $4 == "ready" { print $5 }' | sort
}

# container_pid N NAME: the host pid of the running container NAME on node N.
container_pid() {
	local id
	id=$(crictl_n "$1" ps -q --name "^$2\$" --state running | head -1)
	[[ -n $id ]] || return 1
	crictl_n "$1" inspect -o go-template --template '{{.info.pid}}' "$id"
}

# plugin_pid N: the host pid of node N's running plugin process.
plugin_pid() { container_pid "$1" plugin; }

# plugin_ready_after N EPOCH [SECONDS [NAME]]: the first "ready" time the
# plugin on node N (of DaemonSet NAME, default DS_NAME) printed after EPOCH
# (RFC 3339), waiting for it to appear in the container's log (the pod
# turns Ready when the container starts, before the plugin has registered
# and synchronized).
plugin_ready_after() {
	local after deadline=$((SECONDS + ${3:-120})) t
	after=$(date -u -d "@$2" +%Y-%m-%dT%H:%M:%S.%NZ)
	while :; do
		t=$(plugin_ready_times "$1" "${4:-$DS_NAME}" | awk -v t="$after" '$1 > t' | head -1)
		[[ -n $t ]] && { echo "$t"; return 0; }
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

# plugin_log_after N EPOCH REGEX [SECONDS]: the first line the plugin on
# node N logged (stderr of its containers, all restarts) after EPOCH that
# matches the extended REGEX, waiting up to SECONDS (default 60). The line
# is the plugin's own, from its timestamp on (UTC, fixed width, so that it
# compares as a string; the kubelet's log prefix is dropped).
plugin_log_after() {
	local after deadline=$((SECONDS + ${4:-60})) l
	after=$(date -u -d "@$2" +%Y-%m-%dT%H:%M:%S.%NZ)
	while :; do
		l=$(cat "$(node_pod_logs "$1")"/${DS_NS}_${DS_NAME}-*/plugin/*.log 2>/dev/null |
			awk -v t="$after" '$2 == "stderr" && $4 > t { sub(/^[^ ]+ [^ ]+ [^ ]+ /, ""); print }' |
			sort | grep -E -m1 -- "$3")
		[[ -n $l ]] && { echo "$l"; return 0; }
		((SECONDS < deadline)) || return 1
		sleep 0.2
	done
}

# plugin_fault N MODE [ARG]: the fault the plugin on node N injects from
# its next request on ("hang 10m"; "ok": none), as nri-faulty's control
# file says it.
plugin_fault() { local n=$1; shift; echo "$*" >"$(node_nri_dir "$n")/$PLUGIN_CONTROL"; }

# plugin_cut N: the plugin down on node N alone, while its DaemonSet stays
# as it is: an empty tmpfs over the node's /var/run/nri hides the runtime's
# NRI socket from new containers, and the plugin's pod is deleted; the
# DaemonSet's new pod cannot connect and restarts with back-off
# (CrashLoopBackOff), as a plugin does on a node whose runtime does not
# offer NRI where it looks. The runtime then reports the plugin gone
# (cristatus). plugin_uncut N undoes it: the tmpfs unmounted, the
# crash-looping pod deleted, so that the DaemonSet's next one starts at
# once.
plugin_cut() {
	local n=$1 p t0
	t0=$(now)
	in_ns "$n" mount -t tmpfs -o size=4k,mode=0755 nrigate-nri-cut /var/run/nri || return
	p=$(ds_pod "$n")
	[[ -z $p ]] || kc -n "$DS_NS" delete pod "$p" --wait=true >/dev/null || return
	cristatus_first "$n" nripluginsready.log NRIPluginsReady=false "$t0" >/dev/null
}

plugin_uncut() {
	local n=$1 p
	in_ns "$n" umount /var/run/nri || return
	p=$(ds_pod "$n")
	[[ -z $p ]] || kc -n "$DS_NS" delete pod "$p" --wait=false >/dev/null
}

# --- node state ---------------------------------------------------------------

node_ready() { kc get node "$(node_name "$1")" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'; }
node_wait_ready() { kc wait --for=condition=Ready "node/$(node_name "$1")" --timeout="${2:-120s}" >/dev/null; }
node_wait_notready() {
	kc wait --for=jsonpath='{.status.conditions[?(@.type=="Ready")].status}'=False "node/$(node_name "$1")" \
		--timeout="${2:-60s}" >/dev/null
}
node_ready_message() { kc get node "$(node_name "$1")" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}'; }
# node_taints N: node N's taints as "KEY:EFFECT" words, or "none".
node_taints() {
	local t
	t=$(kc get node "$(node_name "$1")" -o jsonpath='{range .spec.taints[*]}{.key}:{.effect} {end}')
	t=${t% }
	echo "${t:-none}"
}

# cristatus_first N LOG STATE EPOCH: the first time (epoch) node N's
# cristatus log (networkready.log, nripluginsready.log) recorded STATE
# ("NetworkReady=true", "NRIPluginsReady=false") at or after EPOCH, waiting
# up to 60 s for it.
cristatus_first() {
	local line t deadline=$((SECONDS + 60))
	while :; do
		while read -r line; do
			[[ $line == *" $3 "* ]] || continue
			t=$(rfc_epoch "${line%% *}")
			awk -v a="$t" -v b="$4" 'BEGIN { exit !(a >= b) }' && { echo "$t"; return 0; }
		done <"$K8S_WORK/logs/n$1-$2"
		((SECONDS < deadline)) || return 1
		sleep 0.05
	done
}

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

# pods_per_node NS SELECTOR: "NAME COUNT" lines, one per node with matching
# pods (not being deleted), for where a scheduler put them.
pods_per_node() {
	kc -n "$1" get pods -l "$2" -o json |
		jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .spec.nodeName // "(none)"] | group_by(.) | .[] | "\(.[0]) \(length)"'
}

# node_of NAME: the number of the node named NAME.
node_of() { echo "${1##*-}"; }

# injection_counts NS SELECTOR [INJECTION]: for every container of every
# matching pod, its environment through crictl exec on the pod's node.
# Prints one "N PODS MISSING" line per node that has matching pods, where
# MISSING counts containers without the plugin's injection; lists them on
# stderr.
injection_counts() {
	local ns=$1 sel=$2 inj=${3:-$INJECTION} node id pod
	declare -A pods=() missing=()
	while read -r pod node id; do
		[[ -n $id && $node != null ]] || continue
		node=$(node_of "$node")
		pods[$node]=$((${pods[$node]:-0} + 1))
		if ! crictl_n "$node" exec "${id#*://}" env 2>/dev/null | grep -qx "$inj"; then
			missing[$node]=$((${missing[$node]:-0} + 1))
			echo "container of $ns/$pod ($id) on $(node_name "$node") without $inj" >&2
		fi
	done < <(kc -n "$ns" get pods -l "$sel" -o json |
		jq -r '.items[] | .metadata.name as $p | .spec.nodeName as $n | .status.containerStatuses[]? | "\($p) \($n) \(.containerID // "")"')
	for node in $(nodes); do
		[[ -n ${pods[$node]:-} ]] && echo "$node ${pods[$node]} ${missing[$node]:-0}"
	done
	return 0
}

# check_injection NS SELECTOR [INJECTION]: injection_counts summed over
# the nodes: "PODS MISSING".
check_injection() { injection_counts "$@" | awk '{ p += $2; m += $3 } END { print p + 0, m + 0 }'; }

# nri_events NS: the kubelet's events in NS whose message carries the
# policy's refusal (REFUSAL_RE), as JSON lines {reason, count, message}.
nri_events() {
	kc -n "$1" get events -o json |
		jq -c --arg re "${2:-$REFUSAL_RE}" '.items[] | select(.message | test($re)) | {reason, count: (.count // 1), message}'
}
# refusals NS: how many refusals the kubelet reported (events x count).
refusals() { nri_events "$1" | jq -s 'map(.count) | add // 0'; }

# netnotready_events NS: how many times the kubelet held a pod back because
# the runtime's network was not ready.
netnotready_events() {
	kc -n "$1" get events -o json | jq '[.items[] | select(.reason == "NetworkNotReady") | (.count // 1)] | add // 0'
}

# record_outcome SCENARIO NS SELECTOR: record the pods SELECTOR matches in
# NS and how many lack the injection, per node (also set, summed, as PODS
# and MISSING), the refusal and NetworkNotReady events and the first
# refusal event.
record_outcome() {
	local s=$1 ns=$2 n p m ev
	PODS=0 MISSING=0
	while read -r n p m; do
		record "$s" pods "$p" "$n"
		record "$s" missing "$m" "$n"
		PODS=$((PODS + p)) MISSING=$((MISSING + m))
	done < <(injection_counts "$ns" "$3")
	record "$s" pods "$PODS"
	record "$s" missing "$MISSING"
	record "$s" refusals "$(refusals "$ns")"
	record "$s" netnotready "$(netnotready_events "$ns")"
	ev=$(nri_events "$ns" | head -1)
	[[ -z $ev ]] || record "$s" refusal_event "$(jq -r '"\(.reason): \(.message)"' <<<"$ev")"
}

# metric N EVENT OUTCOME: node N's runtime's policy decision counter for
# our key.
metric() {
	local url name
	case $(node_rt "$1") in
	crio) url=http://127.0.0.1:$((19190 + $1))/metrics name=container_runtime_crio_nri_required_plugin_decisions_total ;;
	containerd) url=http://127.0.0.1:$((19190 + $1))/v1/metrics name=containerd_nri_required_plugin_decisions_total ;;
	esac
	curl -sf "$url" | awk -v ev="$2" -v oc="$3" -v k="$POLICY_KEY" -v name="$name" '
		index($0, name "{") == 1 && index($0, "event=\"" ev "\"") && index($0, "outcome=\"" oc "\"") &&
		index($0, "plugin=\"" k "\"") { s += $NF } END { print s + 0 }'
}
# metric_lines N OUTCOME: node N's decision counter lines with OUTCOME.
metric_lines() {
	local url
	case $(node_rt "$1") in
	crio) url=http://127.0.0.1:$((19190 + $1))/metrics ;;
	containerd) url=http://127.0.0.1:$((19190 + $1))/v1/metrics ;;
	esac
	curl -sf "$url" | grep '_nri_required_plugin_decisions_total{' | grep "outcome=\"$2\""
}
# decisions N: node N's "allowed refused ignored" summed over events, for
# deltas.
decisions() {
	local o v
	for o in allowed refused ignored; do
		v=$(($(metric "$1" RunPodSandbox "$o") + $(metric "$1" CreateContainer "$o")))
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

# rt_dropin N: the shipped policy drop-in of node N's runtime.
rt_dropin() {
	case $(node_rt "$1") in crio) echo "$CRIO_DROPIN" ;; containerd) echo "$CONTAINERD_DROPIN" ;; esac
}

# rt_dropin2 N: the two-plugin variant's second drop-in for node N's runtime.
rt_dropin2() {
	case $(node_rt "$1") in
	crio) echo "$TWO_PLUGINS/crio.conf.d/21-ulimit-adjuster.conf" ;;
	containerd) echo "$TWO_PLUGINS/containerd.conf.d/21-ulimit-adjuster.toml" ;;
	esac
}

# dropin_variant N NAME KEY=VALUE...: node N's shipped drop-in with each
# KEY's value replaced (KEY = "x" lines, in either runtime's spelling),
# written to K8S_WORK/NAME-<file>; each KEY must be on exactly one line.
# Prints the file's path.
dropin_variant() {
	local src out kv k n
	src=$(rt_dropin "$1")
	out=$K8S_WORK/$2-$(basename "$src")
	shift 2
	cp "$src" "$out"
	for kv in "$@"; do
		k=${kv%%=*}
		n=$(grep -c "^\s*$k\s*=" "$src")
		[[ $n == 1 ]] || { echo "dropin_variant: $k is on $n lines of $src, want 1" >&2; return 1; }
		sed -i "s|^\(\s*$k\s*=\s*\).*$|\1${kv#*=}|" "$out"
	done
	echo "$out"
}

# sandboxes N NS: node N's pod sandboxes of namespace NS, "ID STATE" a line
# (crictl pods); fails if crictl does.
sandboxes() {
	local out
	out=$(crictl_n "$1" pods --namespace "$2" -o json) || return
	jq -r '.items[] | "\(.id) \(.state)"' <<<"$out"
}

# unrelayed_restore_re N SANDBOX_ID: what node N's runtime logs, as an
# extended regex, when it restarts with the sandbox whose RunPodSandbox
# relay had not completed when it stopped: both stop it and report it
# NotReady (the runtimes' recovery convention, docs/design.md).
unrelayed_restore_re() {
	case $(node_rt "$1") in
	crio) echo "Restoring sandbox $2 of pod [^ ]+ as not ready: CRI-O stopped before its creation completed" ;;
	containerd) echo "NRI plugins did not act on the sandbox before containerd stopped.* sandbox=$2" ;;
	esac
}

# ready_sandbox N POD_UID: the ID of the pod's READY sandbox on node N.
ready_sandbox() {
	crictl_n "$1" pods --label "io.kubernetes.pod.uid=$2" --state ready -q --no-trunc
}
