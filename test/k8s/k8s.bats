#!/usr/bin/env bats
# test/k8s/k8s.bats (make test-k8s): a required NRI plugin under one real
# Kubernetes v1.37.2 cluster of two nodes, node 1 on patched CRI-O and node
# 2 on patched containerd (test/k8s/lib.bash builds it). The plugin is
# nri-faulty deployed with the one DaemonSet of contrib/kubernetes, each
# runtime runs its policy drop-in of the same directory, and
# node-problem-detector runs as the DaemonSet of contrib/kubernetes/npd on
# both nodes (lib.bash says what is substituted: images and a priority
# class). Every outcome is asserted through the API server (kubectl get -o
# json, kubectl wait, watches) and, for the injection, crictl exec on the
# pod's node; each scenario writes its counts and the text an operator sees
# to $K8S_RESULTS, from which hack/k8s-docs.sh generates docs/kubernetes.md.
#
# The scenarios run in order on one cluster. A scenario that concerns one
# node runs on both at once (pods pinned with nodeSelector, one assertion
# per node); the others show what only two nodes show: placement on the
# other node while node 1's plugin is down, eviction to node 2, the
# DaemonSet rolled across both, one node's runtime killed while the other
# serves. Each starts from "plugin deployed, nodes Ready" (baseline); from
# "readiness = condition" on, the runtimes run the readiness = "condition"
# variant of the shipped drop-in.

load lib
# For ci_skip. Its default hooks are replaced below: this file has no
# per-test setup (no TESTDIR, no runtime of the policy suite).
load "$REPO_ROOT/test/helpers"
setup() { :; }

setup_file() {
	rm -f "$K8S_RESULTS/k8s.jsonl"
	rm -rf "$K8S_RESULTS/logs"
	local t0=$SECONDS
	if ! k8s_up; then
		k8s_down || true
		return 1
	fi
	record setup up_seconds $((SECONDS - t0))
	record setup get_nodes_wide "$(kc get nodes -o wide)"
}

teardown_file() {
	k8s_down || true
}

# teardown: a scenario that injects a fault (plugin_fault, plugin_cut) or
# cordons a node and fails before it undoes that leaves none for the next.
teardown() {
	local n
	for n in $(nodes); do
		[[ $(kc get node "$(node_name "$n")" -o jsonpath='{.spec.unschedulable}' 2>/dev/null) != true ]] ||
			kc uncordon "$(node_name "$n")" >/dev/null || true
		rm -f "$(node_nri_dir "$n")/$PLUGIN_CONTROL"
		if in_ns "$n" grep -q ' /run/nri tmpfs' /proc/self/mounts 2>/dev/null; then
			plugin_uncut "$n" || true
		fi
	done
}

# baseline: the DaemonSet applied, its pod Ready on every node, every node
# Ready.
baseline() {
	local n
	ds_apply
	ds_wait_ready 180s
	for n in $(nodes); do node_wait_ready "$n" 120s; done
}

# require_npd: the scenario needs node-problem-detector (make k8s builds
# it; where it could not, this skips, or fails under CI=true).
require_npd() {
	npd_available || ci_skip "node-problem-detector not built: $(npd_unavailable_reason)"
}

# assert_per_node S PODS: record_outcome's last counts gave every node PODS
# pods and none without the injection (per-node records of scenario S).
assert_per_node() {
	local n p m
	for n in $(nodes); do
		p=$(jq -rs --arg s "$1" --arg n "$(node_name "$n")" '[.[] | select(.scenario == $s and .key == "pods" and .node == $n)] | last | .value // "0"' "$K8S_RESULTS/k8s.jsonl")
		m=$(jq -rs --arg s "$1" --arg n "$(node_name "$n")" '[.[] | select(.scenario == $s and .key == "missing" and .node == $n)] | last | .value // "-1"' "$K8S_RESULTS/k8s.jsonl")
		echo "$(node_name "$n"): $p pods, $m without the injection"
		[ "$p" -eq "$2" ]
		[ "$m" -eq 0 ]
	done
}

# both_pinned NS NAME REPLICAS [EXTRA_SPEC_JSON]: Deployments NAME-1 and
# NAME-2, each pinned to its node; their pods match "app in (NAME-1,NAME-2)".
both_pinned() {
	local n
	for n in $(nodes); do
		deployment "$1" "$2-$n" "$3" "$(jq -c --argjson e "${4:-{\}}" '. + $e' <<<"$(pin "$n")")"
	done
}
pinned_sel() { echo "app in ($(for n in $(nodes); do printf '%s-%s,' "$1" "$n"; done | sed 's/,$//'))"; }
scale_pinned() {
	local n
	for n in $(nodes); do kc -n "$1" scale "deploy/$2-$n" --replicas="$3" >/dev/null; done
}

