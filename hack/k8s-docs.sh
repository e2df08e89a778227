#!/usr/bin/env bash
# hack/k8s-docs.sh (make k8s-docs): write docs/kubernetes.md from the
# records of the last `make test-k8s` (test/k8s/k8s.bats writes one JSON line
# per measured value to $K8S_RESULTS/k8s.jsonl, node-scoped values with the
# node's name and runtime, and hack/test-summary.sh keeps the TAP stream in
# $TESTLOGS/k8s.tap). The prose is here; the outcomes, counts, times and the
# text an operator sees come from the run. The operator's sections (what to
# install and why) are static text first; the generated section follows
# "## What the end-to-end test shows".
#
#   K8S_RESULTS   the records (default bin/test-logs/k8s)
#   TESTLOGS      the TAP stream (default bin/test-logs)
#   K8S_WALL      how long make test-k8s took, printed after "make test-k8s
#                 took " (optional; measured outside the test)
#   K8S_COLD      a sentence on the cold `make k8s` build time to print
#                 (optional; measured outside the test)
#   K8S_OUT       the file to write (default docs/kubernetes.md)
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO_ROOT"
RES=${K8S_RESULTS:-bin/test-logs/k8s}
LOGS=${TESTLOGS:-bin/test-logs}
OUT=${K8S_OUT:-docs/kubernetes.md}
[[ -f $RES/k8s.jsonl ]] || { echo "$0: no records in $RES/k8s.jsonl (run make test-k8s)" >&2; exit 1; }
# The nodes of the run, "NAME RUNTIME" in order.
NODES=$(jq -rs '[.[] | select(.node != null) | {node, runtime}] | unique_by(.node) | sort_by(.node) | .[] | "\(.node) \(.runtime)"' "$RES/k8s.jsonl")
[[ -n $NODES ]] || { echo "$0: no node records in $RES/k8s.jsonl" >&2; exit 1; }
node_names() { awk '{ print $1 }' <<<"$NODES"; }

# v SCENARIO KEY [NODE]: the recorded value (the last one), of NODE
# (nrigate-N) or cluster-wide, or "–".
v() {
	local x
	x=$(jq -rs --arg s "$1" --arg k "$2" --arg n "${3:-}" \
		'[.[] | select(.scenario == $s and .key == $k and (.node // "") == $n)] | last | .value // empty' "$RES/k8s.jsonl")
	[[ -n $x ]] && printf '%s' "$x" || printf '–'
}
# unknown_version_note: a word on containerd's version string when the records
# come from a build that did not link the release version (before
# contrib/containerd/build.sh set version.Version as containerd's Makefile
# does): such a module build reports 2.4.2+unknown.
unknown_version_note() {
	v bootstrap get_nodes_ready | grep -q '+unknown' || return 0
	echo "(containerd's version string is the one a module build of v2.4.2 reports: \`+unknown\` where a"
	echo "release build's ldflags would name the commit.)"
}
# verdict PREFIX: the TAP verdict of the test whose name starts with PREFIX.
verdict() {
	local line
	line=$(awk -v t="$1" '/^(not )?ok [0-9]+ / { s = $0; sub(/^(not )?ok [0-9]+ /, "", s); if (index(s, t) == 1) { print; exit } }' \
		"$LOGS/k8s.tap" 2>/dev/null)
	case $line in
	"") echo "not run" ;;
	*"# skip"*) echo "skip" ;;
	"not ok"*) echo "FAIL" ;;
	*) echo "pass" ;;
	esac
}
# rtname RUNTIME: how the docs name it.
rtname() { case $1 in crio) echo "CRI-O v1.36.3 (patched)" ;; containerd) echo "containerd v2.4.2 (patched)" ;; *) echo "$1" ;; esac; }
# header: a table header with one column per node.
header() {
	local line="| $1 |" sep="|---|" n rt
	while read -r n rt; do line+=" \`$n\`: $(rtname "$rt") |"; sep+="---|"; done <<<"$NODES"
	echo "$line"
	echo "$sep"
}
# row LABEL FUNCTION: a table row, FUNCTION NODE for each node's cell.
row() {
	local line="| $1 |" n
	for n in $(node_names); do line+=" $($2 "$n") |"; done
	echo "$line"
}
# perline TEXT: "NAME COUNT" lines as "NAME: COUNT, NAME: COUNT".
perline() { awk 'NF { printf "%s%s: %s", (n++ ? ", " : ""), $1, $2 }' <<<"$1"; }
# desc TEXT: a kubelet event's message from the runtime's refusal on
# ("rpc error: code = FailedPrecondition desc = " dropped).
desc() { sed 's/.*FailedPrecondition desc = //' <<<"$1"; }
# block SCENARIO KEY [NODE]: a recorded text as a code block.
block() {
	echo '```'
	v "$@"
	echo
	echo '```'
}

