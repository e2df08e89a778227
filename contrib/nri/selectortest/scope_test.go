package selectortest

import (
	"errors"
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/adaptation/policy"
	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/labels"
)

// scopeCase is one plugin's scope and one exemption, and one pod.
type scopeCase struct {
	namespace, excludeNamespace, podSelector, runtimeHandlers string
	exemptNamespace, exemptSelector, exemptAnnotation         string
	globalExemption, exemptStaticPods                         bool

	podNamespace, podLabels, podHandler, defaultHandler string
	annotationValue, configSource                       string
	hasConfigSource                                     bool
}

// config is the policy of the case, as an operator would write it: an
// empty string leaves a key out.
func (c *scopeCase) config() *policy.Config {
	pc := &policy.PluginConfig{FailPolicy: policy.FailPolicyFail, Events: []policy.Event{policy.EventCreateContainer},
		PodSelector: c.podSelector}
	if c.namespace != "" {
		pc.Namespaces = []string{c.namespace}
	}
	if c.excludeNamespace != "" {
		pc.ExcludeNamespaces = []string{c.excludeNamespace}
	}
	if c.runtimeHandlers != "" {
		pc.RuntimeHandlers = strings.Split(c.runtimeHandlers, ",")
	}
	cfg := &policy.Config{ExemptStaticPods: c.exemptStaticPods, Plugins: map[string]*policy.PluginConfig{"guard": pc}}
	if c.exemptNamespace != "" {
		e := []policy.Exemption{{Namespace: c.exemptNamespace, PodSelector: c.exemptSelector, Annotation: c.exemptAnnotation}}
		if c.globalExemption {
			cfg.Exempt = e
		} else {
			pc.Exempt = e
		}
	}
	return cfg
}

func (c *scopeCase) pod() *api.PodSandbox {
	pod := &api.PodSandbox{Id: "pod0", Name: "pod0", Namespace: c.podNamespace, RuntimeHandler: c.podHandler,
		Labels: map[string]string{}, Annotations: map[string]string{}}
	for _, kv := range strings.Split(c.podLabels, ";") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			pod.Labels[k] = v
		}
	}
	if c.exemptAnnotation != "" {
		pod.Annotations[c.exemptAnnotation] = c.annotationValue
	}
	if c.hasConfigSource {
		pod.Annotations[policy.StaticPodSourceAnnotation] = c.configSource
	}
	return pod
}

// glob is the namespace pattern matching the policy documents: path.Match.
func glob(pattern, s string) bool {
	ok, err := path.Match(pattern, s)
	return err == nil && ok
}

// selects is Kubernetes' answer to whether the selector selects the labels.
func selects(t *testing.T, selector string, set map[string]string) bool {
	t.Helper()
	if selector == "" {
		return true
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		// NRI accepted a selector Kubernetes rejects: the selector's own
		// differential test reports that; here it is a failure too.
		t.Fatalf("NRI accepted pod selector %q, Kubernetes rejects it: %v", selector, err)
	}
	return sel.Matches(labels.Set(set))
}

// required is the documented scope rule, written down independently of
// NRI's implementation: in scope (namespaces, exclude_namespaces,
// runtime_handlers with the default handler for none, pod_selector) and
// not exempt (a static pod under exempt_static_pods, or an exemption whose
// namespace pattern matches and whose selector and annotation hold).
func (c *scopeCase) required(t *testing.T, pod *api.PodSandbox) bool {
	if c.namespace != "" && !glob(c.namespace, pod.Namespace) {
		return false
	}
	if c.excludeNamespace != "" && glob(c.excludeNamespace, pod.Namespace) {
		return false
	}
	if c.runtimeHandlers != "" {
		handler := pod.RuntimeHandler
		if handler == "" {
			handler = c.defaultHandler
		}
		found := false
		for _, h := range strings.Split(c.runtimeHandlers, ",") {
			found = found || h == handler
		}
		if !found {
			return false
		}
	}
	if !selects(t, c.podSelector, pod.Labels) {
		return false
	}
	if source, ok := pod.Annotations["kubernetes.io/config.source"]; c.exemptStaticPods && ok && source != "api" {
		return false
	}
	if c.exemptNamespace != "" && glob(c.exemptNamespace, pod.Namespace) && selects(t, c.exemptSelector, pod.Labels) {
		if c.exemptAnnotation == "" {
			return false
		}
		if v, err := strconv.ParseBool(pod.Annotations[c.exemptAnnotation]); err == nil && v {
			return false
		}
	}
	return true
}