@test "bootstrap: both nodes NotReady until the plugin registers on each, its DaemonSet starts anyway, then every pod carries the injection" {
	local s=bootstrap n msg
	# No plugin yet: each runtime holds NetworkReady=false, each kubelet
	# reports its node not ready with the runtime's message.
	for n in $(nodes); do
		node_wait_notready "$n" 120s
		# The kubelet's first NotReady messages also say "CSINode is not
		# yet initialized"; the runtime's part is what an operator sees.
		wait_until 60 "msg=\$(node_ready_message $n); [[ \$msg == *NRIPluginNotReady* && \$msg != *CSINode* ]]" || true
		msg=$(node_ready_message "$n")
		echo "$(node_name "$n"): $msg"
		[[ $msg == *NRIPluginNotReady* && $msg == *"$POLICY_KEY"* ]]
		record $s node_message "$msg" "$n"
		record $s crictl_info "$(crictl_n "$n" info | jq '{conditions: .status.conditions, "nri.plugins": .nri.plugins}')" "$n"
		record $s taints "$(node_taints "$n")" "$n"
	done
	record $s get_nodes_notready "$(kc get nodes -o wide)"

	# The Deployments' pods stay Pending: each node carries the not-ready
	# taint.
	ns_create s-bootstrap
	both_pinned s-bootstrap web 3
	local sel
	sel=$(pinned_sel web)
	wait_until 60 "[[ \$(kc -n s-bootstrap get pods -l '$sel' -o name | wc -l) -eq 6 ]]"
	kc -n s-bootstrap wait --for=jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}'=Unschedulable \
		pod -l "$sel" --timeout=60s
	local pending
	pending=$(kc -n s-bootstrap get pods -l "$sel" -o json | jq '[.items[] | select(.status.phase == "Pending")] | length')
	[ "$pending" -eq 6 ]
	record $s pending_before_plugin "$pending"
	record $s describe_pending "$(describe_events s-bootstrap "$(kc -n s-bootstrap get pods -l app=web-1 -o jsonpath='{.items[0].metadata.name}')")"

	# The DaemonSet's pod starts on each not-ready node (hostNetwork,
	# tolerations, exempt by the drop-in) and the plugin registers.
	local t_apply
	t_apply=$(now)
	ds_apply
	ds_wait_ready 180s
	record $s ds_pods_ready_seconds "$(since "$t_apply")"
	local t_reg t_net t_node
	for n in $(nodes); do
		t_reg=$(rfc_epoch "$(plugin_ready_after "$n" "$t_apply")")
		t_net=$(cristatus_first "$n" networkready.log NetworkReady=true "$t_reg")
		t_node=$(node_cond_first "$n" Ready True "$t_reg" 120)
		record $s registration_to_networkready_ms "$(awk -v a="$t_reg" -v b="$t_net" 'BEGIN { printf "%.1f", (b - a) * 1000 }')" "$n"
		record $s registration_to_node_ready_seconds "$(awk -v a="$t_reg" -v b="$t_node" 'BEGIN { printf "%.2f", b - a }')" "$n"
		# The runtime's part must stay under 100 ms.
		awk -v a="$t_reg" -v b="$t_net" 'BEGIN { exit !((b - a) < 0.1) }'
	done

	wait_running s-bootstrap "$sel" 6 180s
	record_outcome $s s-bootstrap "$sel"
	assert_per_node $s 3
	record $s get_nodes_ready "$(kc get nodes -o wide)"
	# What an operator checks: the injection, through the API server and
	# the kubelet (the nodes have addresses, so kubectl exec works).
	local inj
	inj=$(kc -n s-bootstrap exec deploy/web-2 -- env | grep "^${INJECTION%%=*}=")
	record $s kubectl_exec "$inj"
	[ "$inj" = "$INJECTION" ]
	record $s pods_wide "$(kc -n s-bootstrap get pods -o wide | awk '{ print $1, $2, $3, $7 }' | column -t)"
}

@test "rollout: the DaemonSet rolled to a new image across both nodes, one at a time, while a Deployment spread over both scales 0 to 20; every pod injected" {
	local s=rollout n
	baseline
	ns_create s-rollout
	deployment s-rollout web 0 '{"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
		"whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]}'
	# How many of the DaemonSet's pods are unavailable at once, from a
	# watch of its status.
	kubectl --kubeconfig "$KUBECONFIG" -n "$DS_NS" get ds "$DS_NAME" -w -o json >"$K8S_WORK/ds-watch.json" 2>/dev/null &
	local watch=$!
	local t0
	t0=$(now)
	# An operator's rollout: the shipped manifest applied with the new tag
	# (updateStrategy RollingUpdate, maxUnavailable: 1, as shipped).
	ds_apply "$DS_NAME" "$PLUGIN_IMAGE_NEXT"
	kc -n s-rollout scale deploy/web --replicas=20 >/dev/null
	kc -n "$DS_NS" rollout status ds/"$DS_NAME" --timeout=180s >/dev/null
	record $s rollout_seconds "$(since "$t0")"
	wait_running s-rollout app=web 20 300s
	record $s all_running_seconds "$(since "$t0")"
	kill "$watch" 2>/dev/null || true
	wait "$watch" 2>/dev/null || true
	local maxu updates
	maxu=$(jq -s '[.[].status.numberUnavailable // 0] | max // 0' "$K8S_WORK/ds-watch.json")
	updates=$(jq -s 'length' "$K8S_WORK/ds-watch.json")
	record $s max_unavailable "${maxu:-0}"
	record $s ds_status_updates "$updates"
	# The watch saw the rollout (not just the DaemonSet as it was).
	[ "$updates" -ge 3 ]
	for n in $(nodes); do
		record $s plugin_image "$(kc -n "$DS_NS" get pod "$(ds_pod "$n")" -o jsonpath='{.spec.containers[0].image}')" "$n"
		[ "$(kc -n "$DS_NS" get pod "$(ds_pod "$n")" -o jsonpath='{.spec.containers[0].image}')" = "$PLUGIN_IMAGE_NEXT" ]
	done
	record_outcome $s s-rollout app=web
	record $s pods_per_node "$(pods_per_node s-rollout app=web)"
	[ "$PODS" -eq 20 ]
	[ "$MISSING" -eq 0 ]
	assert_per_node $s 10
	[ "${maxu:-0}" -le 1 ]
	kc -n s-rollout scale deploy/web --replicas=0 >/dev/null
	# Back to the first image for the scenarios after (another rollout).
	ds_apply
	kc -n "$DS_NS" rollout status ds/"$DS_NAME" --timeout=180s >/dev/null
}

@test "crash: each node's plugin SIGKILLed during a scale-up; no container without the injection" {
	local s=crash n
	baseline
	ns_create s-crash
	both_pinned s-crash web 0
	local sel
	sel=$(pinned_sel web)
	declare -A pid pod rc0
	for n in $(nodes); do
		pid[$n]=$(plugin_pid "$n")
		[ -n "${pid[$n]}" ]
		pod[$n]=$(ds_pod "$n")
		rc0[$n]=$(kc -n "$DS_NS" get pod "${pod[$n]}" -o jsonpath='{.status.containerStatuses[0].restartCount}')
	done
	scale_pinned s-crash web 5
	# Kill as the first pods are being created.
	kc -n s-crash wait --for=create pod -l "$sel" --timeout=60s >/dev/null
	local t_kill
	t_kill=$(now)
	for n in $(nodes); do kill -KILL "${pid[$n]}"; done
	local t_back
	for n in $(nodes); do
		kc -n "$DS_NS" wait --for=jsonpath='{.status.containerStatuses[0].restartCount}'=$((rc0[$n] + 1)) "pod/${pod[$n]}" --timeout=120s >/dev/null
		kc -n "$DS_NS" wait --for=condition=Ready "pod/${pod[$n]}" --timeout=120s >/dev/null
		t_back=$(rfc_epoch "$(plugin_ready_after "$n" "$t_kill")")
		record $s plugin_back_seconds "$(awk -v a="$t_kill" -v b="$t_back" 'BEGIN { printf "%.2f", b - a }')" "$n"
	done
	wait_running s-crash "$sel" 10 300s
	record $s all_running_seconds "$(since "$t_kill")"
	record_outcome $s s-crash "$sel"
	assert_per_node $s 5
	scale_pinned s-crash web 0
}

