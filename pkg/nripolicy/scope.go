package nripolicy

import (
	"path"
	"sort"
	"strings"
	"time"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/labels"
)

// eventBit is a set of gated events.
type eventBit uint8

func (e Event) bit() eventBit {
	switch e {
	case EventRunPodSandbox:
		return 1
	case EventCreateContainer:
		return 2
	case EventUpdateContainer:
		return 4
	}
	return 0
}

// apiEvent maps a gated event to the upstream event.
func (e Event) apiEvent() api.Event {
	switch e {
	case EventRunPodSandbox:
		return api.Event_RUN_POD_SANDBOX
	case EventCreateContainer:
		return api.Event_CREATE_CONTAINER
	case EventUpdateContainer:
		return api.Event_UPDATE_CONTAINER
	}
	return api.Event_UNKNOWN
}

// requirement is one compiled plugin requirement.
type requirement struct {
	key        string
	base, idx  string // idx empty: any index
	policy     FailPolicy
	events     eventBit
	apiMask    api.EventMask // upstream events of the gated events
	wait       time.Duration
	readiness  Readiness
	namespaces []nsPattern
	exclNS     []nsPattern
	selector   labels.Selector // nil: all
	exclSel    labels.Selector // nil: none
	handlers   []string
}

// compiled is an immutable, compiled policy.
type compiled struct {
	cfg      *Config
	plugins  []*requirement // sorted by key
	exempt   bool
	tolerate string
	byEvent  [8][]*requirement // requirements per single event bit
}

func compile(cfg *Config) (*compiled, error) {
	cfg = cfg.clone()
	for _, pc := range cfg.Plugins {
		if pc != nil {
			pc.SetDefaults()
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &compiled{cfg: cfg, exempt: cfg.ExemptStaticPods, tolerate: cfg.TolerateMissingPluginsAnnotation}
	for _, key := range cfg.Names() {
		pc := cfg.Plugins[key]
		r := &requirement{
			key:        key,
			base:       key,
			policy:     pc.Policy(),
			wait:       pc.RegistrationWait.Std(),
			readiness:  pc.Readiness,
			namespaces: compilePatterns(pc.Namespaces),
			exclNS:     compilePatterns(pc.ExcludeNamespaces),
			handlers:   pc.RuntimeHandlers,
		}
		if idx, base, err := api.ParsePluginName(key); err == nil && idx != "" {
			r.idx, r.base = idx, base
		}
		for _, e := range pc.Events {
			r.events |= e.bit()
			r.apiMask.Set(e.apiEvent())
		}
		var err error
		if pc.PodSelector != "" {
			if r.selector, err = labels.Parse(pc.PodSelector); err != nil {
				return nil, err // unreachable: Validate parsed it
			}
		}
		if pc.ExcludePodSelector != "" {
			if r.exclSel, err = labels.Parse(pc.ExcludePodSelector); err != nil {
				return nil, err
			}
		}
		c.plugins = append(c.plugins, r)
	}
	sort.Slice(c.plugins, func(i, j int) bool { return c.plugins[i].key < c.plugins[j].key })
	for _, e := range gatedEvents {
		for _, r := range c.plugins {
			if r.events&e.bit() != 0 {
				c.byEvent[e.bit()] = append(c.byEvent[e.bit()], r)
			}
		}
	}
	return c, nil
}

// names reports whether the policy names the plugin registered as id.
func (c *compiled) names(id *ident) bool {
	for _, r := range c.plugins {
		if r.matches(id.base, id.idx) {
			return true
		}
	}
	return false
}

// matches reports whether a plugin registered as idx-base satisfies r.
func (r *requirement) matches(base, idx string) bool {
	return base == r.base && (r.idx == "" || r.idx == idx)
}

// exemptPod reports whether the pod is exempt from every requirement, and why.
func (c *compiled) exemptPod(pod *api.PodSandbox) (bool, string) {
	ann := pod.GetAnnotations()
	if c.exempt {
		if src, ok := ann[StaticPodSourceAnnotation]; ok && src != APIPodSource {
			return true, "static pod"
		}
	}
	if c.tolerate != "" && ann[c.tolerate] == "true" {
		return true, "tolerates missing plugins"
	}
	return false, ""
}

// inScope reports whether the pod is in the scope of r; a pod without a
// runtime handler runs with defHandler.
func (r *requirement) inScope(pod *api.PodSandbox, defHandler string) bool {
	ns := pod.GetNamespace()
	if len(r.namespaces) > 0 && !matchAny(r.namespaces, ns) {
		return false
	}
	if matchAny(r.exclNS, ns) {
		return false
	}
	if len(r.handlers) > 0 {
		h, ok := pod.GetRuntimeHandler(), false
		if h == "" {
			h = defHandler
		}
		for _, x := range r.handlers {
			if x == h {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if r.selector != nil || r.exclSel != nil {
		set := labels.Set(pod.GetLabels())
		if r.selector != nil && !r.selector.Matches(set) {
			return false
		}
		if r.exclSel != nil && r.exclSel.Matches(set) {
			return false
		}
	}
	return true
}

// nsPattern is a namespace glob; literal patterns skip path.Match.
type nsPattern struct {
	pat     string
	literal bool
}

func compilePatterns(pats []string) []nsPattern {
	out := make([]nsPattern, 0, len(pats))
	for _, p := range pats {
		out = append(out, nsPattern{pat: p, literal: !strings.ContainsAny(p, `*?[\\`)})
	}
	return out
}

func matchAny(patterns []nsPattern, s string) bool {
	for _, p := range patterns {
		if p.literal {
			if p.pat == s {
				return true
			}
			continue
		}
		if ok, _ := path.Match(p.pat, s); ok {
			return true
		}
	}
	return false
}

// required returns the requirements for ev that apply to pod. The slice
// is shared when every requirement applies; callers must not modify it.
func (c *compiled) required(ev Event, pod *api.PodSandbox, defHandler string) []*requirement {
	all := c.byEvent[ev.bit()]
	if len(all) == 0 {
		return nil
	}
	if ok, _ := c.exemptPod(pod); ok {
		return nil
	}
	for i, r := range all {
		if !r.inScope(pod, defHandler) {
			// Copy on the first miss only: the common case allocates nothing.
			out := append(make([]*requirement, 0, len(all)-1), all[:i]...)
			for _, r := range all[i+1:] {
				if r.inScope(pod, defHandler) {
					out = append(out, r)
				}
			}
			return out
		}
	}
	return all
}
