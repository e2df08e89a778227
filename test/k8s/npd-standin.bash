#!/usr/bin/env bash
# test/k8s/npd-standin.bash: what test/k8s runs in place of
# node-problem-detector v1.35.2 where NPD could not be built (the module
# proxy these machines reach does not serve k8s.io/node-problem-detector;
# test/k8s/build-npd.sh). It is NOT node-problem-detector: it does, with
# kubectl, the part of NPD's custom plugin monitor and Kubernetes exporter
# that the test exercises, as NPD v1.35.2's source does it
# (pkg/custompluginmonitor, pkg/exporters/k8sexporter), so that the test's
# assertions hold for both:
#
#  - reads the same config file (plugin "custom", pluginConfig's
#    invoke_interval, timeout, max_output_length,
#    enable_message_change_based_condition_update, skip_initial_status;
#    source, conditions, rules with type, condition, reason, path, args,
#    timeout);
#  - runs every rule at start and then every invoke_interval, each under
#    its timeout (the smaller of the rule's and the global one; killed
#    past it: Unknown, "Timeout when running plugin ..."), its stdout
#    trimmed and cut at max_output_length; exit 0 = OK (condition False),
#    1 = NonOK (True), anything else = Unknown;
#  - a permanent rule changes its condition as NPD's generateStatus does
#    (to True: the rule's reason and the message; to False: the default
#    reason and message; to Unknown: the default reason and the message;
#    True to True with another message only with message-based updates)
#    and each change is a Node event, Warning when True, Normal otherwise,
#    "Node condition T is now: S, reason: R, message: \"M\"";
#  - a temporary rule whose check exits non-zero is a Warning event with
#    the rule's reason and the message;
#  - conditions are patched into the Node's status (strategic merge on
#    type: the kubelet's conditions stay), events are created in default
#    with source component = the config's source, host = the node.
#
# Not done: concurrency limits, metrics, the 5-minute heartbeat resync,
# event aggregation, the other monitors and exporters.
#
# Flags (NPD's spelling, the ones test/k8s passes):
#   --config.custom-plugin-monitor=FILE   one config file
#   --hostname-override=NODE
#   --apiserver-override=URL?inClusterConfig=false&auth=KUBECONFIG
# Others (--port, --prometheus-port, --logtostderr, --v) are ignored.
set -uo pipefail

config="" node="" kubeconfig=""
for a in "$@"; do
	case $a in
	--config.custom-plugin-monitor=*) config=${a#*=} ;;
	--hostname-override=*) node=${a#*=} ;;
	--apiserver-override=*) kubeconfig=$(sed -n 's/.*[?&]auth=\([^&]*\).*/\1/p' <<<"${a#*=}") ;;
	esac
done
[[ -f $config && -n $node && -f $kubeconfig ]] || {
	echo "npd-standin: need --config.custom-plugin-monitor, --hostname-override and --apiserver-override with auth=" >&2
	exit 2
}
log() { echo "$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ) npd-standin: $*" >&2; }
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }

[[ $(jq -r .plugin "$config") == custom ]] || { log "plugin is not \"custom\""; exit 2; }
secs() { # a Go duration of the config (s, ms) in seconds
	local d=$1
	case $d in
	*ms) awk -v v="${d%ms}" 'BEGIN { printf "%.3f", v / 1000 }' ;;
	*s) echo "${d%s}" ;;
	*) log "duration $d: only s and ms here"; exit 2 ;;
	esac
}
interval=$(secs "$(jq -r '.pluginConfig.invoke_interval // "30s"' "$config")")
gtimeout=$(secs "$(jq -r '.pluginConfig.timeout // "5s"' "$config")")
maxlen=$(jq -r '.pluginConfig.max_output_length // 80' "$config")
msgchange=$(jq -r '.pluginConfig.enable_message_change_based_condition_update // false' "$config")
skipinit=$(jq -r '.pluginConfig.skip_initial_status // false' "$config")
source=$(jq -r .source "$config")
nrules=$(jq '.rules | length' "$config")