@test "runtime restart: both runtimes restarted with pods running; pods keep running, the plugin reconnects, new pods are still gated" {
	local s=runtime-restart n
	baseline
	ns_create s-restart
	both_pinned s-restart web 3
	local sel
	sel=$(pinned_sel web)
	wait_running s-restart "$sel" 6 180s
	local before
	before=$(kc -n s-restart get pods -l "$sel" -o json | jq -r '[.items[].status.containerStatuses[].containerID] | sort | join(",")')
	local t0
	t0=$(now)
	for n in $(nodes); do rt_stop "$n"; rt_start "$n"; done
	record $s runtimes_down_seconds "$(since "$t0")"
	# New pods while the plugins have not come back yet.
	scale_pinned s-restart web 6
	# nri-faulty exits when the runtime drops its connection; the kubelet
	# restarts its container and it registers again.
	local back
	for n in $(nodes); do
		back=$(plugin_ready_after "$n" "$t0" 180)
		record $s plugin_back_seconds "$(awk -v a="$t0" -v b="$(rfc_epoch "$back")" 'BEGIN { printf "%.2f", b - a }')" "$n"
		# The runtime reports the plugin ready again (CRI Status).
		[ "$(crictl_n "$n" info | jq -r '.status.conditions[] | select(.type == "NRIPluginsReady") | .status')" = true ]
	done
	wait_running s-restart "$sel" 12 300s
	# The six pods of before still run the same containers.
	local lost
	lost=$(kc -n s-restart get pods -l "$sel" -o json | jq -r --arg b "$before" '[.items[].status.containerStatuses[].containerID] as $now | ($b | split(",")) - $now | length')
	record $s containers_lost "$lost"
	[ "$lost" -eq 0 ]
	record_outcome $s s-restart "$sel"
	assert_per_node $s 6
	scale_pinned s-restart web 0
}

@test "runtime crash in the relay: each runtime SIGKILLed while its plugin holds a Deployment's RunPodSandbox; every pod that runs went through the plugin" {
	local s=relay-crash n
	# Fresh DaemonSet pods (no crash-loop back-off left from the scenarios
	# before) and a plugin request timeout long enough that the kill, not
	# the timeout, ends the held relay.
	ds_delete
	for n in $(nodes); do rt_stop "$n"; NRI_REQUEST_TIMEOUT=60s rt_start "$n"; done
	baseline
	ns_create s-relay
	both_pinned s-relay web 0
	local sel
	sel=$(pinned_sel web)
	local t0 t_kill
	declare -A held sb lines
	t0=$(now)
	# The fault holds any pod's RunPodSandbox; nothing but these
	# Deployments creates pods meanwhile.
	for n in $(nodes); do plugin_fault "$n" hang 10m; done
	scale_pinned s-relay web 3
	# The sandbox is persisted and its infra container started by the time
	# the runtime relays RunPodSandbox; each plugin now holds one.
	for n in $(nodes); do
		held[$n]=$(plugin_log_after "$n" "$t0" 'hang RunPodSandbox .* pod=s-relay/' 120)
		sb[$n]=$(sed -n 's/.* sandbox=\([0-9a-f]*\).*/\1/p' <<<"${held[$n]}")
		[ -n "${sb[$n]}" ]
		lines[$n]=$(wc -l <"$K8S_WORK/logs/n$n-runtime.log")
	done
	t_kill=$(now)
	for n in $(nodes); do
		rt_kill "$n"
		record $s held "${held[$n]#* }" "$n"
		record $s hang_to_kill_ms "$(ms "$(rfc_epoch "${held[$n]%% *}")" "$t_kill")" "$n"
	done
	# Each plugin exits with its runtime's connection; the kubelet starts
	# it again once the runtime is back, and then it answers.
	local after
	for n in $(nodes); do
		plugin_fault "$n" ok
		NRI_REQUEST_TIMEOUT=60s rt_start "$n"
		# The restarted runtime knew the held sandbox unfinished...
		tail -n +"$((lines[$n] + 1))" "$K8S_WORK/logs/n$n-runtime.log" | grep -Eq "$(unrelayed_restore_re "$n" "${sb[$n]}")"
		# ...and, before the plugin is back, no sandbox of the namespace
		# on the node can be READY.
		after=$(sandboxes "$n" s-relay)
		record $s sandboxes_after_restart "$(awk 'NF { n[$2]++ } END { for (s in n) printf "%s%d %s", (c++ ? ", " : ""), n[s], s; if (!c) printf "none" }' <<<"$after")" "$n"
		[[ $after != *SANDBOX_READY* ]]
	done
	for n in $(nodes); do
		plugin_ready_after "$n" "$t_kill" 180 >/dev/null
	done
	wait_running s-relay "$sel" 6 300s
	record $s all_running_seconds "$(since "$t_kill")"
	# Each running pod's READY sandbox went through its node's plugin after
	# the crash: none is a sandbox brought back by the restarted runtime.
	local name uid node sbx unseen=0
	while read -r name uid node; do
		n=$(node_of "$node")
		sbx=$(ready_sandbox "$n" "$uid")
		[[ -n $sbx ]] && plugin_log_after "$n" "$t_kill" "acted RunPodSandbox pod=s-relay/$name uid=$uid sandbox=$sbx " 5 >/dev/null || {
			echo "pod s-relay/$name ($uid) on $node runs in sandbox '$sbx', which the plugin did not act on" >&2
			unseen=$((unseen + 1))
		}
	done < <(kc -n s-relay get pods -l "$sel" -o json | jq -r '.items[] | "\(.metadata.name) \(.metadata.uid) \(.spec.nodeName)"')
	record $s running_without_relay "$unseen"
	record_outcome $s s-relay "$sel"
	assert_per_node $s 3
	[ "$unseen" -eq 0 ]
	scale_pinned s-relay web 0
}

