#!/usr/bin/env bash
# containerd-test-config.sh DIR [POLICY_TOML_FILE]
#
# Writes DIR/config.toml: a containerd v2.4.2 config whose every state path
# is private to DIR, for running the patched containerd next to others on
# one machine (tests, make parity, the benchmark):
#
#   root DIR/root, state DIR/state, [grpc] DIR/containerd.sock (the CRI
#   endpoint), [ttrpc] DIR/ttrpc.sock, shim socket_dir DIR/shims, runc Root
#   DIR/runc, netns under the state dir, CNI conf_dir DIR/cni with a bridge
#   conflist of its own (plugins from /usr/lib/cni), NRI socket DIR/nri.sock
#   and plugin paths DIR/nri-plugins, DIR/nri-conf, snapshotter overlayfs,
#   cgroupfs (SystemdCgroup = false), restrict_oom_score_adj = true (the pause
#   container's -998 needs CAP_SYS_RESOURCE, which these VMs lack).
#
# POLICY_TOML_FILE is the policy written once in CRI-O syntax: its tables
# below [crio.nri] become the same tables below containerd's NRI plugin
# table, tables and arrays of tables alike, the keys unchanged:
# [crio.nri.required_plugins."NAME"] and
# [[crio.nri.required_plugins."NAME".exempt]] become
# [plugins."io.containerd.nri.v1.nri".required_plugins."NAME"] and
# [[plugins."io.containerd.nri.v1.nri".required_plugins."NAME".exempt]]
# (a misspelt table name below [crio.nri] stays misspelt, for containerd to
# warn about). [crio.nri.default_validator] becomes
# [plugins."io.containerd.nri.v1.nri".default_validator], where the keys
# lose CRI-O's prefixes: nri_enable_default_validator is enable,
# nri_validator_KEY is KEY. Any other table in the file is appended
# unchanged.
#
# Environment overrides (defaults under DIR): NRI_SOCK, NRI_PLUGIN_DIR,
# NRI_PLUGIN_CONFIG_DIR, NRI_PLUGIN_REQUEST_TIMEOUT (1s, as the test suites expect),
# NRI_PLUGIN_REGISTRATION_TIMEOUT (5s), RUNC_ROOT, CNI_CONF_DIR (a conflist
# is written there unless it already holds one), CNI_BRIDGE, CNI_SUBNET,
# PAUSE_IMAGE (registry.k8s.io/pause:3.10.2), RUNC (command -v runc),
# LOG_LEVEL (info), METRICS_ADDRESS (host:port of /v1/metrics; none by default),
# ENABLE_NRI (true; false sets the NRI plugin's disable = true, as the
# benchmark's mode (a)), REQUIRE_CRI (true: required_plugins =
# ["io.containerd.grpc.v1.cri"], as on a Kubernetes node, whose containerd
# is of no use without CRI: a CRI plugin that fails to load, such as for a
# bad NRI plugin policy, stops containerd; false leaves it out, and
# containerd then runs on without CRI, logging "failed to load plugin"),
# FAILPOINT_RUNTIME (false; true adds the runtime handler runc-fp of
# containerd's integration tests, whose shim injects failures a pod's
# io.containerd.runtime.v2.shim.failpoint.* annotations ask for).
#
# Prints the paths it chose as KEY=VALUE lines (CRI_SOCK, NRI_SOCK,
# RUNC_ROOT, CNI_CONF_DIR, CNI_BRIDGE, CONFIG) so a caller can eval them.
set -euo pipefail

dir=${1:?usage: $0 DIR [POLICY_TOML_FILE]}
policy=${2:-}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
[[ -z $policy || -f $policy ]] || { echo "$0: policy file $policy not found" >&2; exit 1; }

NRI_SOCK=${NRI_SOCK:-$dir/nri.sock}
NRI_PLUGIN_DIR=${NRI_PLUGIN_DIR:-$dir/nri-plugins}
NRI_PLUGIN_CONFIG_DIR=${NRI_PLUGIN_CONFIG_DIR:-$dir/nri-conf}
NRI_PLUGIN_REQUEST_TIMEOUT=${NRI_PLUGIN_REQUEST_TIMEOUT:-1s}
NRI_PLUGIN_REGISTRATION_TIMEOUT=${NRI_PLUGIN_REGISTRATION_TIMEOUT:-5s}
RUNC_ROOT=${RUNC_ROOT:-$dir/runc}
CNI_CONF_DIR=${CNI_CONF_DIR:-$dir/cni}
CNI_BRIDGE=${CNI_BRIDGE:-nrc$(printf %s "$dir" | md5sum | cut -c1-10)}
CNI_SUBNET=${CNI_SUBNET:-10.$((150 + RANDOM % 50)).$((RANDOM % 256)).0/24}
PAUSE_IMAGE=${PAUSE_IMAGE:-registry.k8s.io/pause:3.10.2}
RUNC=${RUNC:-$(command -v runc || echo /usr/sbin/runc)}
LOG_LEVEL=${LOG_LEVEL:-info}
METRICS_ADDRESS=${METRICS_ADDRESS:-}
case ${REQUIRE_CRI:-true} in
true) REQUIRED_PLUGINS='required_plugins = ["io.containerd.grpc.v1.cri"]' ;;
false) REQUIRED_PLUGINS= ;;
*) echo "$0: REQUIRE_CRI=$REQUIRE_CRI: true or false" >&2; exit 2 ;;
esac
# The failpoint runtime of containerd's own integration tests (runc-fp, as
# script/test/utils.sh configures it): its shim, containerd-shim-runc-fp-v1,
# must be on containerd's PATH.
FAILPOINT_TOML=
if [[ ${FAILPOINT_RUNTIME:-false} == true ]]; then
	FAILPOINT_TOML='	    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc-fp]
	      runtime_type = "io.containerd.runc-fp.v1"
	      pod_annotations = ["io.containerd.runtime.v2.shim.failpoint.*"]'
