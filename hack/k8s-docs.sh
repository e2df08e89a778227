#!/usr/bin/env bash
# hack/k8s-docs.sh (make k8s-docs): write docs/kubernetes.md from the
# records of the last `make test-k8s` (test/k8s/k8s.bats writes one JSON line
# per measured value to $K8S_RESULTS/RUNTIME.jsonl, and hack/test-summary.sh
# keeps the TAP stream in $TESTLOGS/k8s-RUNTIME.tap). The prose is here; the
# outcomes, counts, times and the text an operator sees come from the run.
#
#   K8S_RESULTS   the records (default bin/test-logs/k8s)
#   TESTLOGS      the TAP streams (default bin/test-logs)
#   K8S_WALL      "RUNTIME=SECONDS ..." wall times of make test-k8s-RUNTIME
#                 to print (optional; measured outside the test)
#   K8S_COLD      a sentence on the cold `make k8s` build time to print
#                 (optional; measured outside the test)
#   K8S_OUT       the file to write (default docs/kubernetes.md)
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO_ROOT"
RES=${K8S_RESULTS:-bin/test-logs/k8s}
LOGS=${TESTLOGS:-bin/test-logs}
OUT=${K8S_OUT:-docs/kubernetes.md}
RUNTIMES="crio containerd"
for rt in $RUNTIMES; do
	[[ -f $RES/$rt.jsonl ]] || { echo "$0: no records for $rt in $RES (run make test-k8s)" >&2; exit 1; }
done

# v RT SCENARIO KEY: the recorded value (the last one), or "–".
v() {
	local x
	x=$(jq -rs --arg s "$2" --arg k "$3" '[.[] | select(.scenario == $s and .key == $k)] | last | .value // empty' "$RES/$1.jsonl")
	[[ -n $x ]] && printf '%s' "$x" || printf '–'
}
# verdict RT PREFIX: the TAP verdict of the test whose name starts with PREFIX.
verdict() {
	local line
	line=$(awk -v t="$2" '/^(not )?ok [0-9]+ / { s = $0; sub(/^(not )?ok [0-9]+ /, "", s); if (index(s, t) == 1) { print; exit } }' \
		"$LOGS/k8s-$1.tap" 2>/dev/null)
	case $line in
	"") echo "not run" ;;
	*"# skip"*) echo "skip" ;;
	"not ok"*) echo "FAIL" ;;
	*) echo "pass" ;;
	esac
}
name() { case $1 in crio) echo "CRI-O v1.36.3 (patched)" ;; containerd) echo "containerd v2.4.2 (patched)" ;; esac; }
row() { # row LABEL RT->CELL-FUNCTION
	local label=$1 f=$2 rt line
	line="| $label |"
	for rt in $RUNTIMES; do line+=" $($f "$rt") |"; done
	echo "$line"
}
block() { # block RT SCENARIO KEY: a recorded text as a code block
	echo '```'
	v "$1" "$2" "$3"
	echo
	echo '```'
}

when=$(date -u -r "$RES/crio.jsonl" +'%Y-%m-%d %H:%M UTC')

v_ms() { echo "$(v "$1" bootstrap registration_to_networkready_ms) ms"; }
v_node() { echo "$(v "$1" bootstrap registration_to_node_ready_seconds) s"; }
v_held() { echo "$(v "$1" bootstrap plugin_to_last_pod_running_seconds) s / $(v "$1" crash plugin_to_last_pod_running_seconds) s / $(v "$1" runtime-restart plugin_to_last_pod_running_seconds) s"; }
v_cp() { echo "$(v "$1" setup control_plane_seconds) s"; }
v_wall() { local w; w=$(tr ' ' '\n' <<<"$K8S_WALL" | sed -n "s/^$1=//p"); echo "${w:-–} s"; }
npd_bound() { local i; i=$(v "$1" npd-network npd_interval_seconds); [[ $i == – ]] && echo – || echo $((i + 2)); }