@test "one node's runtime SIGKILLed: node 2 keeps serving, its pods unaffected; node 1's pods come back with none without the injection" {
	local s=runtime-kill-one
	# Fresh runtimes with the shipped drop-in and request timeout.
	for n in $(nodes); do rt_stop "$n"; rt_start "$n"; done
	baseline
	ns_create s-kill
	both_pinned s-kill web 3
	local sel
	sel=$(pinned_sel web)
	wait_running s-kill "$sel" 6 180s
	local before2
	before2=$(kc -n s-kill get pods -l app=web-2 -o json | jq -r '[.items[].status.containerStatuses[].containerID] | sort | join(",")')
	local t_kill
	t_kill=$(now)
	rt_kill 1
	# Node 2 serves while node 1 has no runtime: its Deployment scales up,
	# injected.
	kc -n s-kill scale deploy/web-2 --replicas=6 >/dev/null
	# Node 1's Deployment asks for more meanwhile too.
	kc -n s-kill scale deploy/web-1 --replicas=6 >/dev/null
	wait_running s-kill app=web-2 6 180s
	record $s node2_scaled_while_node1_down_seconds "$(since "$t_kill")"
	local p m
	read -r p m < <(check_injection s-kill app=web-2)
	record $s node2_pods_while_down "$p"
	record $s node2_missing_while_down "$m"
	[ "$p" -eq 6 ]
	[ "$m" -eq 0 ]
	[ "$(node_ready 2)" = True ]
	local still2
	still2=$(kc -n s-kill get pods -l app=web-2 -o json | jq -r --arg b "$before2" '[.items[].status.containerStatuses[].containerID] as $now | ($b | split(",")) - $now | length')
	record $s node2_containers_lost "$still2"
	[ "$still2" -eq 0 ]
	record $s node1_ready_while_down "$(node_ready 1) $(node_ready_message 1)"
	# Node 1's runtime back (as systemd restarts a crashed unit).
	local t_start
	t_start=$(now)
	rt_start 1
	record $s node1_down_seconds "$(awk -v a="$t_kill" -v b="$t_start" 'BEGIN { printf "%.2f", b - a }')"
	plugin_ready_after 1 "$t_kill" 180 >/dev/null
	wait_running s-kill "$sel" 12 300s
	record $s node1_all_running_seconds "$(since "$t_start")"
	record_outcome $s s-kill "$sel"
	assert_per_node $s 6
	scale_pinned s-kill web 0
}

# The pods of the forged-exemption scenarios: hostNetwork (so that the
# kubelet does not hold them back for NetworkReady=false, and the policy is
# what decides) and tolerating the not-ready taint.
FORGED_SPEC='{"hostNetwork": true, "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]}'

@test "static pods and forged exemptions: on each node a static pod starts without the plugin, a forged config.source annotation is still gated" {
	local s=static n
	baseline
	ds_delete
	for n in $(nodes); do node_wait_notready "$n" 120s; done
	ns_create s-static
	# A static pod on each node (hostNetwork, as control-plane pods are):
	# exempt (exempt_static_pods, the default), it starts with the plugin
	# absent.
	for n in $(nodes); do
		pod_json s-static static-web '{"labels": {"app": "static-web"}}' '{"hostNetwork": true}' |
			jq -r 'del(.spec.automountServiceAccountToken)' >"$(node_dir "$n")/static-pods/static-web.json"
	done
	wait_running s-static app=static-web 2 120s
	record $s static_pods "$(kc -n s-static get pods -l app=static-web -o wide | awk '{ print $1, $2, $3, $7 }' | column -t)"

	# An API pod on each node claiming to be a static pod: the kubelet
	# overwrites kubernetes.io/config.source with "api", the runtime gates
	# it.
	for n in $(nodes); do
		pod_json default "forged-source-$n" '{"annotations": {"kubernetes.io/config.source": "file"}, "labels": {"nrigate.test/forged": "source"}}' \
			"$(jq -c --argjson p "$(pin "$n")" '. + $p' <<<"$FORGED_SPEC")" | kc apply -f - >/dev/null
	done
	local ev
	for n in $(nodes); do
		ev=$(wait_event default "forged-source-$n" "$REFUSAL_RE" 90)
		[ -n "$ev" ]
		record $s forged_source_event "$(jq -r '"\(.reason): \(.message)"' <<<"$ev")" "$n"
		[ "$(kc -n default get pod "forged-source-$n" -o jsonpath='{.status.phase}')" = Pending ]
	done
	record $s describe_refused "$(describe_events default forged-source-1)"
	record $s get_nodes_notready "$(kc get nodes)"

	# The plugin comes back: the held pods run, injected.
	ds_apply
	ds_wait_ready 180s
	for n in $(nodes); do
		kc -n default wait --for=jsonpath='{.status.phase}'=Running "pod/forged-source-$n" --timeout=180s >/dev/null
	done
	record_outcome $s default nrigate.test/forged=source
	assert_per_node $s 1
	for n in $(nodes); do rm -f "$(node_dir "$n")/static-pods/static-web.json"; done
	kc -n default delete pod -l nrigate.test/forged=source --wait=false >/dev/null
}

# A pod author sets their pod's labels, not its namespace: the drop-ins
# exempt the DaemonSet's label only in nri-plugins ([[...exempt]],
# namespace-bound), so the same label on a pod in default exempts nothing
# and the pod is gated like any other (issue 21).
@test "forged exemption label: on each node a pod in default wearing the DaemonSet's label is still gated" {
	local s=forged-label n
	baseline
	ds_delete
	for n in $(nodes); do
		node_wait_notready "$n" 120s
		pod_json default "forged-label-$n" '{"labels": {"app.kubernetes.io/name": "device-injector", "nrigate.test/forged": "label"}}' \
			"$(jq -c --argjson p "$(pin "$n")" '. + $p' <<<"$FORGED_SPEC")" | kc apply -f - >/dev/null
	done
	# Gated, a pod cannot run while the plugin is absent and the kubelet
	# reports the refusal after registration_wait (10 s); were it exempt, it
	# would run within seconds.
	declare -A ev phase
	for n in $(nodes); do
		ev[$n]=$(wait_event default "forged-label-$n" "$REFUSAL_RE" 90) || true
		phase[$n]=$(kc -n default get pod "forged-label-$n" -o jsonpath='{.status.phase}')
		if [[ -n ${ev[$n]} ]]; then
			record $s outcome "refused (${phase[$n]})" "$n"
			record $s event "$(jq -r '"\(.reason): \(.message)"' <<<"${ev[$n]}")" "$n"
		elif [[ ${phase[$n]} == Running ]]; then
			record $s outcome "Running without the plugin" "$n"
		else
			record $s outcome "${phase[$n]}, no refusal event" "$n"
		fi
	done

	# The plugin comes back: the held pods run, injected. (Asserted after
	# the cleanup, so that the next scenario starts from the baseline.)
	ds_apply
	ds_wait_ready 180s
	for n in $(nodes); do
		node_wait_ready "$n" 120s
		kc -n default wait --for=jsonpath='{.status.phase}'=Running "pod/forged-label-$n" --timeout=180s >/dev/null || true
	done
	record_outcome $s default nrigate.test/forged=label
	kc -n default delete pod -l nrigate.test/forged=label --wait=true >/dev/null
	for n in $(nodes); do
		[ -n "${ev[$n]}" ]
		[ "${phase[$n]}" = Pending ]
	done
	assert_per_node $s 1
}

