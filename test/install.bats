#!/usr/bin/env bats
bats_require_minimum_version 1.5.0
# test/install.bats: docs/install.md followed as written, for CRI-O and for
# containerd (make test-install). The blocks of the page marked for the test
# (test/install/recipe.sh extracts them) run in order with bash -e -o
# pipefail, in a clean environment (root's login PATH, HOME, the machine's Go
# cache settings), as an operator would paste them; the git clone of the
# page fetches this checkout's HEAD (git's url.<base>.insteadOf). Runs under
# test/install/namespace.sh (make test-install starts it so): what the recipe
# installs lands in overlays, /usr is read-only, and systemctl is
# test/install/bin/systemctl, because systemd is not PID 1 here. Each test
# then checks the outcome itself: the installed binaries, the running
# runtime, its CRI Status, and a runtime that ignores the drop-in.

load helpers

INSTALL_DOC=$REPO_ROOT/docs/install.md
SRC=/usr/local/src/nrigate
LOGS=$REPO_ROOT/${TESTLOGS:-bin/test-logs}/install

setup_file() {
	[[ -n ${SYSTEMCTL_STATE:-} && $(command -v systemctl) == "$REPO_ROOT/test/install/bin/systemctl" ]] || {
		echo "run me under test/install/namespace.sh (make test-install)" >&2
		return 1
	}
	mkdir -p "$LOGS"
}

setup() {
	require_root
	require_cmd git jq crictl unshare
}

teardown() {
	# Stop whatever the test started (the namespace stops the rest at
	# its end): CRI-O and containerd both serve NRI on /var/run/nri/nri.sock.
	systemctl stop crio containerd 2>/dev/null || true
}

# recipe LOG TAG...: docs/install.md's blocks tagged TAG..., run as written
# in an operator's clean shell; their output goes to $LOGS/LOG.
recipe() {
	local log=$LOGS/$1 script v start=$SECONDS
	shift
	script=$("$REPO_ROOT/test/install/recipe.sh" "$INSTALL_DOC" "$@") || return
	local envs=(HOME=/root TERM=dumb LANG=C.UTF-8
		"PATH=$REPO_ROOT/test/install/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
		"SYSTEMCTL_STATE=$SYSTEMCTL_STATE"
		# The page clones https://github.com/nrigate/nrigate.git: this checkout.
		GIT_CONFIG_COUNT=1 "GIT_CONFIG_KEY_0=url.$REPO_ROOT.insteadOf"
		GIT_CONFIG_VALUE_0=https://github.com/nrigate/nrigate.git)
	for v in GOCACHE GOMODCACHE GOPATH GOPROXY GOSUMDB GONOSUMDB GOPRIVATE GOTOOLCHAIN; do
		[[ -z ${!v:-} ]] || envs+=("$v=${!v}")
	done
	echo "== docs/install.md, blocks tagged: $*" >"$log"
	env -i "${envs[@]}" bash -e -o pipefail -c "$script" >>"$log" 2>&1 || {
		local rc=$?
		echo "docs/install.md ($*) stopped with exit status $rc after $((SECONDS - start)) s; the end of $log:" >&2
		tail -40 "$log" >&2
		return "$rc"
	}
	echo "# docs/install.md ($*): $((SECONDS - start)) s" | tee -a "$LOGS/times.txt" >&3
}

# info ENDPOINT: crictl info of the runtime at ENDPOINT.
info() {
	crictl --runtime-endpoint "$1" info
}

# required_entry ENDPOINT: the runtime reports NRIPluginsReady and the
# shipped drop-in's plugin, required, fail, readiness network, not
# registered (no plugin runs here); NetworkReady held false for it.
required_entry() {
	local out
	out=$(info "$1")
	jq -e '.status.conditions[] | select(.type == "NRIPluginsReady" and .status == false and
		.reason == "NRIPluginsNotReady" and (.message | contains("\"10-device-injector\" is not registered")))' <<<"$out" >/dev/null ||
		{ echo "no NRIPluginsReady false for 10-device-injector:" >&2; jq .status <<<"$out" >&2; return 1; }
	# (Without a CNI configuration, as here, NetworkReady keeps the CNI's
	# reason and adds the plugin to its message.)
	jq -e '.status.conditions[] | select(.type == "NetworkReady" and .status == false and
		(.message | contains("network NRI plugins not ready: \"10-device-injector\" is not registered")))' <<<"$out" >/dev/null ||
		{ echo "NetworkReady not held by the plugin:" >&2; jq .status <<<"$out" >&2; return 1; }
	jq -e '[.nri.plugins[] | select(.key == "10-device-injector" and .fail_policy == "fail" and
		.readiness == "network" and .state == "not registered")] | length == 1' <<<"$out" >/dev/null ||
		{ echo "no required entry for 10-device-injector:" >&2; jq .nri <<<"$out" >&2; return 1; }
}

