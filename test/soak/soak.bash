#!/usr/bin/env bash
# test/soak/soak.bash (make soak): the two-node cluster of test/k8s
# (test/k8s/lib.bash: node 1 on patched CRI-O, node 2 on patched
# containerd, the plugin as the one DaemonSet of contrib/kubernetes,
# node-problem-detector as contrib/kubernetes/npd's) under churn while a
# seeded schedule injects faults one at a time, with the invariants
# checked while it runs and at the end (docs/reliability.md says what
# runs and what is checked).
#
# The load is Kubernetes objects driven with kubectl, in namespace soak:
# Deployments pinned to each node scaled up and down, one with an init
# container, one whose liveness probe fails so that the kubelet restarts
# its container, Jobs, pods deleted. The schedule (faults, churn) is drawn
# from SOAK_SEED by tools/nri-soak; this script carries it out and
# records what happened; tools/nri-soak checks the records and writes the
# summary and the plot.
#
# Environment:
#   SOAK_DURATION    how long faults are injected (default 30m; s, m, h)
#   SOAK_SEED        the seed (default: a random one, printed first)
#   SOAK_KINDS       the fault kinds to draw from, comma-separated (default
#                    every kind; without runtime-kill, runtime-kill-held and
#                    node-restart the runtimes live through the soak, and
#                    their growth is judged on long processes)
#   SOAK_DIR         the records and the summary (default bin/test-logs/soak)
#   SOAK_CLUSTER     "new" (default): start the cluster (k8s_up) and stop
#                    it after; "reuse": the cluster of K8S_WORK and
#                    KUBECONFIG, which a caller started (make test-k8s's
#                    last test), left running
#   SOAK_READINESS   the readiness of the plugin's policy per node (default
#                    "condition network": node 1 holds only the Node
#                    condition, node 2 also NetworkReady, as shipped)
#   SOAK_SETTLE_BOUND  seconds after the heal within which no pod may stay
#                    Pending/ContainerCreating (default 180)
#   SOAK_LEAK_BOUND  seconds after the soak's pods are gone within which
#                    nothing may be left (default 150)
#   SOAK_GROWTH_MIN  growth is judged when the second half spans at least
#                    this many seconds (default 600)
#   SOAK_COMMAND     the command printed as the one that reproduces the run
#   SOAK_KEEP_GOING  set: a violation does not stop the soak (every one is
#                    reported at the end; the exit status is still 1)
#
# Exit status: 0 no violation; 1 a violation (the first one is named, with
# its time and the fault before it; the logs stay in SOAK_DIR); 2 the soak
# could not run (no cluster, or one that did not come up: it says why).
# SIGINT stops injecting, heals the cluster, checks and writes the summary.

set -uo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../k8s/lib.bash
source "$REPO_ROOT/test/k8s/lib.bash"

SOAK_DIR=${SOAK_DIR:-$REPO_ROOT/bin/test-logs/soak}
SOAK_CLUSTER=${SOAK_CLUSTER:-new}
SOAK_READINESS=${SOAK_READINESS:-condition network}
SOAK_SETTLE_BOUND=${SOAK_SETTLE_BOUND:-180}
SOAK_LEAK_BOUND=${SOAK_LEAK_BOUND:-150}
SOAK_GROWTH_MIN=${SOAK_GROWTH_MIN:-600}
SOAK_NS=soak
# The CRI Status watchers of lib.bash poll each runtime every 2 ms by
# default, for the scenarios' 100 ms bound; over half an hour on two cores
# that is load the soak does not need (its bounds are seconds).
export CRISTATUS_INTERVAL=${CRISTATUS_INTERVAL:-50ms}
# How often the invariants are checked, the runtimes sampled, the plugins'
# logs linked (seconds).
CHECK_EVERY=30
SAMPLE_EVERY=5
# The samples of the last rest, after the soak's namespace is deleted
# (seconds; the plan's rests say their own).
REST_HOLD=30
# A soak this long (seconds) restarts runtimes only early and rests its
# churn (tools/nri-soak/plan.go's growthPlanMin).
GROWTH_PLAN_MIN=1200
# A node is back when its runtime reports every required plugin ready; a
# plugin that the kubelet holds in its restart back-off longer than this is
# restarted (its pod deleted), and a node not back that long after is a
# violation (recovery).
KICK_AFTER=60
RECOVER_WITHIN=180

# The policy of the soak: the shipped drop-in with the key of the plugin's
# name alone (any index: the DaemonSet is rolled to another index), the
# node's readiness; the two-plugin variant's second drop-in next to it.
POLICY_KEY=device-injector
# The exit codes of a soak container that misses an injection.
EXIT1=42 EXIT2=43
# The DaemonSet's NRI index and image, rolled between two of each.
PLUGIN_IDX=10 PLUGIN_IDX_NEXT=15

say() { echo "soak: $(date -u +%T) $*"; }
die() { echo "soak: $*" >&2; exit 2; }

# seconds DURATION: 90, 90s, 5m, 1h -> seconds.
seconds() {
	case $1 in
	*h) echo $((${1%h} * 3600)) ;;
	*m) echo $((${1%m} * 60)) ;;
	*s) echo "${1%s}" ;;
	*) echo "$1" ;;
	esac
}

# --- records ------------------------------------------------------------------

# jl FILE JQ_ARGS... FILTER: one JSON line appended to FILE.
jl() { local f=$1; shift; jq -cn "$@" >>"$SOAK_DIR/$f"; }

# run_set KEY JSON: a field of run.json.
run_set() {
	local tmp=$SOAK_DIR/run.json.tmp
	jq --arg k "$1" --argjson v "$2" '.[$k] = $v' "$SOAK_DIR/run.json" >"$tmp" && mv "$tmp" "$SOAK_DIR/run.json"
}

FAULT_ID=0
declare -A DETAIL
fault_begin() {
	FAULT_ID=$((FAULT_ID + 1))
	DETAIL=()
	FAULT_T0=$(now)
	jl faults.jsonl --argjson id "$FAULT_ID" --arg k "$1" --argjson n "$2" --argjson t "$FAULT_T0" '{id: $id, kind: $k, node: $n, start: $t}'
}
fault_end() {
	local d='{}' k
	for k in "${!DETAIL[@]}"; do d=$(jq -c --arg k "$k" --arg v "${DETAIL[$k]}" '.[$k] = $v' <<<"$d"); done
	jl faults.jsonl --argjson id "$FAULT_ID" --argjson t "$(now)" --argjson d "$d" '{id: $id, end: $t, detail: $d}'
}

# soak_violation KIND NODE DETAIL: a violation found here (not by
# tools/nri-soak's checks of the records): a node that did not recover.
soak_violation() {
	jl soak-violations.jsonl --argjson t "$(now)" --arg k "$1" --argjson n "$2" --arg d "$3" '{t: $t, kind: $k, node: $n, detail: $d}'
	say "VIOLATION $1 on node $2: $3"
	[[ -n ${SOAK_KEEP_GOING:-} ]] || STOP=${STOP:-violation}
}