ts() { date -u +%Y-%m-%dT%H:%M:%SZ; }

# The API server and the credentials of the kubeconfig (files, as the
# kubelet's kubeconfig has them).
kcfg=$(kc config view --raw --minify -o json)
server=$(jq -r '.clusters[0].cluster.server' <<<"$kcfg")
ca=$(jq -r '.clusters[0].cluster["certificate-authority"]' <<<"$kcfg")
cert=$(jq -r '.users[0].user["client-certificate"]' <<<"$kcfg")
key=$(jq -r '.users[0].user["client-key"]' <<<"$kcfg")
# Relative paths are relative to the kubeconfig's directory.
abs() { [[ $1 == /* ]] && echo "$1" || echo "$(dirname "$kubeconfig")/$1"; }
ca=$(abs "$ca") cert=$(abs "$cert") key=$(abs "$key")
[[ -f $ca && -f $cert && -f $key ]] || { log "$kubeconfig: want certificate-authority, client-certificate and client-key files"; exit 2; }

# The conditions' state: STATUS_x REASON_x MESSAGE_x TRANSITION_x per type.
declare -A STATUS REASON MESSAGE TRANSITION DREASON DMESSAGE
while IFS=$'\t' read -r t r m; do
	DREASON[$t]=$r DMESSAGE[$t]=$m
	STATUS[$t]=False REASON[$t]=$r MESSAGE[$t]=$m TRANSITION[$t]=$(ts)
done < <(jq -r '.conditions[] | [.type, .reason, .message] | @tsv' "$config")

patch_conditions() {
	local now t conds="[]"
	now=$(ts)
	for t in "${!STATUS[@]}"; do
		conds=$(jq -c --arg t "$t" --arg s "${STATUS[$t]}" --arg r "${REASON[$t]}" --arg m "${MESSAGE[$t]}" \
			--arg tr "${TRANSITION[$t]}" --arg hb "$now" \
			'. + [{type: $t, status: $s, reason: $r, message: $m, lastTransitionTime: $tr, lastHeartbeatTime: $hb}]' <<<"$conds")
	done
	# A PATCH of nodes/status as NPD's client makes it (kubectl patch
	# would GET nodes/status first, which a node's credentials may not).
	curl -sf -X PATCH --cacert "$ca" --cert "$cert" --key "$key" \
		-H 'Content-Type: application/strategic-merge-patch+json' \
		--data "{\"status\":{\"conditions\":$conds}}" "$server/api/v1/nodes/$node/status" >/dev/null ||
		log "patching the conditions of node $node failed"
}

event() { # event TYPE REASON MESSAGE
	local now
	now=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)
	jq -n --arg n "$node" --arg ty "$1" --arg r "$2" --arg m "$3" --arg src "$source" --arg t "$(ts)" --arg mt "$now" '{
		apiVersion: "v1", kind: "Event", metadata: {generateName: ($n + "."), namespace: "default"},
		involvedObject: {kind: "Node", name: $n, uid: $n}, reason: $r, message: $m, type: $ty,
		source: {component: $src, host: $n}, firstTimestamp: $t, lastTimestamp: $t, eventTime: null, count: 1,
		reportingComponent: $src, reportingInstance: $n}' | kc create -f - >/dev/null || log "creating event $2 failed"
}

# The rules, read once as NPD reads its config at start (a round then costs
# the checks themselves, not a jq per field): RPATH, RARGS (newline-separated),
# RTIMEOUT (seconds: the smaller of the rule's and the global one), RTYPE,
# RREASON, RCONDITION per rule index. Fields are split on US (\x1f), which,
# unlike a tab, keeps empty fields.
declare -a RPATH RARGS RTIMEOUT RTYPE RREASON RCONDITION
for ((i = 0; i < nrules; i++)); do
	IFS=$'\x1f' read -r 'RPATH[i]' 'RTYPE[i]' 'RREASON[i]' 'RCONDITION[i]' rt < <(jq -r --argjson i "$i" \
		'.rules[$i] | [.path, .type, .reason // "", .condition // "", .timeout // ""] | join("\u001f")' "$config")
	RARGS[i]=$(jq -r --argjson i "$i" '.rules[$i].args // [] | .[]' "$config")
	RTIMEOUT[i]=$gtimeout
	if [[ -n $rt ]]; then
		rt=$(secs "$rt")
		awk -v a="$rt" -v b="$gtimeout" 'BEGIN { exit !(a < b) }' && RTIMEOUT[i]=$rt
	fi
done

# run_rule I: runs rule I; prints "CODE<TAB>MESSAGE".
run_rule() {
	local i=$1 path=${RPATH[$1]} out code args=()
	[[ -z ${RARGS[i]} ]] || mapfile -t args <<<"${RARGS[i]}"
	out=$(timeout -s KILL "${RTIMEOUT[i]}" "$path" "${args[@]}" 2>>"${NPD_STANDIN_STDERR:-/dev/null}" | head -c 4096)
	code=${PIPESTATUS[0]}
	out=${out//$'\n'/ }
	out=${out#"${out%%[![:space:]]*}"}
	out=${out%"${out##*[![:space:]]}"}
	if ((code == 137)); then
		out="Timeout when running plugin \"$path\": state - signal: killed. output - \"$out\""
	fi
	printf '%s\t%s\n' "$code" "${out:0:$maxlen}"
}

apply_result() { # apply_result I CODE MESSAGE
	local i=$1 code=$2 msg=$3 type=${RTYPE[$1]} t=${RCONDITION[$1]} reason=${RREASON[$1]} status
	case $code in 0) status=False ;; 1) status=True ;; *) status=Unknown ;; esac
	if [[ $type == temporary ]]; then
		((code >= 1)) && event Warning "$reason" "$msg" && log "event $reason: $msg"
		return
	fi
	local cur=${STATUS[$t]} nr nm
	if [[ $cur == True && $status != True ]]; then
		nr=${DREASON[$t]}
		[[ $status == False ]] && nm=${DMESSAGE[$t]} || nm=$msg
	elif [[ $cur != True && $status == True ]]; then
		nr=$reason nm=$msg
	elif [[ $cur != "$status" ]]; then
		nr=${DREASON[$t]}
		[[ $status == False ]] && nm=${DMESSAGE[$t]} || nm=$msg
	elif [[ $cur == True && ($reason != "${REASON[$t]}" || ($msgchange == true && $msg != "${MESSAGE[$t]}")) ]]; then
		nr=$reason nm=$msg
	else
		return
	fi
	STATUS[$t]=$status REASON[$t]=$nr MESSAGE[$t]=$nm TRANSITION[$t]=$(ts)
	log "condition $t is now $status ($nr: $nm)"
	patch_conditions
	local sev=Normal
	[[ $status == True ]] && sev=Warning
	event "$sev" "$nr" "Node condition $t is now: $status, reason: $nr, message: \"$nm\""
}

trap 'exit 0' TERM INT
log "config $config: every ${interval}s, timeout ${gtimeout}s, $nrules rules, node $node"
[[ $skipinit == true ]] || patch_conditions
start=$EPOCHREALTIME
while :; do
	results=$(
		for ((i = 0; i < nrules; i++)); do
			(printf '%s\t%s\n' "$i" "$(run_rule "$i")") &
		done
		wait
	)
	while IFS=$'\t' read -r i code msg; do
		apply_result "$i" "$code" "$msg"
	done <<<"$results"
	# The next tick of a ticker started at START (a slow round skips ticks).
	d=$(awk -v s="$start" -v iv="$interval" -v now="$EPOCHREALTIME" \
		'BEGIN { n = s + (int((now - s) / iv) + 1) * iv; printf "%.3f", n - now }')
	sleep "$d" &
	wait $!
done
