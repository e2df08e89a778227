package config

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/nrigate/nrigate/pkg/nripolicy"
)

// WriteTemplate writes cfg as commented TOML in crio.conf format, like
// `crio config`: every key nrigate honours, with its documentation and
// value, and no other (CRI-O keys nrigate has no use for, such as the
// [crio.image] table, log_dir or stream_*, are reported as unknown when a
// file sets them). Loading the output gives back cfg.
func WriteTemplate(w io.Writer, cfg *Config) error {
	t := &tmpl{w: bufio.NewWriter(w)}
	c := &cfg.Crio
	t.header("The nrigate configuration, in CRI-O's crio.conf format. Drop-ins (*.conf in the\n" +
		"configuration directory) are merged over this file key by key, in lexical order.")
	t.table("crio", "")
	t.key("root", "Path of the root directory for persistent state (images, containers).", c.Root)
	t.key("runroot", "Path of the directory for transient state (sockets, exit files).", c.RunRoot)
	t.key("storage_driver", "The containers/storage driver for images and container root filesystems.", c.StorageDriver)

	t.table("crio.api", "The CRI API server.")
	t.key("listen", "Path of the CRI unix socket (crictl --runtime-endpoint unix://PATH).", c.API.Listen)

	t.table("crio.runtime", "Container runtime settings.")
	t.key("default_runtime", "Runtime handler used when a request names none; must name a [crio.runtime.runtimes.NAME] table.", c.Runtime.DefaultRuntime)
	t.key("log_level", `Log level of the daemon: "trace", "debug", "info", "warn", "error", "fatal" or "panic".`, c.Runtime.LogLevel)
	t.key("cgroup_manager", `Cgroup manager: only "cgroupfs" (systemd is refused: nrigate has no systemd manager).`, c.Runtime.CgroupManager)
	// Only the default handler is served: other handler tables do nothing.
	for _, name := range sortedKeys(c.Runtime.Runtimes) {
		h := c.Runtime.Runtimes[name]
		if h == nil || name != c.Runtime.DefaultRuntime {
			continue
		}
		t.table("crio.runtime.runtimes."+quoteKey(name), "Runtime handler "+fmt.Sprintf("%q", name)+".")
		t.key("runtime_path", "Path of the OCI runtime binary.", h.RuntimePath)
		t.key("runtime_type", `Kind of runtime; only "oci" (supervised by conmon) is supported.`, h.RuntimeType)
		t.key("runtime_root", "State directory of the runtime (runc --root).", h.RuntimeRoot)
		t.key("monitor_path", "Path of the conmon binary that supervises each container.", h.MonitorPath)
	}

	n := &c.NRI
	t.table("crio.nri", "NRI (Node Resource Interface) settings, with CRI-O's keys and defaults.")
	t.key("enable_nri", "Enable NRI support.", n.Enabled)
	t.key("nri_listen", "Path of the socket NRI plugins connect to.", n.SocketPath)
	t.key("nri_plugin_dir", "Directory of pre-installed plugins the daemon starts itself.", n.PluginPath)
	t.key("nri_plugin_config_dir", "Directory of configuration drop-ins for pre-installed plugins.", n.PluginConfigPath)
	t.key("nri_plugin_registration_timeout", "How long a plugin may take to register (Go duration).", n.PluginRegistrationTimeout)
	t.key("nri_plugin_request_timeout", "How long a plugin may take to answer a request (Go duration).", n.PluginRequestTimeout)
	t.key("nri_disable_connections", "Refuse connections from externally started plugins.", n.DisableConnections)

	v := &n.DefaultValidator
	t.table("crio.nri.default_validator", "NRI's built-in default validator (upstream containerd/nri).")
	t.key("nri_enable_default_validator", "Enable the default validator.", v.Enable)
	t.key("nri_validator_reject_oci_hook_adjustment", "Reject containers whose OCI hooks a plugin adjusted.", v.RejectOCIHookAdjustment)
	t.key("nri_validator_reject_runtime_default_seccomp_adjustment", "Reject adjustments of a runtime-default seccomp policy.", v.RejectRuntimeDefaultSeccompAdjustment)
	t.key("nri_validator_reject_unconfined_seccomp_adjustment", "Reject adjustments of an unconfined seccomp policy.", v.RejectUnconfinedSeccompAdjustment)
	t.key("nri_validator_reject_custom_seccomp_adjustment", "Reject adjustments of a custom (localhost) seccomp policy.", v.RejectCustomSeccompAdjustment)
	t.key("nri_validator_reject_namespace_adjustment", "Reject adjustments of Linux namespaces.", v.RejectNamespaceAdjustment)
	t.key("nri_validator_reject_sysctl_adjustment", "Reject adjustments of sysctls.", v.RejectSysctlAdjustment)
	t.key("nri_validator_required_plugins", "Plugins every container needs (upstream check, applied at CreateContainer only).", v.RequiredPlugins)
	t.key("nri_validator_tolerate_missing_plugins_annotation", "Pod annotation that, set to true, tolerates missing required plugins.", v.TolerateMissingAnnotation)

	p := &n.Policy
	t.table(PolicyKeyPrefix, "nrigate's NRI policy: which plugins are required, for which events and pods,\n"+
		"and what happens when they cannot act. WARNING: a plugin with fail_policy = \"fail\"\n"+
		"blocks every pod in its scope while it is down; keep exempt_static_pods = true and\n"+
		"exclude the plugin's own pods (exclude_pod_selector), or they can never start.")
	t.key("exempt_static_pods", "Exempt static pods (annotation kubernetes.io/config.source other than \"api\").", p.ExemptStaticPods)
	t.key("tolerate_missing_plugins_annotation", "Pod annotation that, set to \"true\", exempts the pod from every requirement; empty disables it.", p.TolerateMissingPluginsAnnotation)
	for _, name := range p.Names() {
		pc := p.Plugins[name]
		if pc == nil {
			continue
		}
		writePlugin(t, name, pc)
	}

	m := &c.Metrics
	t.table("crio.metrics", "Prometheus metrics endpoint.")
	t.key("enable_metrics", "Serve metrics.", m.Enable)
	t.key("metrics_host", "Address the metrics endpoint listens on.", m.Host)
	t.key("metrics_port", "TCP port of the metrics endpoint.", m.Port)

	if t.err != nil {
		return t.err
	}
	return t.w.Flush()
}