# npd_bound: NPD's period + 2 s, the bound on a condition change.
npd_bound() { echo $((NPD_INTERVAL + 2)); }

@test "readiness = network, node 1's plugin down: node 1 NotReady and tainted, NRIPluginsNotReady True on node 1 only, a Deployment scaled 0 to 12 lands on node 2, injected; the plugin back, a scale-up uses both" {
	local s=network-one-down
	baseline
	if npd_available; then
		node_wait_condition 1 "$NPD_CONDITION" False 60s
		node_wait_condition 2 "$NPD_CONDITION" False 60s
	fi
	ns_create s-net
	deployment s-net web 0
	local t0 t_down
	t0=$(now)
	plugin_cut 1
	t_down=$(cristatus_first 1 nripluginsready.log NRIPluginsReady=false "$t0")
	node_wait_notready 1 120s
	record $s notready_seconds "$(since "$t0")"
	kc wait --for=jsonpath='{.spec.taints[?(@.effect=="NoSchedule")].key}'=node.kubernetes.io/not-ready "node/$(node_name 1)" --timeout=60s >/dev/null
	record $s taints "$(node_taints 1)" 1
	record $s taints "$(node_taints 2)" 2
	record $s node_message "$(node_ready_message 1)" 1
	record $s plugin_pod "$(kc -n "$DS_NS" get pods -o wide | awk '{ print $1, $2, $3, $4, $7 }' | column -t)"
	[ "$(node_ready 2)" = True ]
	if npd_available; then
		local t_true
		t_true=$(node_cond_first 1 "$NPD_CONDITION" True "$t_down" 60)
		record $s down_to_true_ms "$(ms "$t_down" "$t_true")" 1
		awk -v a="$t_down" -v b="$t_true" -v m="$(npd_bound)" 'BEGIN { exit !(b - a <= m) }'
		[[ $(node_condition 1 "$NPD_CONDITION" message) == *"$POLICY_KEY "* ]]
		[ "$(node_condition 2 "$NPD_CONDITION" status)" = False ]
		record $s columns_down "$(nodes_nri_columns)"
		record $s describe_true "$(describe_node_conditions 1)"
	fi

	# A Deployment scaled up meanwhile: the scheduler places every pod on
	# node 2 (node 1 carries the not-ready taint), where the plugin acts.
	local t_scale
	t_scale=$(now)
	kc -n s-net scale deploy/web --replicas=12 >/dev/null
	wait_running s-net app=web 12 300s
	record $s scaled_running_seconds "$(since "$t_scale")"
	record $s pods_per_node_down "$(pods_per_node s-net app=web)"
	[ "$(pods_per_node s-net app=web)" = "$(node_name 2) 12" ]
	record_outcome $s s-net app=web
	[ "$PODS" -eq 12 ]
	[ "$MISSING" -eq 0 ]

	# The plugin back on node 1: node 1 Ready, NRIPluginsNotReady False
	# there, and a new scale-up uses both nodes.
	local t_up t_reg
	t_up=$(now)
	plugin_uncut 1
	t_reg=$(rfc_epoch "$(plugin_ready_after 1 "$t_up")")
	node_wait_ready 1 120s
	record $s registration_to_node_ready_seconds "$(awk -v a="$t_reg" -v b="$(node_cond_first 1 Ready True "$t_reg" 60)" 'BEGIN { printf "%.2f", b - a }')" 1
	if npd_available; then
		local t_false
		t_false=$(node_cond_first 1 "$NPD_CONDITION" False "$t_reg" 60)
		record $s registration_to_false_ms "$(ms "$t_reg" "$t_false")" 1
		record $s describe_false "$(describe_node_conditions 1)"
		awk -v a="$t_reg" -v b="$t_false" -v m="$(npd_bound)" 'BEGIN { exit !(b - a <= m) }'
		record $s events "$(node_events 1 'NRIPlugin')"
		node_events 1 '^NRIPluginWentDown$' | grep -q "went down: $POLICY_KEY "
	fi
	kc -n s-net scale deploy/web --replicas=20 >/dev/null
	wait_running s-net app=web 20 300s
	record $s pods_per_node_back "$(pods_per_node s-net app=web)"
	record_outcome $s s-net app=web
	[ "$PODS" -eq 20 ]
	[ "$MISSING" -eq 0 ]
	[ "$(pods_per_node s-net app=web | awk -v n="$(node_name 1)" '$1 == n { print $2 }')" -ge 1 ]
	kc -n s-net scale deploy/web --replicas=0 >/dev/null
}