# --- the policy and the workloads -----------------------------------------------

# soak_dropin N NAME [KEY=VALUE...]: node N's shipped drop-in as the soak
# runs it (dropin_variant with the node's readiness and the KEY=VALUEs),
# its key the plugin's name without the index. The renaming is checked to
# change the table and its exemption, nothing else.
soak_dropin() {
	local n=$1 name=$2 f c
	shift 2
	f=$(dropin_variant "$n" "soak-$name" readiness="\"$(node_readiness "$n")\"" "$@") || return
	c=$(grep -c 'required_plugins\."10-device-injector"' "$f")
	[[ $c == 2 ]] || { echo "soak_dropin: $c tables of 10-device-injector in $f, want 2" >&2; return 1; }
	sed -i 's/required_plugins\."10-device-injector"/required_plugins."'"$POLICY_KEY"'"/' "$f"
	echo "$f"
}
node_readiness() { awk -v n="$1" '{ print $n }' <<<"$SOAK_READINESS"; }

declare -A POLICY POLICY_IGNORE
# soak_start_runtime N: node N's runtime (re)started with the soak's policy.
soak_start_runtime() { rt_start "$1" "${POLICY[$1]}" "$(rt_dropin2 "$1")"; }

# soak_ds_apply: the plugin's DaemonSet as shipped (lib.bash's ds_manifest:
# the image), at the NRI index CUR_IDX (the args' "-idx" value, checked to
# change one line).
CUR_IDX=$PLUGIN_IDX CUR_IMAGE=$PLUGIN_IMAGE
soak_ds_apply() {
	local f
	f=$(ds_manifest "$DAEMONSET_MANIFEST" "$CUR_IMAGE") || return
	if [[ $CUR_IDX != "$PLUGIN_IDX" ]]; then
		[[ $(grep -c "\"-idx\", \"$PLUGIN_IDX\"" "$f") == 1 ]] || { echo "soak_ds_apply: no single -idx $PLUGIN_IDX in $f" >&2; return 1; }
		sed -i "s/\"-idx\", \"$PLUGIN_IDX\"/\"-idx\", \"$CUR_IDX\"/" "$f"
	fi
	kc apply -f "$f" >/dev/null
}

# selfcheck: the shell that every soak container runs first: each
# plugin's injection in its environment, or exit EXIT1/EXIT2.
selfcheck() {
	printf 'env | grep -qx %q || { echo "soak: no %s"; exit %d; }; ' "$INJECTION" "$INJECTION" "$EXIT1" "$INJECTION2" "$INJECTION2" "$EXIT2"
}
LOOP='trap "exit 0" TERM; while :; do sleep 1 & wait; done'

# pod_template N KIND: the pod template of the soak's workloads on node N.
pod_template() {
	local n=$1 kind=$2 check
	check=$(selfcheck)
	jq -n --arg node "$(node_name "$n")" --arg n "$n" --arg kind "$kind" --arg img "$TEST_IMAGE_NAME" \
		--arg check "$check" --arg loop "$LOOP" '
		def ctr($name; $cmd): {name: $name, image: $img, imagePullPolicy: "Never", command: ["sh", "-c", ($check + $cmd)]};
		{metadata: {labels: {app: ($kind + "-" + $n), "soak-node": $n}},
		 spec: ({terminationGracePeriodSeconds: 1, automountServiceAccountToken: false,
			nodeSelector: {"kubernetes.io/hostname": $node}} +
			if $kind == "web" then {containers: [ctr("app"; $loop)]}
			elif $kind == "init" then {initContainers: [ctr("init"; "sleep 1")], containers: [ctr("app"; $loop)]}
			elif $kind == "probe" then {containers: [ctr("app"; "date +%s >/tmp/t0; " + $loop) + {livenessProbe: {
				exec: {command: ["sh", "-c", "test $(( $(date +%s) - $(cat /tmp/t0) )) -lt 20"]},
				periodSeconds: 5, failureThreshold: 1, timeoutSeconds: 3}}]}
			elif $kind == "job" then {restartPolicy: "Never", containers: [ctr("job"; "sleep 2")]}
			else {containers: [ctr("app"; $loop)]} end)}'
}

# soak_workloads: the Deployments of every node, at 0 replicas.
soak_workloads() {
	local n kind
	for n in $(nodes); do
		for kind in web init probe; do
			jq -n --arg name "$kind-$n" --arg ns "$SOAK_NS" --argjson t "$(pod_template "$n" "$kind")" '{
				apiVersion: "apps/v1", kind: "Deployment", metadata: {name: $name, namespace: $ns},
				spec: {replicas: 0, selector: {matchLabels: {app: $name}}, template: $t}}' |
				kc apply -f - >/dev/null || return
		done
	done
}

# soak_job N K: Job job-N-K on node N, two pods.
soak_job() {
	jq -n --arg name "job-$1-$2" --arg ns "$SOAK_NS" --argjson t "$(pod_template "$1" job)" '{
		apiVersion: "batch/v1", kind: "Job", metadata: {name: $name, namespace: $ns},
		spec: {completions: 2, parallelism: 2, backoffLimit: 4, ttlSecondsAfterFinished: 30, template: $t}}' |
		kc apply -f - >/dev/null
}

# --- background: watches, samples, the plugins' logs --------------------------

BG_PIDS=()
bg() { "$@" & BG_PIDS+=($!); }
# kill_tree PID: PID and every process under it (a loop's kubectl watch
# outlives the loop's subshell otherwise).
kill_tree() {
	local c
	for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$c"; done
	kill "$1" 2>/dev/null
}