// checkScope checks NRI's decision against the documented rule, and that
// a configuration Validate rejects is rejected by policy.New too, with an
// error that wraps ErrInvalidConfig and names a key.
func checkScope(t *testing.T, c *scopeCase) {
	cfg := c.config()
	verr := cfg.Validate()
	p, nerr := policy.New(cfg)
	if (verr == nil) != (nerr == nil) {
		t.Fatalf("Validate and New disagree on %+v: %v / %v", c, verr, nerr)
	}
	if verr != nil {
		if !errors.Is(verr, policy.ErrInvalidConfig) {
			t.Fatalf("Validate error %q does not wrap ErrInvalidConfig", verr)
		}
		if !strings.Contains(verr.Error(), "plugins.") && !strings.Contains(verr.Error(), "exempt") {
			t.Fatalf("Validate error %q names no key", verr)
		}
		return
	}
	pod := c.pod()
	got := len(p.Required(api.Event_CREATE_CONTAINER, pod, c.defaultHandler)) == 1
	if want := c.required(t, pod); got != want {
		t.Fatalf("required = %v, the documented rule says %v, for %+v", got, want, c)
	}
}

var scopeSeeds = []scopeCase{
	{podNamespace: "default"},
	{namespace: "prod-*", podNamespace: "prod-a"},
	{namespace: "prod-*", podNamespace: "dev"},
	{excludeNamespace: "kube-system", podNamespace: "kube-system"},
	{podSelector: "app in (web,db)", podNamespace: "default", podLabels: "app=web"},
	{podSelector: "!gpu", podNamespace: "default", podLabels: "gpu=1"},
	{runtimeHandlers: "runc", defaultHandler: "runc", podNamespace: "default"},
	{runtimeHandlers: "kata", defaultHandler: "runc", podNamespace: "default"},
	{runtimeHandlers: "kata,runc", podHandler: "kata", defaultHandler: "runc", podNamespace: "default"},
	{exemptNamespace: "nri-plugins", exemptSelector: "app.kubernetes.io/name=device-injector",
		podNamespace: "nri-plugins", podLabels: "app.kubernetes.io/name=device-injector"},
	{exemptNamespace: "nri-plugins", exemptSelector: "app.kubernetes.io/name=device-injector",
		podNamespace: "default", podLabels: "app.kubernetes.io/name=device-injector"},
	{exemptNamespace: "nri-*", exemptAnnotation: "example.com/exempt", annotationValue: "1", globalExemption: true,
		podNamespace: "nri-plugins"},
	{exemptNamespace: "nri-plugins", exemptAnnotation: "example.com/exempt", annotationValue: "yes",
		podNamespace: "nri-plugins"},
	{exemptNamespace: "*", exemptSelector: "app=x", podNamespace: "default", podLabels: "app=x"},
	{exemptNamespace: "[", exemptSelector: "app=x", podNamespace: "default"},
	{exemptNamespace: "nri-plugins", podNamespace: "nri-plugins"},
	{exemptStaticPods: true, hasConfigSource: true, configSource: "file", podNamespace: "kube-system"},
	{exemptStaticPods: true, hasConfigSource: true, configSource: "api", podNamespace: "default"},
	{exemptStaticPods: false, hasConfigSource: true, configSource: "file", podNamespace: "default"},
}

func TestScopeMatchesTheDocumentedRule(t *testing.T) {
	for _, c := range scopeSeeds {
		checkScope(t, &c)
	}
}

func FuzzScopeMatchesTheDocumentedRule(f *testing.F) {
	for _, c := range scopeSeeds {
		f.Add(c.namespace, c.excludeNamespace, c.podSelector, c.runtimeHandlers,
			c.exemptNamespace, c.exemptSelector, c.exemptAnnotation, c.globalExemption, c.exemptStaticPods,
			c.podNamespace, c.podLabels, c.podHandler, c.defaultHandler, c.annotationValue, c.configSource, c.hasConfigSource)
	}
	f.Fuzz(func(t *testing.T, namespace, excludeNamespace, podSelector, runtimeHandlers,
		exemptNamespace, exemptSelector, exemptAnnotation string, globalExemption, exemptStaticPods bool,
		podNamespace, podLabels, podHandler, defaultHandler, annotationValue, configSource string, hasConfigSource bool) {
		checkScope(t, &scopeCase{
			namespace: namespace, excludeNamespace: excludeNamespace, podSelector: podSelector,
			runtimeHandlers: runtimeHandlers, exemptNamespace: exemptNamespace, exemptSelector: exemptSelector,
			exemptAnnotation: exemptAnnotation, globalExemption: globalExemption, exemptStaticPods: exemptStaticPods,
			podNamespace: podNamespace, podLabels: podLabels, podHandler: podHandler, defaultHandler: defaultHandler,
			annotationValue: annotationValue, configSource: configSource, hasConfigSource: hasConfigSource,
		})
	})
}