func writePlugin(t *tmpl, name string, pc *nripolicy.PluginConfig) {
	t.table(PolicyKeyPrefix+".plugins."+fmt.Sprintf("%q", name), fmt.Sprintf("Requirement for plugin %q (base name, or INDEX-NAME).", name))
	t.key("fail_policy", `"fail" refuses the request when the plugin cannot act; "ignore" (alias "skip") lets it through with a warning.`, string(pc.FailPolicy))
	events := make([]string, len(pc.Events))
	for i, e := range pc.Events {
		events[i] = string(e)
	}
	t.key("events", `Gated events: "RunPodSandbox", "CreateContainer", "UpdateContainer".`, events)
	t.key("registration_wait", "How long a request waits for the plugin to become ready (Go duration).", pc.RegistrationWait)
	t.key("readiness", `"condition" reports it in NRIPluginsReady; "network" also holds NetworkReady; "none" reports nothing.`, string(pc.Readiness))
	t.key("namespaces", "Glob patterns of pod namespaces in scope; empty means all.", pc.Namespaces)
	t.key("exclude_namespaces", "Glob patterns of pod namespaces out of scope.", pc.ExcludeNamespaces)
	t.key("pod_selector", "Label selector of pods in scope; empty means all.", pc.PodSelector)
	t.key("exclude_pod_selector", "Label selector of pods out of scope, such as the plugin's own pods.", pc.ExcludePodSelector)
	t.key("runtime_handlers", "Runtime handlers in scope; empty means all.", pc.RuntimeHandlers)
}

type tmpl struct {
	w   *bufio.Writer
	err error
}

func (t *tmpl) comment(doc, indent string) {
	for _, line := range strings.Split(doc, "\n") {
		fmt.Fprintf(t.w, "%s# %s\n", indent, line)
	}
}

func (t *tmpl) header(doc string) { t.comment(doc, "") }

func (t *tmpl) table(name, doc string) {
	fmt.Fprintln(t.w)
	if doc != "" {
		t.comment(doc, "")
	}
	fmt.Fprintf(t.w, "[%s]\n", name)
}

// key writes one documented key; the value is encoded by the TOML encoder
// so that strings are escaped exactly as the decoder expects.
func (t *tmpl) key(name, doc string, value any) {
	if t.err != nil {
		return
	}
	if s, ok := value.([]string); ok && s == nil {
		value = []string{}
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(map[string]any{"v": value}); err != nil {
		t.err = fmt.Errorf("encoding %s: %w", name, err)
		return
	}
	enc := strings.TrimSpace(strings.TrimPrefix(buf.String(), "v = "))
	fmt.Fprintln(t.w)
	t.comment(doc, "")
	fmt.Fprintf(t.w, "%s = %s\n", name, enc)
}