fi
case ${ENABLE_NRI:-true} in
true) NRI_DISABLE=false ;;
false) NRI_DISABLE=true ;;
*) echo "$0: ENABLE_NRI=$ENABLE_NRI: true or false" >&2; exit 2 ;;
esac

mkdir -p "$NRI_PLUGIN_DIR" "$NRI_PLUGIN_CONFIG_DIR" "$CNI_CONF_DIR" "$RUNC_ROOT"
if ! compgen -G "$CNI_CONF_DIR/*.conflist" >/dev/null; then
	cat >"$CNI_CONF_DIR/10-containerd-test.conflist" <<-JSON
		{"cniVersion": "1.0.0", "name": "containerd-test", "plugins": [
		  {"type": "bridge", "bridge": "$CNI_BRIDGE", "isGateway": true, "ipMasq": false,
		   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$CNI_SUBNET"}]], "dataDir": "$dir/cni-ipam"}},
		  {"type": "loopback"}]}
	JSON
fi

cat >"$dir/config.toml" <<-TOML
	version = 3
	root = "$dir/root"
	state = "$dir/state"
	$REQUIRED_PLUGINS

	[grpc]
	  address = "$dir/containerd.sock"

	[ttrpc]
	  address = "$dir/ttrpc.sock"

	[debug]
	  level = "$LOG_LEVEL"

	[metrics]
	  address = "$METRICS_ADDRESS"

	[plugins."io.containerd.shim.v1.manager"]
	  socket_dir = "$dir/shims"

	[plugins."io.containerd.cri.v1.runtime"]
	  restrict_oom_score_adj = true
	  netns_mounts_under_state_dir = true
	  enable_selinux = false
	  [plugins."io.containerd.cri.v1.runtime".containerd]
	    default_runtime_name = "runc"
	    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
	      runtime_type = "io.containerd.runc.v2"
	      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
	        BinaryName = "$RUNC"
	        Root = "$RUNC_ROOT"
	        SystemdCgroup = false
	  [plugins."io.containerd.cri.v1.runtime".cni]
	    bin_dirs = ["/usr/lib/cni"]
	    conf_dir = "$CNI_CONF_DIR"

$FAILPOINT_TOML
	[plugins."io.containerd.cri.v1.images"]
	  snapshotter = "overlayfs"
	  [plugins."io.containerd.cri.v1.images".pinned_images]
	    sandbox = "$PAUSE_IMAGE"

	[plugins."io.containerd.nri.v1.nri"]
	  disable = $NRI_DISABLE
	  socket_path = "$NRI_SOCK"
	  plugin_path = "$NRI_PLUGIN_DIR"
	  plugin_config_path = "$NRI_PLUGIN_CONFIG_DIR"
	  plugin_registration_timeout = "$NRI_PLUGIN_REGISTRATION_TIMEOUT"
	  plugin_request_timeout = "$NRI_PLUGIN_REQUEST_TIMEOUT"
TOML

# crio_to_containerd: the policy in CRI-O syntax on stdin, in containerd's
# on stdout (see above).
crio_to_containerd() {
	awk '
		# A table header: [crio.nri.X...] or [[crio.nri.X...]].
		/^[[:space:]]*\[/ {
			validator = 0
			if (match($0, /^[[:space:]]*\[\[?crio\.nri\./)) {
				head = substr($0, 1, RLENGTH - length("crio.nri."))
				rest = substr($0, RLENGTH + 1)
				validator = (rest ~ /^default_validator[[:space:]]*\]/)
				$0 = head "plugins.\"io.containerd.nri.v1.nri\"." rest
			}
			print
			next
		}
		validator && /^[[:space:]]*nri_enable_default_validator[[:space:]]*=/ {
			sub(/nri_enable_default_validator/, "enable")
		}
		validator && /^[[:space:]]*nri_validator_[A-Za-z0-9_]+[[:space:]]*=/ {
			sub(/nri_validator_/, "")
		}
		{ print }
	'
}

if [[ -n $policy ]]; then
	{
		echo
		echo "# policy from $policy (CRI-O tables rewritten for containerd)"
		crio_to_containerd <"$policy"
	} >>"$dir/config.toml"
fi

cat <<-EOF
	CONFIG=$dir/config.toml
	CRI_SOCK=$dir/containerd.sock
	NRI_SOCK=$NRI_SOCK
	RUNC_ROOT=$RUNC_ROOT
	CNI_CONF_DIR=$CNI_CONF_DIR
	CNI_BRIDGE=$CNI_BRIDGE
EOF