@test "outage eviction: pods on node 1 whose plugin is down are evicted after tolerationSeconds and re-created on node 2, injected" {
	local s=outage
	baseline
	ns_create s-outage
	# Three pods that tolerate not-ready for 20 s (to show the eviction in
	# reasonable time), all on node 1 (node 2 cordoned while they are
	# placed), and one pod pinned to node 1 with the defaults the API server
	# gives every pod (DefaultTolerationSeconds: 300 s).
	kc cordon "$(node_name 2)" >/dev/null
	deployment s-outage web 3 '{"tolerations": [
		{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 20},
		{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 20}]}'
	pod_json s-outage default-toleration '{"labels": {"app": "outage-default"}}' "$(pin 1)" | kc apply -f - >/dev/null
	wait_running s-outage app=web 3 180s
	wait_running s-outage app=outage-default 1 180s
	kc uncordon "$(node_name 2)" >/dev/null
	record $s placed "$(pods_per_node s-outage app=web)"
	[ "$(pods_per_node s-outage app=web)" = "$(node_name 1) 3" ]
	local placed
	placed=$(kc -n s-outage get pods -l app=web -o name)
	record $s default_toleration "$(kc -n s-outage get pod default-toleration -o json | jq -c '[.spec.tolerations[] | select(.effect == "NoExecute") | {key, tolerationSeconds}]')"

	local t0
	t0=$(now)
	plugin_cut 1
	node_wait_notready 1 120s
	record $s notready_seconds "$(since "$t0")"
	# Node 2 is Ready, so the node lifecycle controller is not in
	# full-disruption mode and taints node 1 NoExecute.
	kc wait --for=jsonpath='{.spec.taints[?(@.effect=="NoExecute")].key}'=node.kubernetes.io/not-ready "node/$(node_name 1)" --timeout=120s >/dev/null
	record $s noexecute_taint_seconds "$(since "$t0")"
	record $s taints "$(node_taints 1)" 1
	# The Deployment's pods are evicted after 20 s (node 1's kubelet ends
	# them) and re-created on node 2.
	kc -n s-outage wait --for=delete $placed --timeout=180s >/dev/null
	wait_running s-outage app=web 3 180s
	record $s recreated_on_node2_seconds "$(since "$t0")"
	local ev marked
	ev=$(kc -n s-outage get events -o json | jq -r '[.items[] | select(.reason == "TaintManagerEviction" and (.message | startswith("Marking for deletion")))] |
		(.[0] | "\(.reason): \(.message)"), length')
	marked=$(tail -1 <<<"$ev")
	ev=$(head -1 <<<"$ev")
	record $s eviction_event "$ev"
	record $s evictions "$marked"
	[ "$marked" -eq 3 ]
	record $s pods_wide "$(kc -n s-outage get pods -o wide | awk '{ print $1, $2, $3, $7 }' | column -t)"
	record_outcome $s s-outage app=web
	[ "$PODS" -eq 3 ]
	[ "$MISSING" -eq 0 ]
	[ "$(pods_per_node s-outage app=web)" = "$(node_name 2) 3" ]
	[ "$(kc -n s-outage get pod default-toleration -o jsonpath='{.status.phase}')" = Running ]
	record $s default_toleration_pod_at_eviction Running

	plugin_uncut 1
	ds_wait_ready_on 1
	node_wait_ready 1 120s
	kc delete namespace s-outage --wait=false >/dev/null
}

@test "readiness = condition: both nodes stay Ready; NRIPluginsNotReady True on node 1 only within NPD's period + 2 s; a pod pinned to node 1 is refused naming the plugin" {
	require_npd
	local s=condition n
	for n in $(nodes); do
		rt_stop "$n"
		rt_start "$n" "$(dropin_variant "$n" condition readiness='"condition"')"
	done
	baseline
	for n in $(nodes); do node_wait_condition "$n" "$NPD_CONDITION" False 60s; done
	local t0 t_down t_true
	t0=$(now)
	plugin_cut 1
	t_down=$(cristatus_first 1 nripluginsready.log NRIPluginsReady=false "$t0")
	t_true=$(node_cond_first 1 "$NPD_CONDITION" True "$t_down" 60)
	record $s down_to_true_ms "$(ms "$t_down" "$t_true")" 1
	awk -v a="$t_down" -v b="$t_true" -v m="$(npd_bound)" 'BEGIN { exit !(b - a <= m) }'
	[[ $(node_condition 1 "$NPD_CONDITION" message) == *"$POLICY_KEY "* ]]
	[ "$(node_condition 2 "$NPD_CONDITION" status)" = False ]
	record $s columns_down "$(nodes_nri_columns)"
	record $s describe_true "$(describe_node_conditions 1)"
	record $s get_nodes_down "$(kc get nodes -o wide)"

	# The outage lasts past a refusal (registration_wait, 10 s): a pod
	# pinned to node 1 is gated while the node stays Ready; one pinned to
	# node 2 runs, injected.
	ns_create s-cond
	for n in $(nodes); do
		pod_json s-cond "gated-$n" '{"labels": {"app": "gated"}}' "$(pin "$n")" | kc apply -f - >/dev/null
	done
	local ev
	ev=$(wait_event s-cond gated-1 "$REFUSAL_RE" 90)
	[ -n "$ev" ]
	record $s refusal_while_ready "$(jq -r '"\(.reason): \(.message)"' <<<"$ev")" 1
	record $s describe_refused "$(describe_events s-cond gated-1)" 1
	kc -n s-cond wait --for=jsonpath='{.status.phase}'=Running pod/gated-2 --timeout=120s >/dev/null
	[ "$(kc -n s-cond get pod gated-1 -o jsonpath='{.status.phase}')" = Pending ]

	local t_up t_reg t_false
	t_up=$(now)
	plugin_uncut 1
	t_reg=$(rfc_epoch "$(plugin_ready_after 1 "$t_up")")
	t_false=$(node_cond_first 1 "$NPD_CONDITION" False "$t_reg" 60)
	record $s registration_to_false_ms "$(ms "$t_reg" "$t_false")" 1
	awk -v a="$t_reg" -v b="$t_false" -v m="$(npd_bound)" 'BEGIN { exit !(b - a <= m) }'
	kc -n s-cond wait --for=jsonpath='{.status.phase}'=Running pod/gated-1 --timeout=180s >/dev/null
	record_outcome $s s-cond app=gated
	assert_per_node $s 1
	# Neither node went NotReady, neither runtime reported
	# NetworkReady=false, during the outage.
	local notready netfalse
	for n in $(nodes); do
		notready=$(node_cond_count "$n" Ready False "$t_down" "$(now)")
		netfalse=$(awk -v a="$t_down" '{ cmd = "date -d " $1 " +%s.%N"; cmd | getline t; close(cmd) } t >= a && / NetworkReady=false / { n++ } END { print n + 0 }' "$K8S_WORK/logs/n$n-networkready.log")
		record $s node_notready_updates "$notready" "$n"
		record $s networkready_false "$netfalse" "$n"
		[ "$notready" -eq 0 ]
		[ "$netfalse" -eq 0 ]
	done
	record $s outage_seconds "$(awk -v a="$t_down" -v b="$t_reg" 'BEGIN { printf "%.1f", b - a }')"
	kc -n s-cond delete pod -l app=gated --wait=false >/dev/null
}

