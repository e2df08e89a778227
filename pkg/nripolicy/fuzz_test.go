package nripolicy

import (
	"context"
	"errors"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/labels"
)

// splitList turns a fuzzed "a,b,c" into a list; "" is the empty list.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// splitMap turns a fuzzed "k=v;k2=v2" into a map; an entry without "="
// is a key with an empty value.
func splitMap(s string) map[string]string {
	if s == "" {
		return nil
	}
	m := map[string]string{}
	for _, kv := range strings.Split(s, ";") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// FuzzPluginConfig checks that validation of arbitrary requirements never
// panics, that its errors are FieldErrors naming the plugin's key, and that
// New and Reload accept exactly the configurations Validate accepts.
func FuzzPluginConfig(f *testing.F) {
	f.Add("guard", "fail", "CreateContainer", "2s", "condition", "kube-*", "kube-system", "app in (a,b),!x")
	f.Fuzz(func(t *testing.T, key, policy, events, wait, readiness, namespaces, exclude, selector string) {
		pc := &PluginConfig{
			FailPolicy:         FailPolicy(policy),
			Readiness:          Readiness(readiness),
			Namespaces:         splitList(namespaces),
			ExcludeNamespaces:  splitList(exclude),
			PodSelector:        selector,
			ExcludePodSelector: selector,
		}
		for _, e := range splitList(events) {
			pc.Events = append(pc.Events, Event(e))
		}
		var d Duration
		if err := d.UnmarshalText([]byte(wait)); err == nil {
			pc.RegistrationWait = d
			// MarshalText must give back a duration that parses to the same value.
			text, err := d.MarshalText()
			if err != nil {
				t.Fatalf("MarshalText(%v): %v", d, err)
			}
			var back Duration
			if err := back.UnmarshalText(text); err != nil || back != d {
				t.Fatalf("duration %q: MarshalText %q reparses to %v, %v", wait, text, back, err)
			}
		}
		cfg := &Config{Plugins: map[string]*PluginConfig{key: pc}}
		cfg.SetDefaults()
		verr := cfg.Validate()
		if verr != nil {
			var fe *FieldError
			if !errors.As(verr, &fe) || !errors.Is(verr, ErrInvalidConfig) {
				t.Fatalf("Validate error %v (%T) is not a FieldError wrapping ErrInvalidConfig", verr, verr)
			}
			if !strings.HasPrefix(fe.Key, PluginKeyPrefix(key)) {
				t.Fatalf("Validate error key %q does not name plugin %q", fe.Key, key)
			}
		}
		p, err := New(cfg)
		if (err == nil) != (verr == nil) {
			t.Fatalf("New = %v but Validate = %v", err, verr)
		}
		if err != nil {
			return
		}
		if err := p.Reload(cfg); err != nil {
			t.Fatalf("Reload of the config New accepted: %v", err)
		}
		if err := p.Reload(&Config{Plugins: map[string]*PluginConfig{key: nil}}); err == nil {
			t.Fatal("Reload accepted a nil plugin table")
		}
	})
}

// FuzzScope builds a one-plugin policy from fuzzed globs, selectors and
// annotations, and admits a fuzzed pod while no plugin is connected. With
// registration_wait 0 a fail-plugin refuses at once exactly when the pod
// is in scope and not exempt; an ignore-plugin never refuses. A pod that
// matches an exclusion (namespace or selector) or an exemption is never
// refused, and nothing panics.
func FuzzScope(f *testing.F) {
	f.Add("guard", "fail", "kube-*", "kube-system", "app in (a,b),!x", "nri-plugin=guard", "runc", "tol",
		"kube-public", "app=a", "", "runc", true)
	f.Fuzz(func(t *testing.T, key, policy, namespaces, exclude, selector, exclSelector, handlers, tolerate,
		podNS, podLabels, podAnnotations, podHandler string, exemptStatic bool) {
		pc := &PluginConfig{
			FailPolicy:         FailPolicy(policy),
			Namespaces:         splitList(namespaces),
			ExcludeNamespaces:  splitList(exclude),
			PodSelector:        selector,
			ExcludePodSelector: exclSelector,
			RuntimeHandlers:    splitList(handlers),
		}
		cfg := &Config{
			ExemptStaticPods:                 exemptStatic,
			TolerateMissingPluginsAnnotation: tolerate,
			Plugins:                          map[string]*PluginConfig{key: pc},
		}
		p, err := New(cfg)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New error %v does not wrap ErrInvalidConfig", err)
			}
			return
		}
		attach(t, p)
		pod := &api.PodSandbox{
			Id: "pod-id", Name: "pod", Namespace: podNS, RuntimeHandler: podHandler,
			Labels: splitMap(podLabels), Annotations: splitMap(podAnnotations),
		}

		// The oracle, computed independently of the compiled scope.
		matches := func(pats []string, s string) bool {
			for _, pat := range pats {
				if ok, _ := path.Match(pat, s); ok {
					return true
				}
			}
			return false
		}
		set := labels.Set(pod.Labels)
		excluded := matches(pc.ExcludeNamespaces, podNS)
		if exclSelector != "" {
			sel, err := labels.Parse(exclSelector)
			if err != nil {
				t.Fatalf("New accepted exclude_pod_selector %q that does not parse: %v", exclSelector, err)
			}
			excluded = excluded || sel.Matches(set)
		}
		src, static := pod.Annotations[StaticPodSourceAnnotation]
		exempt := (exemptStatic && static && src != APIPodSource) || (tolerate != "" && pod.Annotations[tolerate] == "true")
		inScope := !excluded && (len(pc.Namespaces) == 0 || matches(pc.Namespaces, podNS))
		if len(pc.RuntimeHandlers) > 0 {
			found := false
			for _, h := range pc.RuntimeHandlers {
				found = found || h == podHandler
			}
			inScope = inScope && found
		}
		if selector != "" {
			sel, err := labels.Parse(selector)
			if err != nil {
				t.Fatalf("New accepted pod_selector %q that does not parse: %v", selector, err)
			}
			inScope = inScope && sel.Matches(set)
		}
		// An unset fail_policy is the default one.
		effective := (&PluginConfig{FailPolicy: FailPolicy(policy)})
		if effective.FailPolicy == "" {
			effective.FailPolicy = DefaultFailPolicy
		}
		wantRefused := inScope && !exempt && effective.Policy() == FailPolicyFail

		for _, ev := range GatedEvents() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			req := Request{Event: ev, Pod: pod}
			if ev != EventRunPodSandbox {
				req.Container = &api.Container{Id: "ctr-id", PodSandboxId: pod.Id, Name: "ctr"}
			}
			_, adm, err := p.Admit(ctx, req)
			cancel()
			want := wantRefused && ev == EventCreateContainer // the default events
			if (err != nil) != want {
				t.Fatalf("%s of pod ns=%q labels=%v annotations=%v handler=%q: Admit = %v, want refused=%v (in scope %v, excluded %v, exempt %v)",
					ev, podNS, pod.Labels, pod.Annotations, podHandler, err, want, inScope, excluded, exempt)
			}
			if err != nil {
				var re *RefusalError
				if !errors.As(err, &re) || !errors.Is(err, ErrPluginNotReady) || re.Plugin != key {
					t.Fatalf("refusal %v (%T) is not a RefusalError for %q wrapping ErrPluginNotReady", err, err, key)
				}
				continue
			}
			if err := adm.Done(nil); err != nil {
				t.Fatalf("Done after an admitted %s: %v", ev, err)
			}
		}
	})
}
