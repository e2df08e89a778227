package nripolicy

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
)

func TestScope(t *testing.T) {
	dsLabels := map[string]string{"app.kubernetes.io/name": "guard"}
	cases := []struct {
		name string
		mut  func(*PluginConfig)
		glob func(*Config)
		pod  *api.PodSandbox
		ev   Event
		want bool
	}{
		{"default scope: every pod", nil, nil, pod("default", "p", nil), EventCreateContainer, true},
		{"event not gated", nil, nil, pod("default", "p", nil), EventRunPodSandbox, false},
		{"gated RunPodSandbox", func(p *PluginConfig) { p.Events = []Event{EventRunPodSandbox} }, nil, pod("default", "p", nil), EventRunPodSandbox, true},
		{"namespace glob matches", func(p *PluginConfig) { p.Namespaces = []string{"team-*"} }, nil, pod("team-a", "p", nil), EventCreateContainer, true},
		{"namespace glob misses", func(p *PluginConfig) { p.Namespaces = []string{"team-*"} }, nil, pod("default", "p", nil), EventCreateContainer, false},
		{"namespace glob ?", func(p *PluginConfig) { p.Namespaces = []string{"ns?"} }, nil, pod("ns1", "p", nil), EventCreateContainer, true},
		{"namespace class", func(p *PluginConfig) { p.Namespaces = []string{"ns[0-3]"} }, nil, pod("ns7", "p", nil), EventCreateContainer, false},
		{"exclude namespace", func(p *PluginConfig) { p.ExcludeNamespaces = []string{"kube-*"} }, nil, pod("kube-system", "p", nil), EventCreateContainer, false},
		{"exclude beats include", func(p *PluginConfig) { p.Namespaces = []string{"*"}; p.ExcludeNamespaces = []string{"kube-system"} }, nil, pod("kube-system", "p", nil), EventCreateContainer, false},
		{"selector matches", func(p *PluginConfig) { p.PodSelector = "tier in (gpu,fpga)" }, nil, pod("default", "p", map[string]string{"tier": "gpu"}), EventCreateContainer, true},
		{"selector misses", func(p *PluginConfig) { p.PodSelector = "tier in (gpu,fpga)" }, nil, pod("default", "p", map[string]string{"tier": "cpu"}), EventCreateContainer, false},
		{"selector exists", func(p *PluginConfig) { p.PodSelector = "needs-guard" }, nil, pod("default", "p", map[string]string{"needs-guard": ""}), EventCreateContainer, true},
		{"own DaemonSet pod excluded", func(p *PluginConfig) { p.ExcludePodSelector = "app.kubernetes.io/name=guard" }, nil, pod("kube-system", "guard-x", dsLabels), EventCreateContainer, false},
		{"exclude selector other pod", func(p *PluginConfig) { p.ExcludePodSelector = "app.kubernetes.io/name=guard" }, nil, pod("default", "p", map[string]string{"app.kubernetes.io/name": "web"}), EventCreateContainer, true},
		{"handler in list", func(p *PluginConfig) { p.RuntimeHandlers = []string{"kata"} }, nil, &api.PodSandbox{Namespace: "d", RuntimeHandler: "kata"}, EventCreateContainer, true},
		{"handler not in list", func(p *PluginConfig) { p.RuntimeHandlers = []string{"kata"} }, nil, &api.PodSandbox{Namespace: "d", RuntimeHandler: "runc"}, EventCreateContainer, false},
		{"empty handler not in list", func(p *PluginConfig) { p.RuntimeHandlers = []string{"kata"} }, nil, &api.PodSandbox{Namespace: "d"}, EventCreateContainer, false},
		{"static pod exempt", nil, nil, &api.PodSandbox{Namespace: "kube-system", Annotations: map[string]string{StaticPodSourceAnnotation: "file"}}, EventCreateContainer, false},
		{"api pod not exempt", nil, nil, &api.PodSandbox{Namespace: "kube-system", Annotations: map[string]string{StaticPodSourceAnnotation: APIPodSource}}, EventCreateContainer, true},
		{"static pod not exempt when disabled", nil, func(c *Config) { c.ExemptStaticPods = false }, &api.PodSandbox{Annotations: map[string]string{StaticPodSourceAnnotation: "file"}}, EventCreateContainer, true},
		{"tolerated pod", nil, func(c *Config) { c.TolerateMissingPluginsAnnotation = "tolerate" }, &api.PodSandbox{Annotations: map[string]string{"tolerate": "true"}}, EventCreateContainer, false},
		{"toleration must be true", nil, func(c *Config) { c.TolerateMissingPluginsAnnotation = "tolerate" }, &api.PodSandbox{Annotations: map[string]string{"tolerate": "yes"}}, EventCreateContainer, true},
		{"toleration disabled", nil, nil, &api.PodSandbox{Annotations: map[string]string{"": "true"}}, EventCreateContainer, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cfgOf("guard", tc.mut)
			if tc.glob != nil {
				tc.glob(cfg)
			}
			c, err := compile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := len(c.required(tc.ev, tc.pod, "")) == 1
			if got != tc.want {
				t.Errorf("in scope = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRequiredFiltersSome(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Plugins = map[string]*PluginConfig{}
	for _, k := range []string{"a", "b", "c"} {
		cfg.Plugins[k] = DefaultPluginConfig()
	}
	cfg.Plugins["b"].ExcludeNamespaces = []string{"default"}
	c, err := compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := c.required(EventCreateContainer, pod("default", "p", nil), "")
	if len(got) != 2 || got[0].key != "a" || got[1].key != "c" {
		t.Fatalf("required = %v, want a and c", keys(got))
	}
	if all := c.required(EventCreateContainer, pod("other", "p", nil), ""); len(all) != 3 {
		t.Fatalf("required = %v, want all three", keys(all))
	}
	if len(c.byEvent[EventCreateContainer.bit()]) != 3 {
		t.Fatal("required must not modify the shared list")
	}
}

func keys(rs []*requirement) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.key)
	}
	return out
}

func TestKeyMatching(t *testing.T) {
	cases := []struct {
		key, base, idx string
		want           bool
	}{
		{"guard", "guard", "10", true},
		{"guard", "guard", "99", true},
		{"guard", "guardian", "10", false},
		{"10-guard", "guard", "10", true},
		{"10-guard", "guard", "20", false},
		{"10-guard", "10-guard", "20", false},
		{"device-injector", "device-injector", "10", true},
		{"05-device-injector", "device-injector", "05", true},
		{"05-device-injector", "device-injector", "50", false},
	}
	for _, tc := range cases {
		c, err := compile(cfgOf(tc.key, nil))
		if err != nil {
			t.Fatalf("%s: %v", tc.key, err)
		}
		if got := c.plugins[0].matches(tc.base, tc.idx); got != tc.want {
			t.Errorf("key %q vs %s-%s: got %v, want %v", tc.key, tc.idx, tc.base, got, tc.want)
		}
	}
}

func TestCompileRejectsInvalid(t *testing.T) {
	_, err := New(cfgOf("guard", func(p *PluginConfig) { p.PodSelector = "a in (" }))
	if err == nil {
		t.Fatal("New accepted a bad selector")
	}
	// Defaults are filled for tables that name only some keys.
	cfg := DefaultConfig()
	cfg.Plugins = map[string]*PluginConfig{"guard": {FailPolicy: FailPolicySkip}}
	c, err := compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r := c.plugins[0]; r.policy != FailPolicyIgnore || r.events != EventCreateContainer.bit() || r.readiness != ReadinessCondition {
		t.Fatalf("defaults not applied: %+v", r)
	}
	if cfg.Plugins["guard"].Events != nil {
		t.Fatal("compile must not modify the caller's config")
	}
}