# A reboot as a node sees it: the runtime and the kubelet stopped with pods
# running (SIGTERM, as systemd stops them), every process of the pods
# killed (as the reboot does; node-problem-detector's pod among them), then
# the runtime started, then the kubelet (systemd's order: the kubelet's
# unit is After= the runtime's). The pods' containers come back through the
# kubelet; the policy holds each until the plugin's own pod (exempt) has
# registered. Both nodes at once, on the readiness = "condition" variant of
# the previous scenario, where the kubelet starts every pod at once and the
# policy alone holds them.
@test "node restart: on both nodes runtime and kubelet stopped, pods killed, started in systemd's order; every restarted container injected" {
	local s=node-restart n
	baseline
	ns_create s-reboot
	both_pinned s-reboot web 3
	local sel
	sel=$(pinned_sel web)
	wait_running s-reboot "$sel" 6 180s
	local before
	before=$(kc get pods -A -o json | jq -r '[.items[] | .status.containerStatuses[]? | .containerID] | sort | join(",")')

	local t0 killed
	t0=$(now)
	for n in $(nodes); do
		kubelet_stop "$n"
		rt_stop "$n"
		killed=$(pods_kill "$n")
		record $s processes_killed "$killed" "$n"
		[ "$killed" -gt 0 ]
	done
	declare -A t_rt t_kl
	for n in $(nodes); do
		rt_start "$n" "$(dropin_variant "$n" condition readiness='"condition"')"
		t_rt[$n]=$(now)
		kubelet_start "$n"
		t_kl[$n]=$(now)
	done
	record $s down_seconds "$(since "$t0")"

	local t_reg t_false t_true
	for n in $(nodes); do
		ds_wait_ready_on "$n" 180s
		t_reg=$(rfc_epoch "$(plugin_ready_after "$n" "${t_rt[$n]}" 180)")
		record $s kubelet_start_to_plugin_ready_ms "$(ms "${t_kl[$n]}" "$t_reg")" "$n"
		if npd_available; then
			# NPD, killed with the pods, restarted by the kubelet,
			# reports the plugin ready once it registered. The time is
			# recorded, not bounded: the kubelet recreates every pod at
			# once on 2 cores.
			t_false=$(node_cond_first "$n" "$NPD_CONDITION" False "$t_reg" 120)
			record $s registration_to_false_ms "$(ms "$t_reg" "$t_false")" "$n"
		fi
	done

	# Every pod that ran before runs again in new containers, injected.
	local deadline=$((SECONDS + 300)) left
	while :; do
		left=$(kc get pods -A -o json | jq --arg b "$before" '($b | split(",")) as $old |
			[.items[] | select(.metadata.deletionTimestamp == null and (.spec.nodeName // "" | startswith("nrigate-"))) |
			 .status.containerStatuses[]? | select((.state.running == null) or (.containerID as $c | $old | index($c)))] | length')
		[[ $left == 0 ]] && break
		((SECONDS < deadline)) || { echo "$left containers not restarted" >&2; false; }
		sleep 0.5
	done
	record $s kubelet_start_to_all_running_seconds "$(since "${t_kl[1]}")"
	record_outcome $s s-reboot "$sel"
	assert_per_node $s 3
	record $s restarts "$(kc -n s-reboot get pods -l "$sel" -o json | jq '[.items[].status.containerStatuses[].restartCount] | add')"
	scale_pinned s-reboot web 0
}

# The variant of contrib/kubernetes/two-plugins: a second required plugin
# (ulimit-adjuster, index 20, readiness = "condition") next to the first.
# With it down, pods are refused naming it, each Node's condition names it
# and only it, and the nodes stay Ready.
@test "two required plugins, the second down on both nodes: pods refused naming it, each Node's condition names it alone" {
	local s=two-plugins n
	for n in $(nodes); do
		rt_stop "$n"
		rt_start "$n" "$(dropin_variant "$n" condition readiness='"condition"')" "$(rt_dropin2 "$n")"
	done
	baseline
	ds_apply "$DS2_NAME"
	ds_wait_ready 180s "$DS2_NAME"
	for n in $(nodes); do
		npd_available && node_wait_condition "$n" "$NPD_CONDITION" False 60s
		record $s crictl_info_plugins "$(crictl_n "$n" info | jq -c '[.nri.plugins[] | {key, state, readiness}]')" "$n"
	done

	local t0 t_down t_true msg
	t0=$(now)
	ds_delete "$DS2_NAME"
	for n in $(nodes); do
		t_down=$(cristatus_first "$n" nripluginsready.log NRIPluginsReady=false "$t0")
		if npd_available; then
			t_true=$(node_cond_first "$n" "$NPD_CONDITION" True "$t_down" 60)
			record $s down_to_true_ms "$(ms "$t_down" "$t_true")" "$n"
			msg=$(node_condition "$n" "$NPD_CONDITION" message)
			record $s node_message "$msg" "$n"
			[[ $msg == *"$POLICY_KEY2 "* && $msg != *"$POLICY_KEY "* ]]
		fi
	done
	npd_available && record $s columns_down "$(nodes_nri_columns)"

	ns_create s-two
	both_pinned s-two web 1
	local sel ev
	sel=$(pinned_sel web)
	for n in $(nodes); do
		wait_until 60 "[[ -n \$(kc -n s-two get pods -l app=web-$n -o name) ]]"
		ev=$(wait_event s-two "$(kc -n s-two get pods -l "app=web-$n" -o jsonpath='{.items[0].metadata.name}')" \
			"required NRI plugin \"$POLICY_KEY2\"" 90) || true
		[ -n "$ev" ]
		record $s refusal_event "$(jq -r '"\(.reason): \(.message)"' <<<"$ev")" "$n"
		[ "$(node_ready "$n")" = True ]
	done
	# No refusal names the plugin that is up.
	[ "$(kc -n s-two get events -o json | jq --arg re "required NRI plugin \"$POLICY_KEY\"" '[.items[] | select(.message | test($re))] | length')" -eq 0 ]
	[ "$(kc -n s-two get pods -l "$sel" -o json | jq '[.items[] | select(.status.phase == "Running")] | length')" -eq 0 ]

	# The second plugin back: the held pods run, each container injected
	# by both.
	ds_apply "$DS2_NAME"
	ds_wait_ready 180s "$DS2_NAME"
	wait_running s-two "$sel" 2 180s
	record_outcome $s s-two "$sel"
	local p2 m2
	read -r p2 m2 < <(check_injection s-two "$sel" "$INJECTION2")
	record $s missing_second "$m2"
	for n in $(nodes); do
		npd_available && node_wait_condition "$n" "$NPD_CONDITION" False 60s
	done
	ds_delete "$DS2_NAME"
	scale_pinned s-two web 0
	assert_per_node $s 1
	[ "$m2" -eq 0 ]
}

@test "bad input: too little disk for a cluster is refused before anything starts, naming the space free and needed" {
	run env K8S_MIN_FREE_GIB=$((1 << 20)) bash -c 'source "$1"; k8s_check_disk' _ "$REPO_ROOT/test/k8s/lib.bash"
	[ "$status" -eq 1 ]
	[[ $output == "/tmp has "*" MiB free of "*" GiB, under the 1073741824 MiB a cluster needs (the kubelets evict every pod below 1 %): free some space first" ]]
	run bash -c 'source "$1"; k8s_check_disk' _ "$REPO_ROOT/test/k8s/lib.bash"
	[ "$status" -eq 0 ]
}

@test "bad input: node 2's runtime socket missing makes node 2 NotReady with the kubelet's message and its check Unknown naming the socket, node 1 unaffected; a runtime without the policy reads False" {
	require_npd
	local s=bad-input n
	# Both nodes on the shipped drop-in, the plugin running.
	for n in $(nodes); do rt_stop "$n"; rt_start "$n"; done
	baseline
	for n in $(nodes); do node_wait_condition "$n" "$NPD_CONDITION" False 60s; done
	local t0 sock
	t0=$(now)
	rt_stop 2
	sock=$(node_cri_sock 2)
	rm -f "$sock"
	[ ! -e "$sock" ]
	# The kubelet's runtime check fails; after its grace period the node is
	# NotReady with the kubelet's own message.
	node_wait_notready 2 180s
	record $s notready_seconds "$(since "$t0")"
	record $s node_message "$(node_ready_message 2)" 2
	# NPD on node 2 (its container outlives the runtime) cannot ask it.
	node_wait_condition 2 "$NPD_CONDITION" Unknown 60s
	local msg
	msg=$(node_condition 2 "$NPD_CONDITION" message)
	record $s check_message "$msg" 2
	[[ $msg == *"$(node_cri_sock_in 2)"* ]]
	record $s columns_socket_missing "$(nodes_nri_columns)"
	# The check itself with the shipped rule's path and arguments, on node
	# 2 (no kubectl exec without a runtime: in the node's mount namespace,
	# which NPD's pod sees too): exit 2, NPD's Unknown.
	local rule out rc=0
	rule=$(jq -r --arg c "$NPD_CONDITION" '.rules[] | select(.condition == $c) | [.path] + .args | @sh' "$NPD_DIR/nri-plugins-monitor.json")
	out=$(eval "in_ns 2 $rule") || rc=$?
	record $s socket_missing_check "exit $rc: $out" 2
	[ "$rc" -eq 2 ]
	# Node 1 is not affected.
	[ "$(node_ready 1)" = True ]
	[ "$(node_condition 1 "$NPD_CONDITION" status)" = False ]
	[ "$(node_condition 1 "$NPD_CONDITION" message)" != "$msg" ]

	# The runtime back without any required plugin: the check reports no
	# problem, saying why; NPD shows a False condition with its config's
	# default message (NPD does not copy an OK check's output).
	rt_start 2 none
	node_wait_ready 2 120s
	node_wait_condition 2 "$NPD_CONDITION" False 60s
	msg=$(node_condition 2 "$NPD_CONDITION" message)
	record $s no_policy_message "$msg" 2
	[ "$msg" = "$(jq -r --arg c "$NPD_CONDITION" '.conditions[] | select(.type == $c) | .message' "$NPD_DIR/nri-plugins-monitor.json")" ]
	record $s columns_no_policy "$(nodes_nri_columns)"
	# The check itself, as NPD runs it, in NPD's pod on node 2: exit 0,
	# naming the reason.
	rc=0
	out=$(eval "kc -n $NPD_NS exec $(npd_pod 2) -- $rule") || rc=$?
	record $s no_policy_check "exit $rc: $out" 2
	[ "$rc" -eq 0 ]
	[ "$out" = "no NRI plugin is required by the runtime" ]
	rt_stop 2
	rt_start 2
}

@test "ignore: with fail_policy = ignore every pod runs on each node while the plugin is down, and each runtime counts it" {
	local s=ignore n
	ds_delete
	# The shipped drop-in with fail_policy = "ignore"; readiness "condition"
	# (with "network" a down plugin would hold the node NotReady whatever
	# the fail policy).
	local variant
	declare -A m0
	for n in $(nodes); do
		variant=$(dropin_variant "$n" ignore fail_policy='"ignore"' readiness='"condition"')
		[ "$(diff "$(rt_dropin "$n")" "$variant" | grep -c '^<')" -eq 2 ]
		rt_stop "$n"
		rt_start "$n" "$variant"
	done
	for n in $(nodes); do
		node_wait_ready "$n" 120s
		m0[$n]=$(decisions "$n")
	done
	ns_create s-ignore
	both_pinned s-ignore web 3
	local sel
	sel=$(pinned_sel web)
	wait_running s-ignore "$sel" 6 180s
	local m1 ignored p m seen=0
	while read -r n p m; do
		seen=$((seen + 1))
		m1=$(decisions "$n")
		ignored=$(($(cut -d' ' -f3 <<<"$m1") - $(cut -d' ' -f3 <<<"${m0[$n]}")))
		record $s pods "$p" "$n"
		record $s without_plugin "$m" "$n"
		record $s ignored_metric "$ignored" "$n"
		record $s metric_lines "$(metric_lines "$n" ignored)" "$n"
		[ "$p" -eq 3 ]
		[ "$m" -eq 3 ]
		# One sandbox and one container per pod.
		[ "$ignored" -ge 6 ]
	done < <(injection_counts s-ignore "$sel" 2>/dev/null)
	[ "$seen" -eq "$(nodes | wc -l)" ]
}