# actions UNIT: what the systemctl stand-in did to UNIT, one word a line.
actions() {
	sed -n "s/^\([a-z-]*\) $1 .*/\1/p" "$SYSTEMCTL_STATE/actions.log"
}

@test "docs/install.md: build prerequisites, Go and a fresh clone" {
	[[ ! -e $SRC ]] || { echo "$SRC exists before the recipe: not a fresh directory" >&2; return 1; }
	recipe prepare.log prepare
	[ "$(git -C "$SRC" rev-parse HEAD)" = "$(git -C "$REPO_ROOT" rev-parse HEAD)" ]
	command -v crictl
}

@test "docs/install.md: CRI-O built with seccomp, installed, restarted, its drop-in reloaded and verified" {
	[[ -d $SRC ]] || { echo "no $SRC: the first test did not clone" >&2; return 1; }
	recipe crio.log crio
	# The binaries the unit runs are the ones the clone built.
	cmp /usr/local/bin/crio "$SRC/bin/crio"
	cmp /usr/local/bin/pinns "$SRC/bin/pinns"
	cmp "/proc/$(systemctl show -P MainPID crio)/exe" "$SRC/bin/crio"
	/usr/local/bin/crio version | grep -E '^SeccompEnabled: +true$'
	go version -m /usr/local/bin/crio | grep -F -- '-tags=seccomp,apparmor,selinux,exclude_graphdriver_btrfs,containers_image_openpgp'
	# The tables came in by a reload of the running CRI-O, not a restart.
	[ "$(actions crio.service | tr '\n' ' ')" = "start reload " ]
	grep -q 'crio.nri.required_plugins' "$SYSTEMCTL_STATE/crio.service.log"
	required_entry unix:///var/run/crio/crio.sock
	run --separate-stderr /opt/nrigate/bin/nri-npd-check --runtime-endpoint unix:///var/run/crio/crio.sock --drop-ins '/etc/crio/crio.conf.d/*.conf'
	[ "$status" -eq 1 ]
	[ "$output" = "10-device-injector not registered" ]
}

@test "docs/install.md: containerd built with its default tags, installed, restarted with its drop-in and verified" {
	[[ -d $SRC ]] || { echo "no $SRC: the first test did not clone" >&2; return 1; }
	recipe containerd.log containerd
	local f
	for f in containerd containerd-shim-runc-v2 ctr; do cmp "/usr/local/bin/$f" "$SRC/bin/$f"; done
	cmp "/proc/$(systemctl show -P MainPID containerd)/exe" "$SRC/bin/containerd"
	go version -m /usr/local/bin/containerd | grep -F -- '-tags=urfave_cli_no_docs'
	go version -m /usr/local/bin/containerd-shim-runc-v2 | grep -F -- '-tags=urfave_cli_no_docs,no_grpc'
	go version -m /usr/local/bin/containerd-shim-runc-v2 | grep -F 'CGO_ENABLED=0'
	# containerd restarts for the drop-in: it has no reload.
	[ "$(actions containerd.service | tr '\n' ' ')" = "start stop start " ]
	required_entry unix:///run/containerd/containerd.sock
}

@test "docs/install.md: the verify step and the check catch a containerd that ignores the drop-in" {
	[[ -x /usr/local/bin/containerd && -f /etc/containerd/conf.d/20-device-injector.toml ]] ||
		{ echo "no containerd installed with its drop-in: the test before failed" >&2; return 1; }
	# Debian's containerd package ships a config.toml without imports: the
	# patched containerd then never reads the drop-in, exactly as a
	# released containerd ignores its tables.
	sed -i '/^imports *=/d' /etc/containerd/config.toml
	systemctl restart containerd
	wait_for 30 crictl --runtime-endpoint unix:///run/containerd/containerd.sock info
	run recipe containerd-ignored.log containerd verify
	[ "$status" -ne 0 ]
	grep -F 'STOP: containerd config dump shows no required plugin table' "$LOGS/containerd-ignored.log"
	run --separate-stderr /opt/nrigate/bin/nri-npd-check --runtime-endpoint unix:///run/containerd/containerd.sock \
		--drop-ins '/etc/containerd/conf.d/*.toml'
	[ "$status" -eq 1 ]
	[ "$output" = "runtime ignores the required NRI plugins of 20-device-injector.toml" ]
}