# watch_loop FILE JQ_FILTER KUBECTL_ARGS...: a kubectl watch whose objects
# jq turns into lines of FILE with the receive time; restarted if the API
# server ends it.
watch_loop() {
	local f=$1 filter=$2
	shift 2
	while [[ ! -e $SOAK_DIR/.stop ]]; do
		kubectl --kubeconfig "$KUBECONFIG" "$@" 2>/dev/null | jq --unbuffered -c "$filter" >>"$SOAK_DIR/$f" 2>/dev/null
		sleep 0.5
	done
}
POD_FILTER='.object as $p | {t: now, type, uid: $p.metadata.uid, name: $p.metadata.name, node: ($p.spec.nodeName // ""),
	phase: ($p.status.phase // ""), deleting: ($p.metadata.deletionTimestamp != null),
	owner: ($p.metadata.ownerReferences[0].kind // ""),
	ctrs: ([($p.status.initContainerStatuses // [])[] | . + {init: true}] + ($p.status.containerStatuses // []) |
		map({name, init: (.init // false), id: (.containerID // ""), state: ((.state // {}) | keys[0] // ""),
			reason: ((.state // {}) | to_entries[0].value.reason // ""), exit: .state.terminated.exitCode,
			restarts: (.restartCount // 0), started: (.state.running.startedAt // ""),
			last_id: (.lastState.terminated.containerID // ""), last_exit: .lastState.terminated.exitCode,
			last_reason: (.lastState.terminated.reason // "")}))}'
EVENT_FILTER='{t: now, type, reason, kind: .involvedObject.kind, name: .involvedObject.name, count: (.count // 1), message}'

# sampler: every SAMPLE_EVERY seconds, each runtime's pid, RSS (and its
# anonymous part: the rest is file pages, such as the binary's code paged in
# and containerd's mmapped bolt database, which the kernel reclaims), open
# fds, goroutines (its metrics) and how many sandboxes and containers it
# holds, with the load average.
sampler() {
	local n pid rss anon fds gor ctrs load
	while [[ ! -e $SOAK_DIR/.stop ]]; do
		read -r load _ </proc/loadavg
		for n in $(nodes); do
			pid=$(rt_pid "$n" 2>/dev/null) && kill -0 "$pid" 2>/dev/null || pid=0
			rss=null anon=null fds=null gor=null ctrs=null
			if ((pid > 0)); then
				rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
				anon=$(awk '/^RssAnon:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
				fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
				gor=$(rt_metrics "$n" 2>/dev/null | awk '$1 == "go_goroutines" { print $2 }')
				ctrs=$(($(crictl_n "$n" pods -q 2>/dev/null | wc -l) + $(crictl_n "$n" ps -a -q 2>/dev/null | wc -l)))
			fi
			printf '{"t":%s,"node":%d,"pid":%d,"rss_kb":%s,"rss_anon_kb":%s,"fds":%s,"goroutines":%s,"containers":%s,"load1":%s}\n' \
				"$(now)" "$n" "$pid" "${rss:-null}" "${anon:-null}" "${fds:-null}" "${gor:-null}" "${ctrs:-null}" "$load" >>"$SOAK_DIR/samples.jsonl"
		done
		sleep "$SAMPLE_EVERY"
	done
}

# plugin_log_keeper: hard links of the plugins' container log files (the
# kubelet's, under each node's /var/log/pods), made as soon as a file
# appears: the kubelet deletes them with a dead container or the pod, the
# links keep them, and what the plugin still writes, for the checks. One
# link per file (by inode): a rotated file is another inode.
plugin_log_keeper() {
	local n rel ino dst
	while [[ ! -e $SOAK_DIR/.stop-logs ]]; do
		for n in $(nodes); do
			while read -r ino rel; do
				dst=$SOAK_DIR/plugin-logs/n$n/$rel.$ino
				[[ -e $dst ]] && continue
				mkdir -p "$(dirname "$dst")"
				ln "$(node_pod_logs "$n")/$rel" "$dst" 2>/dev/null
			done < <(find "$(node_pod_logs "$n")" -mindepth 3 -maxdepth 3 -path "*/${DS_NS}_*" -type f -printf '%i %P\n' 2>/dev/null)
		done
		sleep 1
	done
}

# --- snapshots ----------------------------------------------------------------

# snapshot N: node N's sandboxes and containers as its runtime lists them,
# and the environment of the soak's running containers, into
# snapshots/T-nN.json.
snapshot() {
	local n=$1 t pods ctrs ids env='[]' id
	t=$(now)
	pods=$(crictl_n "$n" pods -o json 2>/dev/null) && ctrs=$(crictl_n "$n" ps -a -o json 2>/dev/null) || return 0
	ids=$(jq -r --arg ns "$SOAK_NS" '.containers[] | select(.state == "CONTAINER_RUNNING" and .labels["io.kubernetes.pod.namespace"] == $ns) | .id' <<<"$ctrs")
	for id in $ids; do
		env=$(crictl_n "$n" inspect -o json "$id" 2>/dev/null | jq -c --arg id "$id" --argjson e "$env" \
			'$e + [{id: $id, env: (.info.runtimeSpec.process.env // [])}]' 2>/dev/null || echo "$env")
	done
	jq -cn --argjson t "$t" --argjson n "$n" --argjson p "$pods" --argjson c "$ctrs" --argjson e "$env" '{t: $t, node: $n,
		pods: [$p.items[] | {id, state, ns: .metadata.namespace, name: .metadata.name, uid: .metadata.uid}],
		containers: [$c.containers[] | {id, sandbox: .podSandboxId, state, name: .metadata.name,
			ns: .labels["io.kubernetes.pod.namespace"], pod: .labels["io.kubernetes.pod.name"], uid: .labels["io.kubernetes.pod.uid"]}],
		env: $e}' >"$SOAK_DIR/snapshots/$t-n$n.json"
}

# soak_check: snapshots of every node, then the invariants on what is
# complete (tools/nri-soak check -live); the first violation stops the
# soak.
LAST_CHECK=0 LAST_OUT=
soak_check() {
	local n out
	LAST_CHECK=$SECONDS
	for n in $(nodes); do snapshot "$n"; done
	out=$("$NRI_SOAK" check -dir "$SOAK_DIR" -logs "$K8S_WORK/logs" -live -until "$(now)")
	case $? in
	0) return 0 ;;
	1)
		[[ $out == "$LAST_OUT" ]] || say "$out"
		LAST_OUT=$out
		[[ -n ${SOAK_KEEP_GOING:-} ]] || STOP=${STOP:-violation}
		;;
	*) say "the check could not read the records: $out"; STOP=${STOP:-"check failed"} ;;
	esac
}

# --- node health and healing ----------------------------------------------------

# plugins_ready N: node N's runtime reports every required plugin ready.
plugins_ready() {
	[[ $(crictl_n "$1" info 2>/dev/null | jq -r '.status.conditions[] | select(.type == "NRIPluginsReady") | .status') == true ]]
}

# node_back N SINCE: wait until node N's runtime and kubelet answer and its
# runtime reports every required plugin ready. A plugin the kubelet holds
# in its restart back-off past KICK_AFTER is restarted (DETAIL[kicked]);
# a node not back RECOVER_WITHIN seconds after is a violation.
node_back() {
	local n=$1 start=$SECONDS kicked=0 p ds
	while :; do
		if crictl_n "$n" info >/dev/null 2>&1 && curl -sf --max-time 2 "http://$(node_ip "$n"):10248/healthz" >/dev/null 2>&1 &&
			plugins_ready "$n"; then
			return 0
		fi
		if ((kicked == 0 && SECONDS - start > KICK_AFTER)); then
			kicked=1
			for ds in "$DS_NAME" "$DS2_NAME"; do
				p=$(ds_pod "$n" "$ds")
				[[ -n $p ]] && kc -n "$DS_NS" delete pod "$p" --wait=false >/dev/null 2>&1
			done
			DETAIL[kicked]=${DETAIL[kicked]:+${DETAIL[kicked]} }$(node_name "$n")
		fi
		if ((SECONDS - start > RECOVER_WITHIN)); then
			soak_violation recovery "$n" "$(node_name "$n") not back ${RECOVER_WITHIN}s after fault #$FAULT_ID ($(crictl_n "$n" info 2>/dev/null | jq -c '[.status.conditions[] | select(.status == false) | {type, reason, message}]' 2>/dev/null || echo "runtime not answering"))"
			return 1
		fi
		sleep 0.5
	done
}

all_back() {
	local n rc=0
	for n in $(nodes); do node_back "$n" || rc=1; done
	return $rc
}

# heal: whatever a fault left undone, undone: the plugin's control file
# back to "ok", each runtime and kubelet running, CRI-O's policy back to
# "fail", both DaemonSets applied; then every node back.
declare -A FLIPPED
heal() {
	local n pid
	for n in $(nodes); do
		plugin_fault "$n" ok 2>/dev/null
		pid=$(rt_pid "$n" 2>/dev/null)
		if [[ -z $pid ]] || ! kill -0 "$pid" 2>/dev/null; then
			say "heal: starting node $n's runtime"
			soak_start_runtime "$n" || say "heal: node $n's runtime did not start"
		fi
		pid=$(cat "$(node_dir "$n")/kubelet.pid" 2>/dev/null)
		if [[ -z $pid ]] || ! kill -0 "$pid" 2>/dev/null; then
			say "heal: starting node $n's kubelet"
			kubelet_start "$n" || say "heal: node $n's kubelet did not start"
		fi
		if [[ -n ${FLIPPED[$n]:-} ]]; then
			rt_reload "$n" "${POLICY[$n]}" "$(rt_dropin2 "$n")" && unset "FLIPPED[$n]"
		fi
	done
	soak_ds_apply
	ds_apply "$DS2_NAME"
	all_back
}

# --- the faults -----------------------------------------------------------------

# poke N NAME: a bare pod NAME-ID (ID: the fault's) pinned to node N (the
# soak's self-checking container), so that a fault meets a gated request
# on that node whatever the churn does; prints its name.
poke() {
	jq -n --arg name "$2-$FAULT_ID" --arg ns "$SOAK_NS" --argjson t "$(pod_template "$1" poke)" \
		'{apiVersion: "v1", kind: "Pod", metadata: ($t.metadata + {name: $name, namespace: $ns}), spec: $t.spec}' |
		kc create -f - >/dev/null && echo "$2-$FAULT_ID"
}

# noticed N SINCE: wait (up to 10 s) for node N's runtime to report a
# required plugin not ready after SINCE (its CRI Status watcher's log);
# DETAIL[noticed_ms].
noticed() {
	local t
	t=$(timeout 10 bash -c "source '$REPO_ROOT/test/k8s/lib.bash'; cristatus_first $1 nripluginsready.log NRIPluginsReady=false $2") &&
		DETAIL[noticed_ms]=$(ms "$2" "$t") || DETAIL[noticed_ms]="not within 10s"
}

fault_plugin_kill() {
	local n=$1 pid t0
	pid=$(plugin_pid "$n") || { DETAIL[skipped]="no running plugin"; return 0; }
	t0=$(now)
	kill -KILL "$pid"
	DETAIL[pid]=$pid
	noticed "$n" "$t0"
	node_back "$n"
}

# The plugin holds every gated request on node N past the runtime's
# request timeout for the hold; a pod created on N meets it.
fault_plugin_hang() {
	local n=$1 hold=$2 t0 l
	t0=$(now)
	plugin_fault "$n" hang 10m
	DETAIL[pod]=$(poke "$n" hang)
	sleep "$hold"
	plugin_fault "$n" ok
	l=$(plugin_log_after "$n" "$t0" ' hang ' 1) && DETAIL[first_hang]=${l#* }
	node_back "$n"
}

fault_plugin_roll() {
	local t0=$(now) n
	if [[ $CUR_IDX == "$PLUGIN_IDX" ]]; then CUR_IDX=$PLUGIN_IDX_NEXT CUR_IMAGE=$PLUGIN_IMAGE_NEXT; else CUR_IDX=$PLUGIN_IDX CUR_IMAGE=$PLUGIN_IMAGE; fi
	DETAIL[to]="$CUR_IMAGE, index $CUR_IDX"
	soak_ds_apply || return
	kc -n "$DS_NS" rollout status ds/"$DS_NAME" --timeout=300s >/dev/null || DETAIL[rollout]="not complete in 300s"
	for n in $(nodes); do
		plugin_ready_after "$n" "$t0" 120 >/dev/null || true
	done
	all_back
}

fault_runtime_kill() {
	local n=$1 hold=$2
	rt_kill "$n"
	sleep "$hold"
	soak_start_runtime "$n" || { DETAIL[start]=failed; }
	node_back "$n"
}

# The plugin holds the RunPodSandbox of a pod this fault creates on node N
# (its request timeout: NRI_REQUEST_TIMEOUT); the runtime is killed as soon
# as the plugin logged it. DETAIL[held]: whether the kill came before the
# runtime's timeout.
fault_runtime_kill_held() {
	local n=$1 hold=$2 t0 l t_hang t_kill p
	t0=$(now)
	plugin_fault "$n" hang 10m
	p=$(poke "$n" held) && DETAIL[pod]=$p
	if l=$(plugin_log_after "$n" "$t0" "hang RunPodSandbox .* pod=$SOAK_NS/$p " 60); then
		t_kill=$(now)
		rt_kill "$n"
		t_hang=$(rfc_epoch "${l%% *}")
		DETAIL[hang_to_kill_ms]=$(ms "$t_hang" "$t_kill")
		DETAIL[held]=$(awk -v a="$t_hang" -v b="$t_kill" -v to="$(seconds "${NRI_REQUEST_TIMEOUT:-2s}")" 'BEGIN { print (b - a < to) ? "yes" : "no" }')
	else
		DETAIL[held]="no hang logged in 60s"
		rt_kill "$n"
	fi
	plugin_fault "$n" ok
	sleep "$hold"
	soak_start_runtime "$n" || { DETAIL[start]=failed; }
	node_back "$n"
}

fault_kubelet_restart() {
	local n=$1 hold=$2
	kubelet_stop "$n"
	sleep "$hold"
	kubelet_start "$n" || DETAIL[start]=failed
	node_back "$n"
}

fault_node_restart() {
	local n=$1 hold=$2 t_rt p
	kubelet_stop "$n"
	rt_stop "$n"
	DETAIL[processes_killed]=$(pods_kill "$n")
	sleep "$hold"
	soak_start_runtime "$n" || DETAIL[start]=failed
	t_rt=$(now)
	kubelet_start "$n" || DETAIL[kubelet]=failed
	node_back "$n" || return
	if npd_available; then
		wait_until 180 "p=\$(npd_pod $n) && [[ -n \$p ]] && kc -n $NPD_NS wait --for=condition=Ready pod/\$p --timeout=5s >/dev/null 2>&1" ||
			DETAIL[npd]="not Ready in 180s"
	fi
}

# CRI-O reloaded with fail_policy "ignore"; meanwhile the plugin holds
# every gated request past the request timeout (and is disconnected for
# it, and restarts), and a pod is created on the node, so that requests go
# through without it, as "ignore" says; reloaded back to "fail".
fault_ignore_flip() {
	local n=$1 hold=$2
	if ! rt_reload "$n" "${POLICY_IGNORE[$n]}" "$(rt_dropin2 "$n")"; then
		DETAIL[reload]="to ignore failed"
		return 1
	fi
	FLIPPED[$n]=1
	fail_policy_is "$n" ignore || DETAIL[confirm]="crictl info did not show ignore in 10s"
	plugin_fault "$n" hang 10m
	DETAIL[pod]=$(poke "$n" ignore)
	sleep "$hold"
	plugin_fault "$n" ok
	if rt_reload "$n" "${POLICY[$n]}" "$(rt_dropin2 "$n")"; then
		unset "FLIPPED[$n]"
		fail_policy_is "$n" fail || DETAIL[confirm_back]="crictl info did not show fail in 10s"
	else
		DETAIL[reload_back]=failed
	fi
	node_back "$n"
}

# fail_policy_is N POLICY: node N's runtime reports the plugin's
# fail_policy as POLICY (crictl info's nri entry), within 10 s.
fail_policy_is() {
	wait_until 10 "[[ \$(crictl_n $1 info | jq -r '.nri.plugins[]? | select(.key == \"$POLICY_KEY\") | .fail_policy' | sort -u) == $2 ]]"
}

fault_plugin2_down() {
	local hold=$2
	ds_delete "$DS2_NAME"
	sleep "$hold"
	ds_apply "$DS2_NAME"
	all_back
}

# --- the run --------------------------------------------------------------------

churn_loop() {
	local at op n arg t0=$1 wait ok pods
	while read -r at op n arg; do
		[[ -e $SOAK_DIR/.stop-churn ]] && break
		wait=$(awk -v a="$at" -v t0="$t0" -v now="$(now)" 'BEGIN { w = t0 + a - now; print (w > 0) ? w : 0 }')
		sleep "$wait"
		[[ -e $SOAK_DIR/.stop-churn ]] && break
		ok=true
		case $op in
		scale-*) kc -n "$SOAK_NS" scale "deploy/${op#scale-}-$n" --replicas="$arg" --request-timeout=30s >/dev/null 2>&1 || ok=false ;;
		job) soak_job "$n" "$arg" 2>/dev/null || ok=false ;;
		rest) soak_rest "$arg" || ok=false ;;
		delete)
			pods=($(kc -n "$SOAK_NS" get pods -l "soak-node=$n" --request-timeout=30s -o json 2>/dev/null |
				jq -r '.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name'))
			if ((${#pods[@]} > 0)); then
				kc -n "$SOAK_NS" delete pod "${pods[arg % ${#pods[@]}]}" --wait=false --request-timeout=30s >/dev/null 2>&1 || ok=false
			else
				ok=false
			fi
			;;
		esac
		printf '{"t":%s,"op":"%s","node":%d,"arg":%d,"ok":%s}\n' "$(now)" "$op" "$n" "$arg" "$ok" >>"$SOAK_DIR/churn.jsonl"
	done <"$SOAK_DIR/churn.tsv"
}

# soak_rest HOLD: the churn rests (tools/nri-soak's plan: a long soak's
# growth is judged at its rests): once no fault is in progress (the fault
# loop starts none meanwhile), the Deployments are scaled to zero, the
# Jobs and the faults' bare pods deleted; once no pod of the soak is left in
# the API server and no container of the soak runs on any node, the
# runtimes are sampled for HOLD seconds (rest_hold); then the Deployments
# are scaled back. rests.jsonl
# says when, or why the rest was not quiet.
# REST_SETTLE: the kubelet's clean-up of the deleted pods, and what a fault
# that just ended left (a plugin's pod started again holds a dozen of
# CRI-O's fds for most of a minute).
REST_DRAIN=120 REST_SETTLE=30
soak_rest() {
	local hold=$1 t0 deadline name replicas saved bare
	t0=$(now)
	touch "$SOAK_DIR/.resting"
	deadline=$((SECONDS + 240))
	while [[ -e $SOAK_DIR/.fault-active ]] && ((SECONDS < deadline)); do sleep 1; done
	if [[ -e $SOAK_DIR/.fault-active ]]; then
		rest_record "$t0" 0 0 0 "a fault still in progress after 240s"
		rm -f "$SOAK_DIR/.resting"
		return 1
	fi
	saved=$(kc -n "$SOAK_NS" get deploy -o json --request-timeout=30s | jq -r '.items[] | "\(.metadata.name) \(.spec.replicas)"')
	kc -n "$SOAK_NS" scale deploy --all --replicas=0 --request-timeout=30s >/dev/null 2>&1
	kc -n "$SOAK_NS" delete jobs --all --wait=false --request-timeout=30s >/dev/null 2>&1
	# And the bare pods the faults made (poke).
	mapfile -t bare < <(kc -n "$SOAK_NS" get pods -o json --request-timeout=30s |
		jq -r '.items[] | select((.metadata.ownerReferences // []) == []) | .metadata.name')
	((${#bare[@]} == 0)) || kc -n "$SOAK_NS" delete pod "${bare[@]}" --wait=false --request-timeout=30s >/dev/null 2>&1
	rest_hold "$t0" "$hold"
	local rc=$?
	while read -r name replicas; do
		[[ -n $name ]] && kc -n "$SOAK_NS" scale "deploy/$name" --replicas="$replicas" --request-timeout=30s >/dev/null 2>&1
	done <<<"$saved"
	rm -f "$SOAK_DIR/.resting"
	return "$rc"
}

# rest_quiet: no pod of the soak in the API server (the kubelet has
# stopped every one that was deleted) and no container of the soak running
# on any node.
rest_quiet() {
	local n
	[[ $(kc -n "$SOAK_NS" get pods -o name --request-timeout=30s 2>/dev/null | wc -l) == 0 ]] || return 1
	for n in $(nodes); do
		[[ -z $(crictl_n "$n" ps -q --label "io.kubernetes.pod.namespace=$SOAK_NS" 2>/dev/null) ]] || return 1
	done
}

# rest_hold T0 HOLD: once rest_quiet (up to REST_DRAIN seconds), REST_SETTLE
# seconds for the kubelet's clean-up, then HOLD seconds of samples, recorded
# in rests.jsonl (from, to: the samples of the rest).
rest_hold() {
	local t0=$1 hold=$2 deadline quiet from
	deadline=$((SECONDS + REST_DRAIN))
	until rest_quiet; do
		((SECONDS < deadline)) || { rest_record "$t0" 0 0 0 "soak pods still there ${REST_DRAIN}s after the churn rested"; return 1; }
		sleep 2
	done
	quiet=$(now)
	sleep "$REST_SETTLE"
	from=$(now)
	sleep "$hold"
	rest_record "$t0" "$quiet" "$from" "$(now)" ""
}

rest_record() {
	jl rests.jsonl --argjson b "$1" --argjson q "$2" --argjson f "$3" --argjson t "$4" --arg why "$5" \
		'{begin: $b, quiet: $q, from: $f, to: $t, ok: ($why == ""), why: $why}'
	[[ -z $5 ]] || say "the rest begun at $(date -u -d "@${1%.*}" +%T) was not quiet: $5"
}

# soak_sleep SECONDS: sleep, checking the invariants when due, until
# SECONDS passed or the soak is to stop.
soak_sleep() {
	local end
	end=$(awk -v s="$1" -v t="$(now)" 'BEGIN { printf "%.6f", t + s }')
	while [[ -z ${STOP:-} ]] && awk -v e="$end" -v t="$(now)" 'BEGIN { exit !(t < e) }'; do
		((SECONDS - LAST_CHECK >= CHECK_EVERY)) && soak_check
		sleep 1
	done
}

# settle: once the faults have ended and the cluster is healed, wait until
# no soak pod is Pending or waiting for a container to be created, up to
# SOAK_SETTLE_BOUND seconds (tools/nri-soak checks the bound from the pod
# watch).
settle() {
	local deadline=$((SECONDS + SOAK_SETTLE_BOUND + 10)) left
	while ((SECONDS < deadline)); do
		left=$(kc -n "$SOAK_NS" get pods -o json 2>/dev/null | jq '[.items[] | select(.metadata.deletionTimestamp == null) |
			select(.status.phase == "Pending" or any((.status.containerStatuses // [])[], (.status.initContainerStatuses // [])[];
				.state.waiting.reason | IN("ContainerCreating", "PodInitializing", "CreateContainerError",
					"CreateContainerConfigError", "RunContainerError")))] | length')
		[[ $left == 0 ]] && { run_set settled "$(now)"; return 0; }
		sleep 2
	done
	say "pods still Pending/ContainerCreating ${SOAK_SETTLE_BOUND}s after the heal"
}

# leak_snapshot N: what node N holds, next to the API server's pods of the
# node, into leaks/T-nN.json (tools/nri-soak leaks): the runtime's lists
# (sandboxes with their runtime spec's namespace paths and root), runc's
# containers, mounts under the node's directory and /run/netns in its mount
# namespace, the namespace pins, the CNI IP allocations, the cgroups under
# the kubelet's cgroup root. DIR (default leaks): another directory under
# SOAK_DIR, such as leaks-before.
leak_snapshot() {
	local n=$1 out=${2:-leaks} t d api pods ctrs sbx=() cx=() id pins runc mounts ipam cgroups h cg
	t=$(now)
	d=$(node_dir "$n")
	api=$(kc get pods -A -o json --field-selector "spec.nodeName=$(node_name "$n")" | jq -c '[.items[] | {uid: .metadata.uid, ns: .metadata.namespace, name: .metadata.name}]') || return 1
	pods=$(crictl_n "$n" pods -o json) && ctrs=$(crictl_n "$n" ps -a -o json) || return 1
	for id in $(jq -r '.items[].id' <<<"$pods"); do
		sbx+=("$(crictl_n "$n" inspectp -o json "$id" 2>/dev/null | jq -c --arg id "$id" \
			'{id: $id, ns_paths: [.info.runtimeSpec.linux.namespaces[]? | .path // empty | select(. != "")], root: (.info.runtimeSpec.root.path // "")}' ||
			jq -cn --arg id "$id" '{id: $id, ns_paths: [], root: ""}')")
	done
	for id in $(jq -r '.containers[].id' <<<"$ctrs"); do
		cx+=("$(crictl_n "$n" inspect -o json "$id" 2>/dev/null | jq -c '.info.runtimeSpec.root.path // ""' || echo '""')")
	done
	runc=$(find "$d/$(node_rt "$n")/runc" -name state.json -printf '%h\n' 2>/dev/null | xargs -rn1 basename | jq -Rsc 'split("\n") | map(select(. != ""))')
	# Every path the node's runtime and kubelet mount under is the node's
	# directory, but /run/netns: the mounts the namespace copied from the
	# host when it was made (another runtime's, on a shared machine) are
	# not the node's.
	mounts=$(in_ns "$n" cat /proc/self/mountinfo | awk -v d="$d/" '
		{ m = $5 } index(m, d) == 1 || index(m, "/run/netns/") == 1 { print m }' | jq -Rsc 'split("\n") | map(select(. != ""))')
	case $(node_rt "$n") in
	crio) pins=$(find "$d/crio/state/ns" -mindepth 2 -maxdepth 2 -type f 2>/dev/null) ;;
	containerd) pins=$(find "$d/containerd/state" -path '*netns*' -type f 2>/dev/null) ;;
	esac
	# And what `ip netns` lists in the node's mount namespace (its
	# /run/netns): neither runtime pins there here, so anything is a leak.
	pins+=$'\n'$(in_ns "$n" ip netns list 2>/dev/null | awk '{ print "/run/netns/" $1 }')
	pins=$(jq -Rsc 'split("\n") | map(select(. != ""))' <<<"$pins")
	ipam=$(for f in "$d"/cni-ipam/*/*; do
		[[ -f $f && $(basename "$f") != last_reserved_ip* && $(basename "$f") != lock ]] || continue
		jq -cn --arg ip "$(basename "$f")" --arg o "$(head -1 "$f")" '{ip: $ip, owner: $o}'
	done | jq -sc .)
	cg=$(node_cgroup_root "$n")
	cgroups=$(for h in /sys/fs/cgroup/*/; do
		[[ -d $h${cg#/} ]] && find "$h${cg#/}" -mindepth 1 -type d -printf "$(basename "$h"):%P\n" 2>/dev/null
	done | jq -Rsc 'split("\n") | map(select(. != ""))')
	jq -cn --argjson t "$t" --argjson n "$n" --argjson api "$api" --argjson p "$pods" --argjson c "$ctrs" \
		--argjson sx "$(printf '%s\n' "${sbx[@]}" | jq -sc .)" --argjson cx "$(printf '%s\n' "${cx[@]}" | jq -sc .)" \
		--argjson runc "$runc" --argjson mounts "$mounts" --argjson pins "$pins" --argjson ipam "$ipam" --argjson cgroups "$cgroups" '
		($sx | map({(.id): .}) | add // {}) as $spec | {t: $t, node: $n, api: $api,
		pods: [$p.items[] | {id, state, ns: .metadata.namespace, name: .metadata.name, uid: .metadata.uid, ns_paths: ($spec[.id].ns_paths // [])}],
		containers: [$c.containers[] | {id, sandbox: .podSandboxId, state, name: .metadata.name,
			ns: .labels["io.kubernetes.pod.namespace"], pod: .labels["io.kubernetes.pod.name"], uid: .labels["io.kubernetes.pod.uid"]}],
		roots: ([$sx[].root] + $cx | map(select(. != ""))),
		runc: $runc, mounts: $mounts, pins: $pins, ipam: $ipam, cgroups: $cgroups}' >"$SOAK_DIR/$out/$t-n$n.json"
}

# leaks_settle: leak snapshots of every node until none holds anything
# unaccounted for, or SOAK_LEAK_BOUND seconds passed (the kubelet removes
# the sandboxes of deleted pods in its garbage collection, every minute).
leaks_settle() {
	local deadline=$((SECONDS + SOAK_LEAK_BOUND)) n clean
	while :; do
		rm -f "$SOAK_DIR"/leaks/*.json
		for n in $(nodes); do leak_snapshot "$n" || say "leak snapshot of node $n failed"; done
		clean=$("$NRI_SOAK" leaks -dir "$SOAK_DIR" 2>&1) && return 0
		((SECONDS < deadline)) || { say "left after ${SOAK_LEAK_BOUND}s: $clean"; return 1; }
		sleep 10
	done
}

soak_setup() {
	local n
	for n in $(nodes); do
		POLICY[$n]=$(soak_dropin "$n" base) && POLICY_IGNORE[$n]=$(soak_dropin "$n" ignore fail_policy='"ignore"') || return
		rt_stop "$n" && soak_start_runtime "$n" || return
	done
	kc delete namespace "$SOAK_NS" --ignore-not-found --wait=true --timeout=180s >/dev/null || return
	soak_ds_apply && ds_apply "$DS2_NAME" || return
	ds_wait_ready 180s && ds_wait_ready 180s "$DS2_NAME" || return
	for n in $(nodes); do
		node_back "$n" || return
		node_wait_ready "$n" 120s || return
		if npd_available; then node_wait_condition "$n" "$NPD_CONDITION" False 120s || return; fi
	done
	ns_create "$SOAK_NS" && soak_workloads
}

soak_teardown_cluster() {
	[[ $SOAK_CLUSTER == new ]] || return 0
	K8S_RESULTS=$SOAK_DIR/k8s k8s_down
}

main() {
	command -v jq >/dev/null || die "jq not found (make install-deps)"
	local dur
	dur=$(seconds "${SOAK_DURATION:-30m}")
	[[ $dur =~ ^[0-9]+$ && $dur -gt 0 ]] || die "SOAK_DURATION=$SOAK_DURATION: a duration such as 30m, 300s, 1h"
	SOAK_SEED=${SOAK_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
	[[ $SOAK_SEED =~ ^[0-9]+$ ]] || die "SOAK_SEED=$SOAK_SEED: a non-negative integer"
	SOAK_COMMAND=${SOAK_COMMAND:-make soak SOAK_DURATION=${SOAK_DURATION:-30m} SOAK_SEED=$SOAK_SEED${SOAK_KINDS:+ SOAK_KINDS=$SOAK_KINDS}}
	echo "SOAK_SEED=$SOAK_SEED SOAK_DURATION=${SOAK_DURATION:-30m} (to run it again: $SOAK_COMMAND)"

	rm -rf "$SOAK_DIR" && mkdir -p "$SOAK_DIR"/{snapshots,leaks,leaks-before,plugin-logs,logs,bin} || die "cannot create $SOAK_DIR"
	NRI_SOAK=$SOAK_DIR/bin/nri-soak
	(cd "$REPO_ROOT" && go build -o "$NRI_SOAK" ./tools/nri-soak) || die "cannot build tools/nri-soak"
	local digest
	digest=$("$NRI_SOAK" plan -seed "$SOAK_SEED" -duration "${dur}s" -nodes "$K8S_NODES" ${SOAK_KINDS:+-kinds "$SOAK_KINDS"} \
		-faults "$SOAK_DIR/faults.tsv" -churn "$SOAK_DIR/churn.tsv") || die "cannot draw the plan"
	say "plan $digest: $(wc -l <"$SOAK_DIR/churn.tsv") churn operations; faults in the order drawn until ${dur}s have passed"

	case $SOAK_CLUSTER in
	new)
		trap 'soak_teardown_cluster' EXIT
		say "starting the cluster (test/k8s/lib.bash k8s_up)"
		K8S_RESULTS=$SOAK_DIR/k8s k8s_up 3>&1 || die "the cluster did not come up (see above; logs in $SOAK_DIR/k8s/logs)"
		;;
	reuse)
		[[ -n ${K8S_WORK:-} && -d $K8S_WORK && -n ${KUBECONFIG:-} ]] || die "SOAK_CLUSTER=reuse: no cluster (K8S_WORK and KUBECONFIG of a running test/k8s cluster)"
		kc get --raw /readyz >/dev/null 2>&1 || die "SOAK_CLUSTER=reuse: the API server of $K8S_WORK does not answer"
		;;
	*) die "SOAK_CLUSTER=$SOAK_CLUSTER: new or reuse" ;;
	esac
	local n rt_versions=()
	for n in $(nodes); do
		[[ -S $(node_cri_sock "$n") ]] || die "node $n's runtime socket $(node_cri_sock "$n") is missing"
	done

	say "setting up: each runtime with the soak's policy, both plugins' DaemonSets, namespace $SOAK_NS"
	soak_setup || die "the cluster did not come up with the soak's policy (logs in $K8S_WORK/logs)"
	# What the nodes hold unaccounted for before the first fault (on a
	# reused cluster, what the tests before left) is not the soak's.
	for n in $(nodes); do leak_snapshot "$n" leaks-before || die "leak snapshot of node $n failed"; done
	local nodes_json='[]' v
	for n in $(nodes); do
		v=$(kc get node "$(node_name "$n")" -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}')
		nodes_json=$(jq -c --argjson n "$n" --arg name "$(node_name "$n")" --arg rt "$(node_rt "$n")" --arg v "$v" \
			--arg r "$(node_readiness "$n")" '. + [{n: $n, name: $name, runtime: $rt, version: $v, readiness: $r}]' <<<"$nodes_json")
	done
	local npd='{"available": false}'
	if npd_available; then
		npd=$(jq -cn --argjson b "$((NPD_INTERVAL + 2))" --arg c "$NPD_CONDITION" '{available: true, bound: $b, condition: $c}')
	else
		npd=$(jq -cn --arg w "$(npd_unavailable_reason)" '{available: false, why: $w}')
		[[ ${CI:-} == true ]] && die "node-problem-detector not built: $(npd_unavailable_reason)"
	fi
	local t0 rwait w
	# The longest registration_wait of the policies (a request keeps the
	# policy it started with for that long, and the request timeout).
	rwait=0
	for w in $(sed -n 's/^\s*registration_wait\s*=\s*"\(.*\)".*/\1/p' "${POLICY[@]}" "${POLICY_IGNORE[@]}"); do
		w=$(seconds "$w")
		[[ $w =~ ^[0-9]+$ ]] && ((w > rwait)) && rwait=$w
	done
	t0=$(now)
	jq -n --argjson seed "$SOAK_SEED" --arg digest "$digest" --argjson d "$dur" --arg cmd "$SOAK_COMMAND" --argjson t0 "$t0" \
		--arg ns "$SOAK_NS" --argjson nodes "$nodes_json" --argjson npd "$npd" \
		--argjson settle "$SOAK_SETTLE_BOUND" --argjson leak "$SOAK_LEAK_BOUND" --argjson gmin "$SOAK_GROWTH_MIN" \
		--argjson rto "$(seconds "${NRI_REQUEST_TIMEOUT:-2s}")" \
		--argjson rwait "$rwait" --arg git "$(git -C "$REPO_ROOT" describe --always --dirty 2>/dev/null)" \
		--arg cpus "$(nproc)" --arg mem "$(free -g | awk '/^Mem:/ { print $2 " GiB" }')" \
		--arg note "${SOAK_MACHINE_NOTE:-shared with other work: see the load average}" \
		--arg k1 "$POLICY_KEY" --arg e1 "$INJECTION" --argjson x1 "$EXIT1" \
		--arg k2 "$POLICY_KEY2" --arg e2 "$INJECTION2" --argjson x2 "$EXIT2" '{
		seed: $seed, digest: $digest, duration: $d, command: $cmd, start: $t0, namespace: $ns, nodes: $nodes,
		plugins: [{ds: "device-injector", key: $k1, env: $e1, exit: $x1}, {ds: "ulimit-adjuster", key: $k2, env: $e2, exit: $x2}],
		npd: $npd, settle_bound: $settle, leak_bound: $leak, growth_min: $gmin, request_timeout: $rto, registration_wait: $rwait, git: $git,
		machine: {cpus: $cpus, memory: $mem, note: $note}}' >"$SOAK_DIR/run.json"

	bg watch_loop pods.jsonl "$POD_FILTER" -n "$SOAK_NS" get pods -w --output-watch-events -o json
	bg watch_loop events.jsonl "$EVENT_FILTER" -n "$SOAK_NS" get events -w -o json
	bg sampler
	bg plugin_log_keeper
	bg churn_loop "$t0"
	local churn_pid=$!
	trap 'STOP=${STOP:-interrupted}; say "SIGINT: no more faults; healing, checking, writing the summary"' INT

	say "faults for ${dur}s from now (seed $SOAK_SEED)"
	local gap kind node hold deadline
	deadline=$(awk -v t="$t0" -v d="$dur" 'BEGIN { printf "%.6f", t + d }')
	LAST_CHECK=$SECONDS
	while read -r gap kind node hold <&4; do
		soak_sleep "$gap"
		[[ -z ${STOP:-} ]] || break
		awk -v e="$deadline" -v t="$(now)" 'BEGIN { exit !(t < e) }' || break
		# Not while the churn rests (soak_rest): it waits for a fault in
		# progress, and a fault waits for it.
		touch "$SOAK_DIR/.fault-active"
		while [[ -e $SOAK_DIR/.resting && -z ${STOP:-} ]]; do
			rm -f "$SOAK_DIR/.fault-active"
			soak_sleep 2
			touch "$SOAK_DIR/.fault-active"
		done
		[[ -z ${STOP:-} ]] || { rm -f "$SOAK_DIR/.fault-active"; break; }
		# The plan restarts runtimes only in a long soak's first quarter of
		# planned time, but faults take longer than planned (a runtime
		# killed while a request is held: up to two minutes): one drawn
		# after the first quarter of the time that has passed is skipped,
		# so that each runtime's process outlives its warm-up before the
		# growth check's first rest.
		if ((dur >= GROWTH_PLAN_MIN)) && [[ $kind == @(runtime-kill|runtime-kill-held|node-restart) ]] &&
			awk -v t0="$t0" -v d="$dur" -v t="$(now)" 'BEGIN { exit !(t - t0 > d / 4) }'; then
			rm -f "$SOAK_DIR/.fault-active"
			jl faults-skipped.jsonl --argjson t "$(now)" --arg k "$kind" --argjson n "$node" '{t: $t, kind: $k, node: $n}'
			say "$kind on ${node/#0/every node} skipped: past the first quarter of a long soak"
			continue
		fi
		say "fault #$((FAULT_ID + 1)) $kind on ${node/#0/every node} (hold ${hold}s)"
		fault_begin "$kind" "$node"
		"fault_${kind//-/_}" "$node" "$hold" || say "fault #$FAULT_ID $kind did not go as planned"
		fault_end
		rm -f "$SOAK_DIR/.fault-active"
		say "fault #$FAULT_ID $kind ended after $(since "$FAULT_T0")s"
	done 4<"$SOAK_DIR/faults.tsv"
	run_set faults_end "$(now)"
	[[ -n ${STOP:-} ]] && run_set stop_reason "$(jq -cn --arg s "$STOP" '$s')"
	[[ ${STOP:-} == interrupted ]] && run_set interrupted true

	touch "$SOAK_DIR/.stop-churn"
	wait "$churn_pid" 2>/dev/null
	say "healing"
	heal || say "the cluster did not heal completely"
	run_set heal_end "$(now)"
	settle
	soak_check
	say "deleting namespace $SOAK_NS, then looking for leaks"
	kc delete namespace "$SOAK_NS" --wait=true --timeout=300s >/dev/null || say "namespace $SOAK_NS not deleted in 300s"
	# The last rest, with the soak's pods gone (a long soak's growth is
	# judged at its rests).
	rest_hold "$(now)" "$REST_HOLD"
	touch "$SOAK_DIR/.stop"
	leaks_settle
	touch "$SOAK_DIR/.stop-logs"
	local pid
	for pid in "${BG_PIDS[@]}"; do kill_tree "$pid"; done
	# Only these: the runtimes and kubelets that rt_start and kubelet_start
	# started from here are children of this shell too.
	wait "${BG_PIDS[@]}" 2>/dev/null
	run_set end "$(now)"
	local f
	for f in node-conditions.jsonl $(for n in $(nodes); do echo "n$n-runtime.log n$n-nripluginsready.log n$n-networkready.log n$n-kubelet.log"; done); do
		cp "$K8S_WORK/logs/$f" "$SOAK_DIR/logs/" 2>/dev/null
	done
	local rc=0 out
	out=$("$NRI_SOAK" report -dir "$SOAK_DIR") || rc=$?
	cat "$SOAK_DIR/summary.md" 2>/dev/null
	echo
	case $rc in
	0) say "0 violations (seed $SOAK_SEED); summary and plot in $SOAK_DIR" ;;
	1) say "$out"; say "records and logs kept in $SOAK_DIR (seed $SOAK_SEED)" ;;
	*) say "the report could not be written: $out"; rc=2 ;;
	esac
	return "$rc"
}

# Sourced (a test of its functions), it runs nothing.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	main "$@"
	exit
fi