{
	cat <<'EOF'
# Deploying a required NRI plugin on Kubernetes

Files a node operator installs, all in [`contrib/kubernetes/`](../contrib/kubernetes/):

| file | what | where it goes |
|---|---|---|
| [`device-injector-daemonset.yaml`](../contrib/kubernetes/device-injector-daemonset.yaml) | the plugin's DaemonSet (namespace `nri-plugins`) | `kubectl apply -f` |
| [`crio.conf.d/20-device-injector.conf`](../contrib/kubernetes/crio.conf.d/20-device-injector.conf) | the policy for patched CRI-O | `/etc/crio/crio.conf.d/`, then restart CRI-O or `systemctl reload crio` (SIGHUP reloads the policy; a bad file keeps the old one) |
| [`containerd.conf.d/20-device-injector.toml`](../contrib/kubernetes/containerd.conf.d/20-device-injector.toml) | the same policy for patched containerd | `/etc/containerd/conf.d/` (imported by the `imports` line of `containerd config default`), then restart containerd (it has no config reload) |
| [`npd/`](../contrib/kubernetes/npd/): [`node-problem-detector.yaml`](../contrib/kubernetes/npd/node-problem-detector.yaml), [`nri-plugins-monitor.json`](../contrib/kubernetes/npd/nri-plugins-monitor.json), [`kustomization.yaml`](../contrib/kubernetes/npd/kustomization.yaml) | node-problem-detector v1.34.0 as one DaemonSet for CRI-O and containerd nodes, its custom plugin monitor config (the Node condition `NRIPluginsNotReady`, the event `NRIPluginWentDown`) as a ConfigMap; or NPD's systemd mode with the same config (below) | `kubectl apply -k contrib/kubernetes/npd` |
| [`tools/nri-npd-check`](../tools/nri-npd-check/main.go) | the check NPD runs: asks the runtime's CRI `Status` | on each node: `CGO_ENABLED=0 go build -o /opt/nrigate/bin/nri-npd-check ./tools/nri-npd-check` |
| [`two-plugins/`](../contrib/kubernetes/two-plugins/) | variant: a second required plugin (`20-ulimit-adjuster`), its drop-ins and DaemonSet, installed next to the files above | as the first |

The semantics are in [design.md](design.md); both runtimes decode the same keys.

## The DaemonSet and the drop-in belong together

A plugin required for every pod cannot be required for its own pod (it would wait for
itself). The two files break the cycle with settings that must agree:

| DaemonSet | drop-in | why |
|---|---|---|
| namespace `nri-plugins`, pod label `app.kubernetes.io/name: device-injector` | `[[crio.nri.required_plugins."10-device-injector".exempt]]` with `namespace = "nri-plugins"` and `match_labels = { "app.kubernetes.io/name" = "device-injector" }` | the plugin's own pod is never gated on the plugin; the label counts only in `nri-plugins`, so a pod elsewhere wearing it is gated (shown below) |
| `hostNetwork: true` | `readiness = "network"` | while the plugin is not ready the runtime holds `NetworkReady=false`; the kubelet then reports the node NotReady and starts only hostNetwork pods, which includes the plugin's |
| `tolerations: [{operator: Exists}]` | | the pod is placed on a node carrying the `node.kubernetes.io/not-ready` taint |
| | `exclude_namespaces = ["kube-system"]` | CNI and other node-critical pods in kube-system start without the plugin |
| `args: ["-idx", "10", ...]` | key `10-device-injector` | the index in the key must match the plugin's; the bare name (`device-injector`) accepts any index |

Static pods (`kubernetes.io/config.source` other than `api`) are exempt by default
(`exempt_static_pods = true`); the kubelet overwrites that annotation on API pods, so an API
pod cannot claim it (shown below).

Exemptions are the operator's, never the pod author's. A pod's author sets its labels and
annotations, not its namespace, so NRI's policy binds every label or annotation exemption to a
namespace: the DaemonSet's pod is exempt because it runs in `nri-plugins` **and** wears the
label; the same label on a pod in `default` changes nothing (shown below). An exemption without
a `namespace`, or with a pattern that matches every namespace (`"*"`), is a configuration error
that stops the runtime naming the key. What remains the operator's job is who may create pods
in `nri-plugins` (RBAC, admission policy): whoever can, can exempt a pod. The exemption in both
spellings (the same keys, decoded by NRI's one config type):

```toml
# CRI-O (crio.conf.d/20-device-injector.conf)
[[crio.nri.required_plugins."10-device-injector".exempt]]
namespace = "nri-plugins"
match_labels = { "app.kubernetes.io/name" = "device-injector" }

# containerd (containerd.conf.d/20-device-injector.toml)
[[plugins."io.containerd.nri.v1.nri".required_plugins."10-device-injector".exempt]]
  namespace = "nri-plugins"
  match_labels = { "app.kubernetes.io/name" = "device-injector" }
```

`priorityClassName: system-node-critical` stays in the shipped DaemonSet: a required plugin
should be the last pod evicted from a node. (The test removes it: see below.)

## The plugins' readiness on the Node: node-problem-detector

The runtime reports its required plugins in the CRI `Status` (`crictl info`: the condition
`NRIPluginsReady` and the `nri` entry), but the kubelet copies only `RuntimeReady` and
`NetworkReady` onto the Node (kubernetes/kubernetes#123148); so with `readiness = "condition"`
nothing in `kubectl get node` or `kubectl describe node` says that a required plugin is down.
node-problem-detector (NPD) puts it there: its custom plugin monitor runs a check program
every `invoke_interval` and sets a Node condition from its exit code (0 False, 1 True, other
Unknown) and its first output line (the message, cut at `max_output_length`).

The check is [`nri-npd-check`](../tools/nri-npd-check/main.go) (Go, no shell, the same program
for both runtimes): `nri-npd-check --runtime-endpoint unix:///var/run/crio/crio.sock` (as crictl
takes it) calls the runtime's CRI `Status` with `verbose`, reads `NRIPluginsReady` and decodes the
`nri` entry. The shipped config names both runtimes' sockets,
`unix:///var/run/crio/crio.sock,unix:///run/containerd/containerd.sock`, and the check asks the first
whose socket exists, as crictl picks one of its default endpoints: a node runs one runtime, so one
config and one DaemonSet serve CRI-O and containerd nodes alike (a node that has both sockets
needs its own runtime's alone in the config):

| the runtime | exit | Node condition `NRIPluginsNotReady` |
|---|---|---|
| a required plugin not ready | 1 | `True`, reason `NRIPluginsNotReady`, message naming each such plugin and its state as the `nri` entry has it: `20-ulimit-adjuster not registered, 10-device-injector disconnected` (cut at 80 bytes, NPD's default, with `+N more`) |
| every required plugin ready | 0 | `False`, reason `NRIPluginsReady`, the config's default message ("every NRI plugin the runtime requires is ready, or none is required") |
| no `NRIPluginsReady` condition while a drop-in of `--drop-ins` has a `required_plugins` table: an unpatched runtime, or one not reading that file | 1 | `True`, `runtime ignores the required NRI plugins of FILE` |
| no `NRIPluginsReady` condition, and no such drop-in: no plugin required | 0 | the same `False` (the check itself says "no NRI plugin is required by the runtime"; NPD does not copy an OK check's output onto the Node) |
| no socket: the runtime not running, or elsewhere | 2 | `Unknown`, `no runtime socket: /var/run/crio/crio.sock, /run/containerd/containerd.sock` (with one endpoint configured: `runtime socket missing: PATH`) |
| no answer within `--timeout` (default 3 s; keep it below the rule's `timeout`) | 2 | `Unknown`, `runtime did not answer within 3s: PATH` |
| the socket refuses, or `Status` fails | 2 | `Unknown`, `runtime not answering: PATH` |
| the `nri` entry missing or not the expected JSON | 2 | `Unknown`, `runtime's verbose nri status malformed` (the decoding error on stderr, which NPD logs) |

NPD takes a rule's reason from its config, not from the check, so the reason is always
`NRIPluginsNotReady` when True; with `Unknown`, NPD shows the default reason (`NRIPluginsReady`)
and the check's message, which says what failed. The config sets
`enable_message_change_based_condition_update`, so the message follows when a second plugin goes
down while the first still is. A second, temporary rule runs `nri-npd-check --mode went-down
--state-file F`, which exits 1 once when a plugin that was ready at its previous run is not any
more: NPD makes that a `Warning` event `NRIPluginWentDown` on the Node ("went down:
10-device-injector disconnected"), next to the events NPD makes for the condition's changes.

How it runs on a node:

- **DaemonSet** ([`npd/`](../contrib/kubernetes/npd/), `kubectl apply -k contrib/kubernetes/npd`):
  NPD's image `registry.k8s.io/node-problem-detector/node-problem-detector:v1.34.0` in `kube-system`
  (which the shipped policy excludes, so it is not gated on the plugin it watches), `hostNetwork`
  (it must start while a `readiness = "network"` plugin holds the node NotReady), bound to the
  built-in role `system:node-problem-detector` (get nodes, patch `nodes/status`, events) as NPD's
  own deployment is. The config is a ConfigMap generated from `nri-plugins-monitor.json`
  (`kustomization.yaml`; its name carries a hash of the content, so a changed config rolls the
  DaemonSet). From the node it mounts the check's directory `/opt/nrigate/bin` and both runtimes'
  socket *directories*, `/var/run/crio` and `/run/containerd`, read-only (a mounted socket file would
  not follow a restarted runtime's new socket; a read-only mount still lets the check connect), and
  both runtimes' drop-in directories, `/etc/crio/crio.conf.d` and `/etc/containerd/conf.d`, read-only
  for the check's `--drop-ins` (a drop-in requiring plugins on a runtime that reports no
  `NRIPluginsReady` is reported: that runtime ignores it). All five are `DirectoryOrCreate`: a missing
  directory never holds the pod in `ContainerCreating`. On a
  node without the check NPD exits at start, logging `rule path "/opt/nrigate/bin/nri-npd-check" does
  not exist`, and restarts with back-off until the check is installed. To pull NPD from a mirror,
  add an `images:` entry to the kustomization (the test does exactly that). An NPD you already run
  needs only the config added to its `--config.custom-plugin-monitor` list and the five mounts.
- **systemd**: NPD's binary with the same config file, ordered after the runtime:

  ```ini
  [Unit]
  After=crio.service
  [Service]
  ExecStart=/usr/local/bin/node-problem-detector --logtostderr --hostname-override=%H \
      --config.custom-plugin-monitor=/etc/nrigate/npd/nri-plugins-monitor.json \
      --apiserver-override=https://API:6443?inClusterConfig=false&auth=/etc/nrigate/npd/kubeconfig
  Restart=always
  ```

  The kubeconfig needs the same rights as the DaemonSet's service account; the node's own
  credentials (`system:node:NAME`) have them for their own Node.

To keep pods off a node while the condition is True, the node-readiness-controller of KEP-5233
taints and untaints on Node conditions; a rule for this condition would read as follows (the taint
key is the operator's choice; nrigate sets no taint):

```yaml
apiVersion: readiness.node.x-k8s.io/v1alpha1
kind: NodeReadinessRule
metadata:
  name: nri-plugins-ready
spec:
  conditions:
    - type: NRIPluginsNotReady
      requiredStatus: "False"
  taint:
    key: readiness.k8s.io/example.com/nri-plugins-not-ready   # your key
    effect: NoSchedule
  enforcementMode: continuous
```

A `NoSchedule` taint keeps new pods off and evicts nothing: with `readiness = "condition"` this
shows a plugin outage on the Node, and steers the scheduler, without the eviction after
`tolerationSeconds` that `readiness = "network"` brings on a multi-node cluster (below).

## Two required plugins

[`two-plugins/`](../contrib/kubernetes/two-plugins/) adds `20-ulimit-adjuster` (index 20,
`readiness = "condition"`) next to `10-device-injector`: install its drop-in beside the first one
(both runtimes merge their drop-ins table by table) and apply its DaemonSet. The two plugins' own
pods must never wait on each other, or after a node restart neither would start: the second
plugin's exemption covers both DaemonSets' pods (`app.kubernetes.io/name in (device-injector,
ulimit-adjuster)` in `nri-plugins`), while the first plugin's shipped exemption covers only its own
pod, so ulimit-adjuster's pod waits for device-injector: an order, not a cycle. With one of them
down, pods are refused naming the missing one and the Node condition names it alone (shown below).

EOF
	# The rollout order and the rollback: docs/kubernetes-rollout.md, a
	# section of its own that docs/install.md links too.
	echo
	cat docs/kubernetes-rollout.md
	cat <<'EOF'

## What the end-to-end test shows
EOF
	N1=$(node_names | sed -n 1p)
	N2=$(node_names | sed -n 2p)
	when=$(date -u -r "$RES/k8s.jsonl" +'%Y-%m-%d %H:%M UTC')
	cat <<EOF

GENERATED by \`make k8s-docs\` (hack/k8s-docs.sh) from the records of \`make test-k8s\`
($when); do not edit this section by hand.

\`make test-k8s\` (test/k8s/k8s.bats) builds Kubernetes v1.37.2 and node-problem-detector
$(v setup npd | awk '{ print $2 }') from source (\`make k8s\`) and runs **one cluster of two nodes on one machine**: \`$N1\`
on patched CRI-O, \`$N2\` on patched containerd. The control plane is upstream's own
\`hack/local-up-cluster.sh\` (from the k8s.io/kubernetes module: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler; no kube-proxy, no cluster DNS); each node is a kubelet
of ours pointed at its runtime. The plugin is \`nri-faulty\` (contrib/plugins/nri-faulty) in an OCI
image built without docker, registering as \`device-injector\` with the DaemonSet's own args; it
puts \`NRI_FAULTY_ACTED=device-injector\` into every container it acts on, read back with
\`crictl exec\` on the pod's node. The test applies **the files above**: the one plugin DaemonSet for
both nodes, each runtime's drop-in, and node-problem-detector with \`kubectl apply -k\`, changing
only what this machine forces, each change checked to hit exactly the lines named: the images (the
plugin's, and NPD's built from the same v1.34.0 binary, through a kustomize \`images:\` entry) and
\`priorityClassName: system-node-critical\` removed from both DaemonSets (the kubelet would set
\`oom_score_adj\` -997, which runc cannot apply on these VMs: no \`CAP_SYS_RESOURCE\`). Scenarios
that may change the policy run variants of the shipped drop-in with named keys replaced. Every
outcome is asserted through the API server (\`kubectl get -o json\`, \`kubectl wait\`, watches),
never by sleeping; a scenario about one node runs on both at once (pods pinned with
\`nodeSelector\`), one assertion per node.

### Two nodes on one machine

A node is a runtime, a kubelet and the node-local paths the DaemonSets mount. One DaemonSet must
find **each node's own** NRI socket at its \`hostPath\` (\`/var/run/nri\`), and NPD's one DaemonSet
its node's runtime socket and check. Ways to get there on one machine:

- substitute the \`hostPath\` per node: one DaemonSet has one pod template, so this needs one
  DaemonSet per node, which is not what an operator installs;
- the runtimes on distinct NRI socket paths with \`/var/run/nri\` a symlink: one host path cannot
  point at two sockets;
- nodes as containers (kind) or VMs: nested runtimes need a container engine with cgroup
  delegation, or a hypervisor, neither of which these machines have;
- **a private mount namespace per node**, which is what the test does: each node's runtime and
  kubelet run in a mount namespace of their own (\`unshare -m\`, held by a sleeping process) in which
  the node's own directories are bind-mounted over \`/run\`, \`/var/lib\`, \`/var/log\` and \`/opt\`. That is the
  filesystem half of a kind node: every path of the shipped files resolves to the node's own
  (\`/var/run/nri/nri.sock\`, \`/var/run/crio/crio.sock\` on node 1, \`/run/containerd/containerd.sock\`
  on node 2, \`/opt/nrigate/bin/nri-npd-check\`, \`/var/log/pods\`), both runtimes listen where they do
  on a real node, and nothing in the DaemonSets is changed for it. The containers of a node inherit
  its namespace, so a \`hostPath\` mount is resolved on the node's side. It also keeps apart
  what a kubelet or runtime puts at a fixed path: two kubelets on one \`/var/lib\` would take the
  device plugin socket \`/var/lib/kubelet/device-plugins/kubelet.sock\` from each other (its path
  does not follow \`--root-dir\`), and CNI caches its results under \`/var/lib/cni\`. Every mount
  vanishes with the namespace.

What the two nodes still share, and how the test keeps them apart:

| shared | kept apart by |
|---|---|
| the network namespace (hostNetwork pods of both nodes, the kubelets' ports) | an address per node on \`lo\` (\`198.51.100.N/32\`, reachable from this machine only): each kubelet listens on its own address, on the standard ports 10250 and 10248, and is the node's \`InternalIP\`, so \`kubectl logs\` and \`exec\` work. The plugin and NPD listen on no port. Without addresses (the kubelet refuses 127.0.0.1), two nodes would need distinct kubelet ports and the API server could reach neither kubelet |
| the pod network | a \`/24\` per node allocated by the controller manager (\`--allocate-node-cidrs\`, cluster CIDR \`10.244.0.0/16\`; \`local-up-cluster.sh\` has no setting for it, so its \`CONTROLPLANE_SUDO\` wrapper adds the flags), and per node a CNI bridge of its own with host-local IPAM on that CIDR, written once the node has its \`podCIDR\`, as a CNI daemon does |
| the API server's address for in-cluster clients | no kube-proxy (it would write iptables rules): the API server listens on the \`kubernetes\` Service's ClusterIP itself, \`10.96.0.1:443\` on \`lo\`, which NPD's pods reach as they would through kube-proxy |
| cgroups | a \`cgroupRoot\` per kubelet (\`/<work dir>-nN\`) |
| the kernel, sysctls, \`/etc\` | private state directories per runtime and kubelet (\`--root-dir\`), the rest of the node's files in its own \`/run\`, \`/var/lib\`, \`/var/log\`, \`/opt\`; the sysctls the kubelet and the bridge plugin change are written back at the end |
| capacity | each node reports the whole machine (2 CPUs), so both nodes together admit twice what it has |
| mount propagation | each node's namespace is private: a pod asking for \`HostToContainer\` or \`Bidirectional\` propagation shares mounts with its node only (none of the test's pods does) |

EOF
	header "the nodes"
	c_cidr() { echo "\`$(v setup pod_cidr "$1")\`"; }
	row "pod CIDR (the controller manager's allocation)" c_cidr
	cat <<EOF

\`kubectl get nodes -o wide\` once the plugin runs on both (bootstrap scenario):

\`\`\`
\$ kubectl get nodes -o wide
$(v bootstrap get_nodes_ready)

\$ kubectl -n s-bootstrap exec deploy/web-2 -- env | grep NRI_FAULTY_ACTED
$(v bootstrap kubectl_exec)
\`\`\`

$(unknown_version_note)

Where the bootstrap scenario's pods landed (each Deployment pinned to its node with \`nodeSelector\`):

\`\`\`
$(v bootstrap pods_wide)
\`\`\`

### Scenarios on both nodes at once

EOF
	header "scenario"
	c_boot() { echo "**$(verdict bootstrap)**: NotReady with the runtime's message until the plugin registered; $(v bootstrap pending_before_plugin) pods (both nodes) Pending meanwhile; $(v bootstrap pods "$1") pods, **$(v bootstrap missing "$1") without the injection**"; }
	c_crash() { echo "**$(verdict crash)**: plugin back $(v crash plugin_back_seconds "$1") s after SIGKILL; $(v crash pods "$1") pods, **$(v crash missing "$1") without the injection**"; }
	c_restart() { echo "**$(verdict "runtime restart")**: plugin synchronized again $(v runtime-restart plugin_back_seconds "$1") s after the stop; $(v runtime-restart pods "$1") pods, **$(v runtime-restart missing "$1") without the injection**; running containers lost (both nodes): $(v runtime-restart containers_lost)"; }
	c_relay() { echo "**$(verdict "runtime crash in the relay")**: SIGKILLed $(v relay-crash hang_to_kill_ms "$1") ms after the plugin began holding the RunPodSandbox of \`$(v relay-crash held "$1" | sed -n 's/.* pod=\([^ ]*\).*/\1/p')\`; sandboxes right after the restart: $(v relay-crash sandboxes_after_restart "$1") (none may be READY); $(v relay-crash pods "$1") pods, **$(v relay-crash missing "$1") without the injection**; running without a RunPodSandbox the plugin acted on (both nodes): **$(v relay-crash running_without_relay)**"; }
	c_static() { echo "**$(verdict "static pods")**: static pod Running with the plugin absent; API pod with \`kubernetes.io/config.source: file\` refused (below), then $(v static pods "$1") ran, $(v static missing "$1") without the injection"; }
	c_label() { echo "**$(verdict "forged exemption label")**: \`$(v forged-label outcome "$1")\`; then $(v forged-label pods "$1") ran, $(v forged-label missing "$1") without the injection"; }
	c_reboot() { echo "**$(verdict "node restart")**: $(v node-restart processes_killed "$1") pod processes killed; plugin registered $(v node-restart kubelet_start_to_plugin_ready_ms "$1") ms after the kubelet's start; $(v node-restart pods "$1") containers restarted, **$(v node-restart missing "$1") without the injection**; \`NRIPluginsNotReady\` False $(v node-restart registration_to_false_ms "$1") ms after registration"; }
	c_two() { echo "**$(verdict "two required plugins")**: \`20-ulimit-adjuster\` down: condition \`$(v two-plugins node_message "$1")\`, pods refused naming it, node Ready; back: $(v two-plugins pods "$1") pods, $(v two-plugins missing "$1") without the first plugin's injection"; }
	c_ignore() { echo "**$(verdict ignore)**: $(v ignore pods "$1") pods Running with the plugin down ($(v ignore without_plugin "$1") without it, by design); the runtime counted $(v ignore ignored_metric "$1") ignored requests"; }
	row "node bootstrap (\`readiness = \"network\"\`, \`fail\`), 3 pods per node" c_boot
	row "plugin SIGKILLed during a scale-up to 5 per node" c_crash
	row "runtime restarted (SIGTERM) with pods running, then scale 3 → 6 per node" c_restart
	row "runtime SIGKILLed while the plugin holds a RunPodSandbox" c_relay
	row "static pod and forged \`config.source\` annotation" c_static
	row "forged exemption label in \`default\`" c_label
	row "node restart (runtime and kubelet stopped, pods killed, started in systemd's order)" c_reboot
	row "two required plugins, the second down" c_two
	row "\`fail_policy = \"ignore\"\`" c_ignore

	cat <<EOF

### What only two nodes show

| scenario | outcome |
|---|---|
| **$(verdict rollout)**: the DaemonSet rolled to a new image tag (\`maxUnavailable: 1\`, as shipped) while a Deployment spread over both nodes (\`topologySpreadConstraints\`, \`maxSkew: 1\`) scaled 0 → 20 | rollout done in $(v rollout rollout_seconds) s, at most **$(v rollout max_unavailable)** plugin pod unavailable at a time; pods per node: $(perline "$(v rollout pods_per_node)"); $(v rollout pods) pods, **$(v rollout missing) without the injection** ($(v rollout refusals) refusals while a plugin restarted, each retried by the kubelet) |
| **$(verdict "one node's runtime SIGKILLed")**: \`$N1\`'s runtime SIGKILLed, 3 pods running on each node; both Deployments scaled to 6 while it is down | \`$N2\` kept serving: its Deployment reached 6 pods $(v runtime-kill-one node2_scaled_while_node1_down_seconds) s after the kill, $(v runtime-kill-one node2_missing_while_down) without the injection, $(v runtime-kill-one node2_containers_lost) running containers lost, node Ready throughout; \`$N1\` back after $(v runtime-kill-one node1_down_seconds) s, all its pods Running $(v runtime-kill-one node1_all_running_seconds) s later: $(v runtime-kill-one pods "$N1") pods, **$(v runtime-kill-one missing "$N1") without the injection** |
| **$(verdict "readiness = network")**: \`$N1\`'s plugin down (its pod cannot reach the NRI socket and crash-loops), shipped \`readiness = "network"\` | \`$N1\` NotReady $(v network-one-down notready_seconds) s after, taints \`$(v network-one-down taints "$N1")\`; \`$N2\` untainted (\`$(v network-one-down taints "$N2")\`); a Deployment scaled 0 → 12 meanwhile: pods per node $(perline "$(v network-one-down pods_per_node_down)"), all injected; the plugin back: \`$N1\` Ready $(v network-one-down registration_to_node_ready_seconds "$N1") s after it registered, and a scale-up to 20 placed pods on both: $(perline "$(v network-one-down pods_per_node_back)"), **$(v network-one-down missing) of $(v network-one-down pods) without the injection** |
| **$(verdict "outage eviction")**: 3 pods tolerating \`not-ready\` for 20 s on \`$N1\`, then \`$N1\`'s plugin down | \`$N1\` NotReady at $(v outage notready_seconds) s, \`not-ready:NoExecute\` at $(v outage noexecute_taint_seconds) s (\`$N2\` Ready: no full-disruption mode); the pods evicted and re-created on \`$N2\`, all Running at $(v outage recreated_on_node2_seconds) s, $(v outage pods "$N2") on \`$N2\`, **$(v outage missing) of $(v outage pods) without the injection**; a pod with the default 300 s still $(v outage default_toleration_pod_at_eviction) on \`$N1\` |
| **$(verdict "readiness = condition")**: \`$N1\`'s plugin down, \`readiness = "condition"\` | both nodes stayed Ready (Node updates with Ready=False: $(v condition node_notready_updates "$N1") / $(v condition node_notready_updates "$N2"); NetworkReady=false reports: $(v condition networkready_false "$N1") / $(v condition networkready_false "$N2")); \`NRIPluginsNotReady\` True on \`$N1\` $(v condition down_to_true_ms "$N1") ms after the runtime reported the plugin gone, False $(v condition registration_to_false_ms "$N1") ms after it registered (bound: NPD's period + 2 s = $(($(v setup npd_interval_seconds) + 2)) s); a pod pinned to \`$N1\` refused meanwhile, one pinned to \`$N2\` ran; both ran injected |
| **$(verdict "bad input")**: \`$N2\`'s runtime stopped and its socket removed | \`$N2\` NotReady after $(v bad-input notready_seconds) s with the kubelet's message \`$(v bad-input node_message "$N2")\`; its check (\`$(v bad-input socket_missing_check "$N2")\`): \`NRIPluginsNotReady\` **Unknown**, \`$(v bad-input check_message "$N2")\`; \`$N1\` Ready, its condition False. The runtime back without a policy: the check in NPD's pod says \`$(v bad-input no_policy_check "$N2")\`, the condition is False with NPD's default message (\`$(v bad-input no_policy_message "$N2")\`: NPD does not copy an OK check's output) |

### Times

The plugin's registration is the \`ready\` timestamp nri-faulty prints when it answers
Synchronize; the runtime's NetworkReady=true is the first CRI \`Status\` answer that reports it
(test/k8s/cristatus polls every 2 ms); a Node's change is when a \`kubectl get nodes -w\` watch
received it. The runtime's own part must stay under 100 ms. The node's part is the kubelet's: it
polls the runtime's status every 5 s and, in its first two minutes, posts a change of the node's
status at once (its start-up updates); after that (the kubelet logs "Node not becoming ready in
time after startup") every 10 s, later on a loaded machine.

EOF
	header ""
	t_net() { echo "$(v bootstrap registration_to_networkready_ms "$1") ms"; }
	t_node() { echo "$(v bootstrap registration_to_node_ready_seconds "$1") s"; }
	t_crash() { echo "$(v crash plugin_back_seconds "$1") s"; }
	t_restart() { echo "$(v runtime-restart plugin_back_seconds "$1") s"; }
	row "plugin registration → CRI Status NetworkReady=true" t_net
	row "plugin registration → node Ready=True" t_node
	row "plugin SIGKILLed → registered again" t_crash
	row "runtime stopped → plugin registered with the restarted runtime" t_restart
	echo
	echo "Control plane up (local-up-cluster.sh): $(v setup control_plane_seconds) s; control plane and both nodes up: $(v setup nodes_up_seconds) s; the whole \`setup_file\` (images, cluster, NPD): $(v setup up_seconds) s."
	if [[ -n ${K8S_WALL:-} ]]; then
		echo "\`make test-k8s\` took $K8S_WALL."
	fi
	if [[ -n ${K8S_COLD:-} ]]; then
		echo
		echo "$K8S_COLD"
	fi

	cat <<'EOF'

### What an operator sees

While the plugin is not ready on either node (bootstrap):

```
$ kubectl get nodes -o wide
EOF
	v bootstrap get_nodes_notready
	echo
	echo '```'
	echo
	echo 'The nodes'"'"' `Ready` condition message:'
	echo
	for n in $(node_names); do echo "- \`$n\`: \`$(v bootstrap node_message "$n")\`"; done
	echo
	echo "What each runtime reports meanwhile (\`crictl info\`, conditions and the \`nri\` entry; \`$N1\`):"
	echo
	block bootstrap crictl_info "$N1"
	echo
	echo "Taints: \`$(v bootstrap taints "$N1")\`. \`kubectl describe pod\` of a Deployment pod meanwhile:"
	echo
	block bootstrap describe_pending
	cat <<'EOF'

A pod the policy refused (the API pod forging `kubernetes.io/config.source: file` on node 1, while
the plugin is absent; hostNetwork, so the kubelet did not hold it back for NetworkReady):

EOF
	block static describe_refused
	echo
	echo "The same refusal on each node:"
	echo
	for n in $(node_names); do echo "- \`$n\`: \`$(desc "$(v static forged_source_event "$n")")\`"; done
	echo
	echo "The ignored requests in each runtime's metrics (\`fail_policy = \"ignore\"\` scenario):"
	echo
	for n in $(node_names); do
		echo '```'
		v ignore metric_lines "$n"
		echo
		echo '```'
	done

	cat <<EOF

### The Node condition from node-problem-detector

node-problem-detector in this run: $(v setup npd), its config as shipped
(\`invoke_interval\` $(v setup npd_interval_seconds) s: a condition changes within NPD's period + 2 s, which the scenarios
assert). Each time runs from the runtime's report (test/k8s/cristatus, \`NRIPluginsReady\`) or the
plugin's \`ready\` line to the first Node update carrying the new status. NPD's share: up to one
period until its next check, the check itself (a few ms), and up to a second until its Kubernetes
exporter syncs.

\`$N1\`'s plugin down, \`readiness = "condition"\`: both nodes Ready, the condition on \`$N1\` only:

\`\`\`
\$ kubectl get nodes -o custom-columns=...
$(v condition columns_down)
\`\`\`

\`kubectl describe node $N1\` meanwhile:

EOF
	block condition describe_true
	echo
	echo "The refusal of the pod pinned to \`$N1\` meanwhile: \`$(desc "$(v condition refusal_while_ready "$N1")")\`"
	echo
	echo "With the shipped \`readiness = \"network\"\` the same outage also makes \`$N1\` NotReady (True $(v network-one-down down_to_true_ms "$N1") ms after the runtime's report, False $(v network-one-down registration_to_false_ms "$N1") ms after the plugin registered); the Node's events from NPD over the run up to then:"
	echo
	block network-one-down events
	echo
	echo "Two plugins, the second down on both nodes:"
	echo
	echo '```'
	v two-plugins columns_down
	echo
	echo '```'
	echo
	for n in $(node_names); do echo "- \`$n\`, a pod refused: \`$(desc "$(v two-plugins refusal_event "$n")")\`"; done
	echo
	echo "A node whose runtime socket is missing (\`$N2\`'s runtime stopped, its socket removed), then its runtime back without a policy:"
	echo
	echo '```'
	v bad-input columns_socket_missing
	echo
	echo
	v bad-input columns_no_policy
	echo
	echo '```'

	cat <<EOF

### Outage semantics: what \`readiness = "network"\` means for eviction

A node whose required plugin is down reports \`Ready=False\`, exactly as with a CNI plugin that
is not ready. The node lifecycle controller then taints it \`node.kubernetes.io/not-ready:NoExecute\`,
and the taint-eviction controller evicts every pod that does not tolerate that taint once its
\`tolerationSeconds\` run out: **300 s for ordinary pods** (the API server's DefaultTolerationSeconds
admission adds \`not-ready\` and \`unreachable\` NoExecute tolerations of 300 s to every pod:
recorded here as \`$(v outage default_toleration)\`), and their controllers re-create them on
nodes that are Ready. So a required \`readiness = "network"\` plugin that stays down longer than 5
minutes drains its node's workloads to the other nodes; DaemonSet pods tolerate the taint and stay.
Use \`readiness = "condition"\` where a plugin outage must not evict anything (new pods are still
gated by \`fail_policy\`). When **every** node of a zone is NotReady (the bootstrap scenario: no
plugin anywhere yet), the controller is in full-disruption mode and neither taints nor evicts.

The eviction scenario, with pods tolerating \`not-ready\` for 20 s:

\`\`\`
$(v outage eviction_event)

$(v outage pods_wide)
\`\`\`

### The node restart

The node restart emulates a reboot as far as this machine allows, on both nodes at once: the
runtime and the kubelet are stopped with SIGTERM (as systemd stops them) while the pods run, every
process in the pods' cgroups is killed (CRI-O's conmon and node-problem-detector's container with
them; the runtimes' state directories survive, where a reboot would empty \`/run\`), then the runtime
is started, then the kubelet. It runs on the \`readiness = "condition"\` variant, where the kubelet
starts every pod at once and only the policy holds them: each container the kubelet restarts waits
in CreateContainer (or RunPodSandbox, for a new sandbox) until the plugin's own pod, exempt, is back.
Every pod ran again in new containers $(v node-restart kubelet_start_to_all_running_seconds) s after the first kubelet's start.

### The forged exemption label

The DaemonSet's label is an exemption only in the DaemonSet's namespace (\`nri-plugins\`). A
hostNetwork pod in \`default\` wearing \`app.kubernetes.io/name: device-injector\`, created on each
node while the plugin was absent, must be refused like any other pod, and run injected once the
plugin is back (issue 21):

EOF
	for n in $(node_names); do
		echo "- \`$n\`: \`$(v forged-label outcome "$n")\`; the refusal: \`$(desc "$(v forged-label event "$n")")\`"
	done
	echo
	echo "Teardown: host iptables rules, \`/etc/cni\`, \`lo\`'s addresses and the paths a kubelet writes outside its \`--root-dir\` (\`/var/lib/kubelet\`, \`/var/log/pods\`, \`/var/log/containers\`) unchanged: **$(v teardown host_unchanged)**; sysctls the kubelets had changed and the test wrote back: $(jq -rs '[.[] | select(.scenario == "teardown" and .key == "sysctl_restored") | "`\(.value)`"] | join(", ") | if . == "" then "none" else . end' "$RES/k8s.jsonl")."
} >"$OUT.tmp"

mv "$OUT.tmp" "$OUT"
echo "wrote $OUT"