{
	cat <<'EOF'
# Deploying a required NRI plugin on Kubernetes

Files a node operator installs, all in [`contrib/kubernetes/`](../contrib/kubernetes/):

| file | what | where it goes |
|---|---|---|
| [`device-injector-daemonset.yaml`](../contrib/kubernetes/device-injector-daemonset.yaml) | the plugin's DaemonSet (namespace `nri-plugins`) | `kubectl apply -f` |
| [`crio.conf.d/20-device-injector.conf`](../contrib/kubernetes/crio.conf.d/20-device-injector.conf) | the policy for patched CRI-O | `/etc/crio/crio.conf.d/`, then restart CRI-O or `systemctl reload crio` (SIGHUP reloads the policy; a bad file keeps the old one) |
| [`containerd.conf.d/20-device-injector.toml`](../contrib/kubernetes/containerd.conf.d/20-device-injector.toml) | the same policy for patched containerd | `/etc/containerd/conf.d/` (imported by the `imports` line of `containerd config default`), then restart containerd (it has no config reload) |
| [`npd/nri-plugins-monitor.json`](../contrib/kubernetes/npd/nri-plugins-monitor.json) (CRI-O), [`npd/nri-plugins-monitor-containerd.json`](../contrib/kubernetes/npd/nri-plugins-monitor-containerd.json) | node-problem-detector's custom plugin monitor config: the Node condition `NRIPluginsNotReady` and the event `NRIPluginWentDown` | `/etc/nrigate/npd/nri-plugins-monitor.json` |
| [`tools/nri-npd-check`](../tools/nri-npd-check/main.go) | the check NPD runs: asks the runtime's CRI `Status` | `CGO_ENABLED=0 go build -o /opt/nrigate/bin/nri-npd-check ./tools/nri-npd-check` |
| [`npd/node-problem-detector.yaml`](../contrib/kubernetes/npd/node-problem-detector.yaml) | NPD v1.35.2 as a DaemonSet running that config (or NPD's systemd mode, below) | `kubectl apply -f` |
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
`nri` entry:

| the runtime | exit | Node condition `NRIPluginsNotReady` |
|---|---|---|
| a required plugin not ready | 1 | `True`, reason `NRIPluginsNotReady`, message naming each such plugin and its state as the `nri` entry has it: `20-ulimit-adjuster not registered, 10-device-injector disconnected` (cut at 80 bytes, NPD's default, with `+N more`) |
| every required plugin ready | 0 | `False`, reason `NRIPluginsReady` |
| no `NRIPluginsReady` condition: no plugin required, or an unpatched runtime | 0 | `False` (the check says "no NRI plugin is required by the runtime") |
| the socket missing | 2 | `Unknown`, `runtime socket missing: PATH` |
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

- **DaemonSet** ([`npd/node-problem-detector.yaml`](../contrib/kubernetes/npd/node-problem-detector.yaml)):
  NPD's image `registry.k8s.io/node-problem-detector/node-problem-detector:v1.35.2`, `hostNetwork`
  (it must start while a `readiness = "network"` plugin holds the node NotReady), in
  `kube-system` (which the shipped policy excludes, so it is not gated on the plugin it watches),
  with three hostPath mounts: the config directory, the check's directory and the runtime
  socket's *directory* (`/var/run/crio` or `/run/containerd`; a mounted socket file would not
  follow a restarted runtime's new socket). RBAC: `patch` on `nodes/status`, `create` on events.
  An NPD you already run needs only the config file added to its `--config.custom-plugin-monitor`
  list and the three mounts.
- **systemd**: NPD's binary with the same files, ordered after the runtime:

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
  credentials (`system:node:NAME`) have them for their own Node, which is what the test below uses.

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

## What the end-to-end test shows
EOF
	cat <<EOF

GENERATED by \`make k8s-docs\` (hack/k8s-docs.sh) from the records of \`make test-k8s\`
($when); do not edit this section by hand.

\`make test-k8s\` (test/k8s/k8s.bats) builds Kubernetes $(v crio setup k8s_version | sed 's/–/v1.37.2/') from source (\`make k8s\`) and runs,
once per runtime, a single-node cluster on 127.0.0.1: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler started by upstream's own \`hack/local-up-cluster.sh\`
(from the k8s.io/kubernetes module; no kube-proxy, no cluster DNS), and a kubelet pointed at the
patched runtime's CRI socket (cgroupfs, private root and log directories, bound to 127.0.0.1; the
runtime and the kubelet share one private mount namespace with an empty tmpfs over
\`/sys/kernel/mm/hugepages\`, as this host has no v1 hugetlb hierarchy). The plugin is
\`nri-faulty\` (contrib/plugins/nri-faulty) in an OCI image built without docker, registering as
\`device-injector\` with the DaemonSet's own args; it puts \`NRI_FAULTY_ACTED=device-injector\` into
every container it acts on, read back with \`crictl exec\` (the node has no address, so
\`kubectl exec\` does not work). The test applies **the files above** with three substitutions in
the DaemonSet, each checked to hit one line: the image name, the host path of the NRI socket
directory (the runtime's private one), and \`priorityClassName: system-node-critical\` removed (the
kubelet would set \`oom_score_adj\` -997, which runc cannot apply on these VMs: no
\`CAP_SYS_RESOURCE\`). The drop-ins are used as they are. Every outcome is asserted through the
API server (\`kubectl get -o json\`, \`kubectl wait\`, watches), never by sleeping.

EOF
	echo "| scenario | $(name crio) | $(name containerd) |"
	echo "|---|---|---|"
	cell_bootstrap() { echo "**$(verdict "$1" bootstrap)**: $(v "$1" bootstrap pending_before_plugin) pods Pending while NotReady; DaemonSet pod Ready $(v "$1" bootstrap ds_pod_ready_seconds) s after apply; $(v "$1" bootstrap pods) containers, **$(v "$1" bootstrap missing) without the injection**"; }
	cell_rollout() { echo "**$(verdict "$1" rollout)**: $(v "$1" rollout pods) pods, **$(v "$1" rollout missing) without the injection**; creates that waited for the plugin: $(v "$1" rollout waited); refused: $(v "$1" rollout refused_metric) (metrics), $(v "$1" rollout refusals) refusal events, $(v "$1" rollout netnotready) NetworkNotReady holds; all Running $(v "$1" rollout all_running_seconds) s after the restart"; }
	cell_crash() { echo "**$(verdict "$1" crash)**: $(v "$1" crash pods) pods, **$(v "$1" crash missing) without the injection**; plugin back $(v "$1" crash plugin_back_seconds) s after SIGKILL (DaemonSet pod Ready $(v "$1" crash ds_pod_back_seconds) s); last held pod Running $(v "$1" crash plugin_to_last_pod_running_seconds) s after the plugin's return; waited $(v "$1" crash waited), refused $(v "$1" crash refused_metric) (metrics), $(v "$1" crash refusals) refusal events"; }
	cell_restart() { echo "**$(verdict "$1" "runtime restart")**: runtime down $(v "$1" runtime-restart runtime_down_seconds) s, $(v "$1" runtime-restart containers_lost) running containers lost; plugin synchronized again $(v "$1" runtime-restart plugin_back_seconds) s after the stop (the kubelet restarts its container); $(v "$1" runtime-restart pods) pods, **$(v "$1" runtime-restart missing) without the injection**; waited $(v "$1" runtime-restart waited), refused $(v "$1" runtime-restart refused_metric) (metrics of the new instance), $(v "$1" runtime-restart refusals) refusal events; last new pod Running $(v "$1" runtime-restart plugin_to_last_pod_running_seconds) s after the plugin's return"; }
	cell_relay() { echo "**$(verdict "$1" "runtime crash in the relay")**: the runtime SIGKILLed $(v "$1" relay-crash hang_to_kill_ms) ms after the plugin began holding a RunPodSandbox (\`$(v "$1" relay-crash held)\`); the namespace's sandboxes right after the restart: $(v "$1" relay-crash sandboxes_after_restart) (none may be READY); $(v "$1" relay-crash pods) pods Running $(v "$1" relay-crash all_running_seconds) s after the kill, **$(v "$1" relay-crash running_without_relay) without a RunPodSandbox the plugin acted on**, $(v "$1" relay-crash missing) without the injection"; }
	cell_static() { echo "**$(verdict "$1" "static pods")**: static pod Running with the plugin absent; API pod with \`kubernetes.io/config.source: file\` refused, ran injected after the plugin returned ($(v "$1" static forged_source_missing) without the injection)"; }
	cell_label() { echo "**$(verdict "$1" "forged exemption label")**: outcome \`$(v "$1" forged-label outcome)\`; ran injected after the plugin returned ($(v "$1" forged-label forged_label_missing) without the injection)"; }
	cell_outage() { echo "**$(verdict "$1" "outage semantics")**: NotReady $(v "$1" outage notready_seconds) s after the plugin's DaemonSet was deleted, \`not-ready:NoExecute\` taint at $(v "$1" outage noexecute_taint_seconds) s, the pod tolerating it 20 s evicted at $(v "$1" outage evicted_seconds) s; the pod with the default 300 s still Running"; }
	cell_ignore() { echo "**$(verdict "$1" ignore)**: $(v "$1" ignore pods) pods all Running with the plugin down ($(v "$1" ignore without_plugin) without it, by design); the runtime counted $(v "$1" ignore ignored_metric) ignored requests"; }
	row "node bootstrap (\`readiness = \"network\"\`, \`fail\`)" cell_bootstrap
	row "rollout restart of the DaemonSet while a Deployment scales 0 → 20" cell_rollout
	row "crash: plugin SIGKILLed during a scale-up to 10" cell_crash
	row "runtime restart with pods running, then scale 3 → 6" cell_restart
	row "runtime SIGKILLed while the plugin holds a Deployment's RunPodSandbox" cell_relay
	row "static pod and forged \`config.source\` annotation" cell_static
	row "forged exemption label in \`default\`" cell_label
	row "outage semantics (second, fake Ready node)" cell_outage
	row "\`fail_policy = \"ignore\"\`" cell_ignore
	cell_npdnet() { echo "**$(verdict "$1" "node condition, readiness = network")**: \`NRIPluginsNotReady\` True $(v "$1" npd-network down_to_true_ms) ms after the runtime reported the plugin gone, False $(v "$1" npd-network registration_to_false_ms) ms after it registered (bound: NPD's period + 2 s = $(npd_bound "$1") s); node NotReady meanwhile: $(v "$1" npd-network node_notready_while_down)"; }
	cell_npdcond() { echo "**$(verdict "$1" "node condition, readiness = condition")**: True $(v "$1" npd-condition down_to_true_ms) ms after the plugin went, False $(v "$1" npd-condition registration_to_false_ms) ms after it registered; Node updates with Ready=False meanwhile: **$(v "$1" npd-condition node_notready_updates)**"; }
	cell_reboot() { echo "**$(verdict "$1" "node restart")**: $(v "$1" node-restart processes_killed) pod processes killed; plugin registered $(v "$1" node-restart kubelet_start_to_plugin_ready_ms) ms after the kubelet's start, every pod Running in new containers after $(v "$1" node-restart kubelet_start_to_all_running_seconds) s; $(v "$1" node-restart containers) containers, **$(v "$1" node-restart missing) without the injection**; condition True, then False $(v "$1" node-restart registration_to_false_ms) ms after registration"; }
	cell_two() { echo "**$(verdict "$1" "two required plugins")**: \`20-ulimit-adjuster\` down: condition message \`$(v "$1" two-plugins node_message)\`, pods refused naming it, node Ready: $(v "$1" two-plugins node_ready_while_down); back: $(v "$1" two-plugins containers) containers, $(v "$1" two-plugins missing_first) / $(v "$1" two-plugins missing_second) without the first / second plugin's injection"; }
	row "Node condition with \`readiness = \"network\"\` (shipped)" cell_npdnet
	row "Node condition with \`readiness = \"condition\"\`" cell_npdcond
	row "node restart (runtime and kubelet stopped, pods killed, started in systemd's order)" cell_reboot
	row "two required plugins, the second down" cell_two

	echo
	for rt in $RUNTIMES; do
		echo "Teardown ($(name "$rt")): host iptables rules and \`/etc/cni\` unchanged: **$(v "$rt" teardown host_unchanged)**; sysctls the kubelet had changed and the test wrote back: $(jq -rs '[.[] | select(.scenario == "teardown" and .key == "sysctl_restored") | "`\(.value)`"] | join(", ") | if . == "" then "none" else . end' "$RES/$rt.jsonl")."
		echo
	done
	cat <<'EOF'
### Times

The plugin's registration is the `ready` timestamp nri-faulty prints when it answers
Synchronize; the runtime's NetworkReady=true is the first CRI `Status` answer that reports it
(test/k8s/cristatus polls every 2 ms); node Ready is when `kubectl wait --for=condition=Ready`
returns (a watch). The kubelet polls the runtime's status every 5 s and reports node status
every 10 s, which is what the node's part is made of; the runtime's own part must stay under
100 ms.

EOF
	echo "| | $(name crio) | $(name containerd) |"
	echo "|---|---|---|"
	row "plugin registration → CRI Status NetworkReady=true" "v_ms"
	row "plugin registration → node Ready=True" "v_node"
	row "plugin back → last held pod Running (bootstrap / crash / runtime restart)" "v_held"
	row "control plane up (local-up-cluster.sh)" "v_cp"
	if [[ -n ${K8S_WALL:-} ]]; then
		row "\`make test-k8s-RUNTIME\` wall time, warm build cache" "v_wall"
	fi
	if [[ -n ${K8S_COLD:-} ]]; then
		echo
		echo "$K8S_COLD"
	fi

	cat <<'EOF'

### What an operator sees

While the plugin is not ready (the CRI-O run; the containerd run shows the same):

```
$ kubectl get node
EOF
	v crio bootstrap get_node
	echo
	echo '```'
	echo
	echo 'The node'"'"'s `Ready` condition message (both runtimes):'
	echo
	for rt in $RUNTIMES; do
		echo "- $(name "$rt"): \`$(v "$rt" bootstrap node_message)\`"
	done
	echo
	echo 'What the runtime reports meanwhile (`crictl info`, conditions and the `nri` entry; CRI-O):'
	echo
	block crio bootstrap crictl_info
	echo
	echo "Taints: \`$(v crio bootstrap taints)\`. \`kubectl describe pod\` of a Deployment pod meanwhile:"
	echo
	block crio bootstrap describe_pending
	cat <<'EOF'

A pod the policy refused (here the API pod forging `kubernetes.io/config.source: file`, while the
plugin is absent; hostNetwork, so the kubelet did not hold it back for NetworkReady):

EOF
	block crio static describe_refused
	echo
	echo "The same refusal on containerd:"
	echo
	echo "> $(v containerd static forged_source_event)"
	echo
	echo "A refusal while the plugin restarts (first one seen in the rollout, crash or runtime-restart scenario; the kubelet retries with back-off and the pod starts once the plugin is back):"
	echo
	for rt in $RUNTIMES; do
		local_ev=$(v "$rt" rollout refusal_event)
		[[ $local_ev != – ]] || local_ev=$(v "$rt" crash refusal_event)
		[[ $local_ev != – ]] || local_ev=$(v "$rt" runtime-restart refusal_event)
		if [[ $local_ev == – ]]; then
			echo "- $(name "$rt"): none in this run: every held request was released by the plugin's return within \`registration_wait\` (10 s), or the kubelet held the pod back itself (NetworkNotReady). Whether a restart produces refusals depends on timing (earlier runs of this test saw 2–3 per runtime in the runtime-restart scenario, all retried by the kubelet and ending injected); a refusal reads like the one above, with the reason (\`is disconnected since T\`, \`is registered as … but not synchronized\`, \`is not registered\`)."
		else
			echo "- $(name "$rt"): \`$local_ev\`"
		fi
	done
	echo
	echo "The ignored requests in the runtime's metrics (\`fail_policy = \"ignore\"\` scenario):"
	echo
	for rt in $RUNTIMES; do
		echo '```'
		v "$rt" ignore metric_lines
		echo
		echo '```'
	done

	cat <<EOF

### The Node condition, the node restart and two plugins

EOF
	echo "node-problem-detector in this run: $(v crio npd-network npd) (CRI-O); $(v containerd npd-network npd) (containerd)."
	cat <<EOF
It runs on the host as in NPD's systemd mode, with the config of \`contrib/kubernetes/npd\` and four
substitutions, each checked against the shipped value: \`invoke_interval\` $(v crio npd-network npd_interval_seconds) s instead of 10 s (so
that the bound, NPD's period + 2 s, is short), the check's path, the runtime's socket and the state
file. Its credentials are the kubelet's (\`system:node:nrigate-node\`). Each time runs from the
runtime's report (test/k8s/cristatus, \`NRIPluginsReady\`, polled every 2 ms) or the plugin's
\`ready\` line to the first Node update carrying the new status, as a \`kubectl get node -w\` watch
received it. NPD's share of each: up to one check period (1 s here) until the next check, the
check itself (a few ms), and up to 1 s until NPD's Kubernetes exporter syncs the condition.

\`kubectl describe node\` with the plugin down and just after it registered (CRI-O, \`readiness =
"network"\`; the kubelet's \`Ready\` follows the runtime's \`NetworkReady\` a few seconds later):

EOF
	block crio npd-network describe_true
	echo
	block crio npd-network describe_false
	echo
	echo "The Node's events from NPD over the run up to then (CRI-O; the \`Unknown\` is the runtime restart scenario's half second without a runtime):"
	echo
	block crio npd-network events
	echo
	echo "With \`readiness = \"condition\"\` the node stays Ready while the condition is True (CRI-O):"
	echo
	block crio npd-condition describe_true
	echo
	echo '```'
	echo '$ kubectl get node'
	v crio npd-condition get_node_while_down
	echo
	echo '```'
	echo
	echo "Two plugins, the second down (CRI-O), and a pod refused meanwhile (both runtimes):"
	echo
	block crio two-plugins describe_true
	echo
	for rt in $RUNTIMES; do
		echo "- $(name "$rt"): \`$(v "$rt" two-plugins refusal_event)\`"
	done
	cat <<EOF

The node restart emulates a reboot as far as this machine allows: the runtime and the kubelet are
stopped with SIGTERM (as systemd stops them) while the pods run, every process in the pods'
cgroups is killed (CRI-O's conmon with them; the runtimes' state directories survive, where a
reboot would empty \`/run\`), then the runtime is started, then NPD, then the kubelet. It runs on the
\`readiness = "condition"\` variant, where the kubelet starts every pod at once and only the policy
holds them: each container the kubelet restarts waits in CreateContainer (or RunPodSandbox, for a
new sandbox) until the plugin's own pod, exempt, is back.

EOF
	echo "| | $(name crio) | $(name containerd) |"
	echo "|---|---|---|"
	cell_rb1() { v "$1" node-restart processes_killed; }
	cell_rb2() { echo "$(v "$1" node-restart kubelet_start_to_plugin_ready_ms) ms"; }
	cell_rb3() { echo "$(v "$1" node-restart kubelet_start_to_all_running_seconds) s"; }
	cell_rb4() { echo "$(v "$1" node-restart containers) / **$(v "$1" node-restart missing)**"; }
	cell_rb5() { v "$1" node-restart refusals; }
	cell_rb6() { echo "$(v "$1" node-restart npd_true_after_runtime_start_ms) ms / $(v "$1" node-restart registration_to_false_ms) ms"; }
	row "pod processes killed" cell_rb1
	row "kubelet start → plugin registered" cell_rb2
	row "kubelet start → every pod Running in new containers" cell_rb3
	row "restarted containers / without the injection" cell_rb4
	row "refusals the kubelet reported (then retried)" cell_rb5
	row "NRIPluginsNotReady True after the runtime's start / False after registration" cell_rb6
	cat <<EOF

### Outage semantics: what \`readiness = "network"\` means for eviction

A node whose required plugin is down reports \`Ready=False\`, exactly as with a CNI plugin that
is not ready. The node lifecycle controller then taints it \`node.kubernetes.io/not-ready:NoExecute\`,
and the taint-eviction controller evicts every pod that does not tolerate that taint once its
\`tolerationSeconds\` run out: **300 s for ordinary pods** (the API server's DefaultTolerationSeconds
admission adds \`not-ready\` and \`unreachable\` NoExecute tolerations of 300 s to every pod:
recorded here as \`$(v crio outage default_toleration)\`). So a required
\`readiness = "network"\` plugin that stays down longer than 5 minutes drains its node's
workloads; DaemonSet pods tolerate the taint and stay. Use \`readiness = "condition"\` where a plugin
outage must not evict anything (new pods are still gated by \`fail_policy\`).

Exception: when **every** node of a zone is NotReady, the controller is in full-disruption
mode and neither taints nor evicts (a lone node, as in this test's other scenarios, never sees
the NoExecute taint). To show the eviction the test adds a second node object kept Ready
through the API (its Lease and Ready heartbeat renewed every 5 s, tainted so that nothing is
scheduled onto it), deletes the plugin's DaemonSet and watches: a pod tolerating \`not-ready\` for
20 s and one with the default 300 s.

EOF
	for rt in $RUNTIMES; do
		echo "- $(name "$rt"): node NotReady $(v "$rt" outage notready_seconds) s after the DaemonSet's deletion, taints \`$(v "$rt" outage taints)\` (NoExecute at $(v "$rt" outage noexecute_taint_seconds) s); the 20 s pod evicted at $(v "$rt" outage evicted_seconds) s (\`$(v "$rt" outage eviction_event)\`), the 300 s pod still $(v "$rt" outage default_toleration_pod_at_eviction)."
	done

	cat <<'EOF'

### The forged exemption label

EOF
	cat <<'EOF'
The DaemonSet's label is an exemption only in the DaemonSet's namespace (`nri-plugins`). A
hostNetwork pod in `default` wearing `app.kubernetes.io/name: device-injector`, created while
the plugin was absent, must be refused like any other pod, and run injected once the plugin is
back (issue 21):

EOF
	for rt in $RUNTIMES; do
		echo "- $(name "$rt"): \`$(v "$rt" forged-label outcome)\`; $(v "$rt" forged-label forged_label_missing) containers without the injection after the plugin's return. The refusal: \`$(v "$rt" forged-label event)\`"
	done
} >"$OUT.tmp"

mv "$OUT.tmp" "$OUT"
echo "wrote $OUT"
