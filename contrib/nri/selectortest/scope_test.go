package selectortest

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	nri "github.com/containerd/nri/pkg/adaptation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// scopeCase is one required plugin, which never registers, and one
// request for one pod.
type scopeCase struct {
	key            string // the plugin's key, "guard" if empty
	plugin         nri.RequiredPlugin
	defaultHandler string
	request        nri.Event
	pod            *nri.PodSandbox
}

const staticPodSource = "kubernetes.io/config.source"

func (c *scopeCase) pluginKey() string {
	if c.key == "" {
		return "guard"
	}
	return c.key
}

func (c *scopeCase) String() string {
	return fmt.Sprintf("%s; default runtime handler %q; %s request for %s", describePlugins(c.plugins()),
		c.defaultHandler, c.request.PrettyName(), describePod(c.pod))
}

func (c *scopeCase) plugins() nri.RequiredPlugins {
	return nri.RequiredPlugins{c.pluginKey(): c.plugin}
}

// The documented rule (README of the NRI series, "Required Plugins", and
// DESIGN.md, "Scope and exemptions"), written down independently of NRI's
// code; label selectors are Kubernetes'.

// requestNames are the names of the requests in the key events.
var requestNames = map[nri.Event]string{
	nri.Event_RUN_POD_SANDBOX:  "RunPodSandbox",
	nri.Event_CREATE_CONTAINER: "CreateContainer",
	nri.Event_UPDATE_CONTAINER: "UpdateContainer",
}

// documentedRefusal returns true if the rule refuses the request: the
// plugin never registers, so a request it is required for is refused
// under fail_policy "fail" (the default) and proceeds under "ignore".
func (c *scopeCase) documentedRefusal() bool {
	return c.plugin.FailPolicy != "ignore" && c.documentedRequired()
}

// documentedRequired returns true if the plugin is required for the
// request: the request is among its events (a validator's
// ValidateContainerAdjustment gates CreateContainer; the default is
// CreateContainer), every scope key that is set selects the pod, and the
// pod is not exempt.
func (c *scopeCase) documentedRequired() bool {
	p, pod := &c.plugin, c.pod
	events := p.Events
	if events == nil {
		events = []string{"CreateContainer"}
	}
	if !slices.Contains(events, requestNames[c.request]) &&
		!(c.request == nri.Event_CREATE_CONTAINER && slices.Contains(events, "ValidateContainerAdjustment")) {
		return false
	}
	ns := pod.GetNamespace()
	if len(p.Namespaces) > 0 && !slices.ContainsFunc(p.Namespaces, namespaceMatcher(ns)) {
		return false
	}
	if slices.ContainsFunc(p.ExcludeNamespaces, namespaceMatcher(ns)) {
		return false
	}
	if len(p.RuntimeHandlers) > 0 {
		handler := pod.GetRuntimeHandler()
		if handler == "" {
			handler = c.defaultHandler
		}
		// Neither the pod nor the runtime names the handler: in scope.
		if handler != "" && !slices.Contains(p.RuntimeHandlers, handler) {
			return false
		}
	}
	if !kubernetesSelects(p.MatchLabels, p.MatchExpressions, pod.GetLabels()) {
		return false
	}
	// Static pods: the kubelet sets kubernetes.io/config.source on every
	// pod, "api" on those of the API server.
	if source, ok := pod.GetAnnotations()[staticPodSource]; ok && source != "api" &&
		(p.ExemptStaticPods == nil || *p.ExemptStaticPods) {
		return false
	}
	// An exemption exempts the pods of its namespace that its selector
	// selects and, if it names an annotation, whose annotation is true.
	for _, e := range p.Exempt {
		if !namespaceMatcher(ns)(e.Namespace) || !kubernetesSelects(e.MatchLabels, e.MatchExpressions, pod.GetLabels()) {
			continue
		}
		if e.Annotation != "" {
			if v, err := strconv.ParseBool(pod.GetAnnotations()[e.Annotation]); err != nil || !v {
				continue
			}
		}
		return false
	}
	return true
}

// namespaceMatcher returns whether a namespace pattern, a name or a
// prefix followed by "*", matches the namespace ns.
func namespaceMatcher(ns string) func(pattern string) bool {
	return func(pattern string) bool {
		if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
			return strings.HasPrefix(ns, prefix)
		}
		return ns == pattern
	}
}

func kubernetesSelects(matchLabels map[string]string, exprs []nri.LabelSelectorRequirement, podLabels map[string]string) bool {
	sel, err := selector{matchLabels, exprs}.kubernetes()
	if err != nil {
		panic(fmt.Sprintf("the rule is asked about an invalid selector: %v", err))
	}
	return sel.Matches(labels.Set(podLabels))
}

// validity is what the documentation says of a value.
type validity int

const (
	valid validity = iota
	invalid
	// open is a value the documentation leaves open: NRI may accept or
	// reject it (but must name its key if it rejects it).
	open
)

// namespaceChars are the characters of namespace names; pluginName those
// of plugin names, which NRI defines.
var (
	pluginName       = regexp.MustCompile(`^[A-Za-z0-9_.+-]+$`)
	pluginIndexAlone = regexp.MustCompile(`^[0-9][0-9]-$`)
	namespaceChars   = regexp.MustCompile(`^[a-z0-9-]*$`)
	namespacePrefix  = regexp.MustCompile(`^[a-z0-9][-a-z0-9]*$`)
)

// namespacePattern returns the validity of a namespace pattern: a
// namespace name (a DNS-1123 label) is valid, and, outside an exemption,
// the start of one followed by "*"; anything else is invalid: a pattern
// that no namespace's name or start has ("-a", "-*"), "*" alone (leave
// the key out for every namespace), and in an exemption any prefix, which
// whoever may create namespaces of the prefix could use.
func namespacePattern(pattern string, exemption bool) validity {
	name, prefix := strings.CutSuffix(pattern, "*")
	switch {
	case prefix && (exemption || !namespacePrefix.MatchString(name) || len(name) > validation.DNS1123LabelMaxLength):
		return invalid
	case !prefix && len(validation.IsDNS1123Label(name)) != 0:
		return invalid
	}
	return valid
}

// invalidKeys returns the keys of the configuration that the
// documentation makes invalid, and those it leaves open, as NRI's error
// names them.
func (c *scopeCase) invalidKeys(t *testing.T) (definite, undecided []string) {
	t.Helper()
	p := &c.plugin
	add := func(v validity, key string) {
		switch v {
		case invalid:
			definite = append(definite, key)
		case open:
			undecided = append(undecided, key)
		}
	}
	// A plugin's name, or its index (two digits) and its name.
	if name := c.pluginKey(); !pluginName.MatchString(name) || pluginIndexAlone.MatchString(name) {
		add(invalid, "name")
	}
	if !slices.Contains([]string{"", "fail", "ignore"}, p.FailPolicy) {
		add(invalid, "fail_policy")
	}
	if p.Events != nil && len(p.Events) == 0 {
		add(invalid, "events")
	}
	for _, e := range p.Events {
		if !slices.Contains([]string{"RunPodSandbox", "CreateContainer", "UpdateContainer", "ValidateContainerAdjustment"}, e) {
			add(invalid, "events")
		}
	}
	if p.RegistrationWait != "" {
		if d, err := time.ParseDuration(p.RegistrationWait); err != nil || d < 0 || d > time.Minute {
			add(invalid, "registration_wait")
		}
	}
	if !slices.Contains([]string{"", "condition", "network", "none"}, p.Readiness) {
		add(invalid, "readiness")
	}
	for _, ns := range p.Namespaces {
		add(namespacePattern(ns, false), "namespaces")
	}
	for _, ns := range p.ExcludeNamespaces {
		add(namespacePattern(ns, false), "exclude_namespaces")
	}
	definite = append(definite, selectorInvalidKeys(t, "", p.MatchLabels, p.MatchExpressions)...)
	for i, e := range p.Exempt {
		prefix := fmt.Sprintf("exempt[%d].", i)
		add(namespacePattern(e.Namespace, true), prefix+"namespace")
		definite = append(definite, selectorInvalidKeys(t, prefix, e.MatchLabels, e.MatchExpressions)...)
		if len(e.MatchLabels) == 0 && len(e.MatchExpressions) == 0 && e.Annotation == "" {
			add(invalid, prefix+"match_labels")
		}
		if e.Annotation != "" && len(validation.IsQualifiedName(e.Annotation)) > 0 {
			// Kubernetes validates annotation keys in lower case: it
			// allows "Example.com/exempt"; NRI may refuse it.
			if len(validation.IsQualifiedName(strings.ToLower(e.Annotation))) == 0 {
				add(open, prefix+"annotation")
			} else {
				add(invalid, prefix+"annotation")
			}
		}
	}
	return definite, undecided
}

// selectorInvalidKeys returns the keys of a label selector that
// Kubernetes' validation rejects, as NRI's error names them.
func selectorInvalidKeys(t *testing.T, prefix string, matchLabels map[string]string, exprs []nri.LabelSelectorRequirement) []string {
	t.Helper()
	var keys []string
	for k, v := range matchLabels {
		if len(validation.IsQualifiedName(k)) > 0 {
			keys = append(keys, prefix+"match_labels")
		}
		if len(validation.IsValidLabelValue(v)) > 0 {
			keys = append(keys, fmt.Sprintf("%smatch_labels.%q", prefix, k))
		}
	}
	for i, e := range exprs {
		key := fmt.Sprintf("%smatch_expressions[%d]", prefix, i)
		if len(validation.IsQualifiedName(e.Key)) > 0 {
			keys = append(keys, key+".key")
		}
		switch e.Operator {
		case "In", "NotIn":
			if len(e.Values) == 0 {
				keys = append(keys, key+".values")
			}
		case "Exists", "DoesNotExist":
			if len(e.Values) > 0 {
				keys = append(keys, key+".values")
			}
		default:
			keys = append(keys, key+".operator")
			continue
		}
		for _, v := range e.Values {
			if len(validation.IsValidLabelValue(v)) > 0 {
				keys = append(keys, key+".values")
			}
		}
	}
	// The rule's own check: these are the keys for which Kubernetes
	// rejects the selector.
	if _, err := (selector{matchLabels, exprs}).kubernetes(); (err != nil) != (len(keys) > 0) {
		t.Fatalf("the rule finds the invalid keys %q in %s, Kubernetes' error is %v", keys, selector{matchLabels, exprs}, err)
	}
	return keys
}

// checkScope checks NRI's decision for c, and for c with each of the
// other pods, against the documented rule, and a rejected
// configuration's error against the invalid keys.
func checkScope(t *testing.T, c *scopeCase, pods ...*nri.PodSandbox) {
	t.Helper()
	a, err := adaptation(t, c.plugins(), c.defaultHandler)
	definite, undecided := c.invalidKeys(t)
	if err != nil {
		// The error names the plugin, then the key: `invalid required NRI
		// plugin "guard": KEY = VALUE: what is allowed`.
		prefix := fmt.Sprintf("invalid required NRI plugin %q: ", c.pluginKey())
		text, ok := strings.CutPrefix(err.Error(), prefix)
		if !ok || !slices.ContainsFunc(append(definite, undecided...), func(key string) bool { return strings.HasPrefix(text, key+" = ") }) {
			t.Fatalf("%s: the error %q names no key of the configuration that is invalid (%q) or left open (%q)", c, err, definite, undecided)
		}
		return
	}
	if len(definite) > 0 {
		t.Fatalf("%s: NRI accepts the configuration, the documented rule says %q are invalid", c, definite)
	}
	for _, pod := range append([]*nri.PodSandbox{c.pod}, pods...) {
		c := *c
		c.pod = pod
		var ctr *nri.Container
		if c.request != nri.Event_RUN_POD_SANDBOX {
			ctr = &nri.Container{Id: "ctr0", PodSandboxId: c.pod.GetId(), Name: "ctr0"}
		}
		if got, want := refuses(t, a, c.request, c.pod, ctr), c.documentedRefusal(); got != want {
			t.Fatalf("%s: NRI refuses = %v, the documented rule says %v", &c, got, want)
		}
	}
}

// podVariants returns variants of the case's pod: in each namespace of
// the vocabulary, with each runtime handler, with each static pod source
// and none, in each exemption's namespace, with each value of each
// exemption's annotation and none, there and in its own namespace.
func podVariants(c *scopeCase) []*nri.PodSandbox {
	var pods []*nri.PodSandbox
	variant := func(change func(*nri.PodSandbox)) {
		p := &nri.PodSandbox{Id: c.pod.Id, Name: c.pod.Name, Uid: c.pod.Uid, Namespace: c.pod.Namespace,
			RuntimeHandler: c.pod.RuntimeHandler, Labels: maps.Clone(c.pod.Labels), Annotations: maps.Clone(c.pod.Annotations)}
		change(p)
		pods = append(pods, p)
	}
	for _, ns := range podNamespaces.common {
		variant(func(p *nri.PodSandbox) { p.Namespace = ns })
	}
	for _, h := range handlers.common {
		variant(func(p *nri.PodSandbox) { p.RuntimeHandler = h })
	}
	for _, source := range sources {
		variant(func(p *nri.PodSandbox) { p.Annotations[staticPodSource] = source })
	}
	variant(func(p *nri.PodSandbox) { delete(p.Annotations, staticPodSource) })
	for _, e := range c.plugin.Exempt {
		// In the exemption's namespace.
		ns := strings.Replace(e.Namespace, "*", "x", 1)
		variant(func(p *nri.PodSandbox) { p.Namespace = ns })
		if e.Annotation == "" {
			continue
		}
		for _, v := range boolWords {
			variant(func(p *nri.PodSandbox) { p.Annotations[e.Annotation] = v })
			variant(func(p *nri.PodSandbox) { p.Namespace, p.Annotations[e.Annotation] = ns, v })
		}
		variant(func(p *nri.PodSandbox) { delete(p.Annotations, e.Annotation) })
	}
	return pods
}

// Builders of the table's pods.

func pod(namespace string, opts ...func(*nri.PodSandbox)) *nri.PodSandbox {
	p := &nri.PodSandbox{Id: "pod0", Name: "pod0", Uid: "uid0", Namespace: namespace,
		Labels: map[string]string{}, Annotations: map[string]string{}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func withLabel(k, v string) func(*nri.PodSandbox) {
	return func(p *nri.PodSandbox) { p.Labels[k] = v }
}

func withAnnotation(k, v string) func(*nri.PodSandbox) {
	return func(p *nri.PodSandbox) { p.Annotations[k] = v }
}

func withHandler(h string) func(*nri.PodSandbox) {
	return func(p *nri.PodSandbox) { p.RuntimeHandler = h }
}

func ptr[T any](v T) *T { return &v }

var (
	runPod    = nri.Event_RUN_POD_SANDBOX
	createCtr = nri.Event_CREATE_CONTAINER
	updateCtr = nri.Event_UPDATE_CONTAINER
)

// dsExemption is the exemption of the plugin's own DaemonSet pod.
var dsExemption = nri.RequiredPluginExemption{Namespace: "nri-plugins",
	MatchLabels: map[string]string{"app.kubernetes.io/name": "guard"}}

var dsLabel = withLabel("app.kubernetes.io/name", "guard")

// annotationExemption exempts the pods of nri-x annotated
// example.com/exempt = true.
func annotationExemption(value string, ns string) *scopeCase {
	return &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{
		{Namespace: "nri-x", Annotation: "example.com/exempt"}}},
		request: createCtr, pod: pod(ns, withAnnotation("example.com/exempt", value))}
}

var scopeCases = []struct {
	name string
	c    *scopeCase
	// refused is the documented answer for a valid configuration.
	refused bool
	// invalid is the key that an invalid configuration's error names.
	invalid string
}{
	{"defaults: CreateContainer", &scopeCase{request: createCtr, pod: pod("default")}, true, ""},
	{"defaults: RunPodSandbox is not gated", &scopeCase{request: runPod, pod: pod("default")}, false, ""},
	{"defaults: UpdateContainer is not gated", &scopeCase{request: updateCtr, pod: pod("default")}, false, ""},
	{"events RunPodSandbox", &scopeCase{plugin: nri.RequiredPlugin{Events: []string{"RunPodSandbox"}},
		request: runPod, pod: pod("default")}, true, ""},
	{"events RunPodSandbox: CreateContainer is not gated", &scopeCase{plugin: nri.RequiredPlugin{Events: []string{"RunPodSandbox"}},
		request: createCtr, pod: pod("default")}, false, ""},
	{"events UpdateContainer", &scopeCase{plugin: nri.RequiredPlugin{Events: []string{"UpdateContainer"}},
		request: updateCtr, pod: pod("default")}, true, ""},
	{"a validator gates CreateContainer", &scopeCase{plugin: nri.RequiredPlugin{Events: []string{"ValidateContainerAdjustment"}},
		request: createCtr, pod: pod("default")}, true, ""},
	{"a validator does not gate RunPodSandbox", &scopeCase{plugin: nri.RequiredPlugin{Events: []string{"ValidateContainerAdjustment"}},
		request: runPod, pod: pod("default")}, false, ""},
	{"fail_policy ignore lets it through", &scopeCase{plugin: nri.RequiredPlugin{FailPolicy: "ignore"},
		request: createCtr, pod: pod("default")}, false, ""},
	{"fail_policy fail", &scopeCase{plugin: nri.RequiredPlugin{FailPolicy: "fail"},
		request: createCtr, pod: pod("default")}, true, ""},
	{"INDEX-NAME key", &scopeCase{key: "10-guard", request: createCtr, pod: pod("default")}, true, ""},

	{"namespaces: exact name", &scopeCase{plugin: nri.RequiredPlugin{Namespaces: []string{"default"}},
		request: createCtr, pod: pod("default")}, true, ""},
	{"namespaces: exact name is no prefix", &scopeCase{plugin: nri.RequiredPlugin{Namespaces: []string{"default"}},
		request: createCtr, pod: pod("default2")}, false, ""},
	{"namespaces: prefix", &scopeCase{plugin: nri.RequiredPlugin{Namespaces: []string{"prod-*"}},
		request: createCtr, pod: pod("prod-a")}, true, ""},
	{"namespaces: prefix alone", &scopeCase{plugin: nri.RequiredPlugin{Namespaces: []string{"prod-*"}},
		request: createCtr, pod: pod("prod-")}, true, ""},
	{"namespaces: another namespace", &scopeCase{plugin: nri.RequiredPlugin{Namespaces: []string{"prod-*", "team-a"}},
		request: createCtr, pod: pod("prod")}, false, ""},
	{"namespaces: any of them", &scopeCase{plugin: nri.RequiredPlugin{Namespaces: []string{"prod-*", "team-a"}},
		request: createCtr, pod: pod("team-a")}, true, ""},
	{"exclude_namespaces: excluded", &scopeCase{plugin: nri.RequiredPlugin{ExcludeNamespaces: []string{"kube-system"}},
		request: createCtr, pod: pod("kube-system")}, false, ""},
	{"exclude_namespaces: another namespace", &scopeCase{plugin: nri.RequiredPlugin{ExcludeNamespaces: []string{"kube-system"}},
		request: createCtr, pod: pod("default")}, true, ""},
	{"exclude_namespaces wins over namespaces", &scopeCase{plugin: nri.RequiredPlugin{Namespaces: []string{"nri-*"},
		ExcludeNamespaces: []string{"nri-plugins"}}, request: createCtr, pod: pod("nri-plugins")}, false, ""},

	{"match_labels: selected", &scopeCase{plugin: nri.RequiredPlugin{MatchLabels: map[string]string{"tier": "web"}},
		request: createCtr, pod: pod("default", withLabel("tier", "web"))}, true, ""},
	{"match_labels: another value", &scopeCase{plugin: nri.RequiredPlugin{MatchLabels: map[string]string{"tier": "web"}},
		request: createCtr, pod: pod("default", withLabel("tier", "db"))}, false, ""},
	{"match_expressions: NotIn selects a pod without the label", &scopeCase{plugin: nri.RequiredPlugin{
		MatchExpressions: []nri.LabelSelectorRequirement{{Key: "tier", Operator: "NotIn", Values: []string{"web"}}}},
		request: createCtr, pod: pod("default")}, true, ""},
	{"match_expressions: DoesNotExist", &scopeCase{plugin: nri.RequiredPlugin{
		MatchExpressions: []nri.LabelSelectorRequirement{{Key: "gpu", Operator: "DoesNotExist"}}},
		request: createCtr, pod: pod("default", withLabel("gpu", ""))}, false, ""},

	{"runtime_handlers: the pod's", &scopeCase{plugin: nri.RequiredPlugin{RuntimeHandlers: []string{"kata", "runc"}},
		request: createCtr, pod: pod("default", withHandler("kata"))}, true, ""},
	{"runtime_handlers: another", &scopeCase{plugin: nri.RequiredPlugin{RuntimeHandlers: []string{"kata"}},
		request: createCtr, pod: pod("default", withHandler("runc"))}, false, ""},
	{"runtime_handlers: no handler runs the default one", &scopeCase{plugin: nri.RequiredPlugin{RuntimeHandlers: []string{"runc"}},
		defaultHandler: "runc", request: createCtr, pod: pod("default")}, true, ""},
	{"runtime_handlers: another default", &scopeCase{plugin: nri.RequiredPlugin{RuntimeHandlers: []string{"kata"}},
		defaultHandler: "runc", request: createCtr, pod: pod("default")}, false, ""},
	{"runtime_handlers: the default does not rename a handler", &scopeCase{plugin: nri.RequiredPlugin{RuntimeHandlers: []string{"runc"}},
		defaultHandler: "kata", request: createCtr, pod: pod("default", withHandler("runc"))}, true, ""},
	{"runtime_handlers: no default handler fails closed", &scopeCase{plugin: nri.RequiredPlugin{RuntimeHandlers: []string{"runc"}},
		request: createCtr, pod: pod("default")}, true, ""},

	{"static pod exempt by default", &scopeCase{request: createCtr,
		pod: pod("kube-system", withAnnotation(staticPodSource, "file"))}, false, ""},
	{"static pod, exempt_static_pods = true", &scopeCase{plugin: nri.RequiredPlugin{ExemptStaticPods: ptr(true)},
		request: createCtr, pod: pod("kube-system", withAnnotation(staticPodSource, "http"))}, false, ""},
	{"static pod, exempt_static_pods = false", &scopeCase{plugin: nri.RequiredPlugin{ExemptStaticPods: ptr(false)},
		request: createCtr, pod: pod("kube-system", withAnnotation(staticPodSource, "file"))}, true, ""},
	{"API pod", &scopeCase{request: createCtr, pod: pod("default", withAnnotation(staticPodSource, "api"))}, true, ""},
	{"pod without a source", &scopeCase{request: createCtr, pod: pod("default")}, true, ""},

	{"DaemonSet exemption: its pod", &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{dsExemption}},
		request: createCtr, pod: pod("nri-plugins", dsLabel)}, false, ""},
	{"DaemonSet exemption: its label in another namespace", &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{dsExemption}},
		request: createCtr, pod: pod("default", dsLabel)}, true, ""},
	{"DaemonSet exemption: its namespace without the label", &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{dsExemption}},
		request: createCtr, pod: pod("nri-plugins")}, true, ""},
	{"DaemonSet exemption: a namespace with its name as a prefix", &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{dsExemption}},
		request: createCtr, pod: pod("nri-plugins-2", dsLabel)}, true, ""},
	{"the second exemption", &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{
		{Namespace: "other", Annotation: "example.com/exempt"}, dsExemption}},
		request: createCtr, pod: pod("nri-plugins", dsLabel)}, false, ""},
	{"exemption by match_expressions", &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{
		{Namespace: "nri-x", MatchExpressions: []nri.LabelSelectorRequirement{{Key: "role", Operator: "In", Values: []string{"plugin"}}}}}},
		request: createCtr, pod: pod("nri-x", withLabel("role", "plugin"))}, false, ""},
	{"annotation 1", annotationExemption("1", "nri-x"), false, ""},
	{"annotation t", annotationExemption("t", "nri-x"), false, ""},
	{"annotation T", annotationExemption("T", "nri-x"), false, ""},
	{"annotation TRUE", annotationExemption("TRUE", "nri-x"), false, ""},
	{"annotation True", annotationExemption("True", "nri-x"), false, ""},
	{"annotation true in another namespace", annotationExemption("true", "default"), true, ""},
	{"annotation tRUE", annotationExemption("tRUE", "nri-x"), true, ""},
	{"annotation yes", annotationExemption("yes", "nri-x"), true, ""},
	{"annotation on", annotationExemption("on", "nri-x"), true, ""},
	{"annotation false", annotationExemption("false", "nri-x"), true, ""},
	{"annotation empty", annotationExemption("", "nri-x"), true, ""},
	{"annotation absent", &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{
		{Namespace: "nri-x", Annotation: "example.com/exempt"}}}, request: createCtr, pod: pod("nri-x")}, true, ""},
	{"invalid: exemption for namespaces of a prefix", &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{
		{Namespace: "nri-*", Annotation: "example.com/exempt"}}}}, false, "exempt[0].namespace"},
	{"labels and annotation: both", &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{
		{Namespace: "nri-plugins", MatchLabels: dsExemption.MatchLabels, Annotation: "example.com/exempt"}}},
		request: createCtr, pod: pod("nri-plugins", dsLabel, withAnnotation("example.com/exempt", "true"))}, false, ""},
	{"labels and annotation: the labels alone", &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{
		{Namespace: "nri-plugins", MatchLabels: dsExemption.MatchLabels, Annotation: "example.com/exempt"}}},
		request: createCtr, pod: pod("nri-plugins", dsLabel)}, true, ""},
	{"labels and annotation: the annotation alone", &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{
		{Namespace: "nri-plugins", MatchLabels: dsExemption.MatchLabels, Annotation: "example.com/exempt"}}},
		request: createCtr, pod: pod("nri-plugins", withAnnotation("example.com/exempt", "true"))}, true, ""},
	{"an exemption does not widen the scope", &scopeCase{plugin: nri.RequiredPlugin{Namespaces: []string{"prod"},
		Exempt: []nri.RequiredPluginExemption{dsExemption}}, request: createCtr, pod: pod("default")}, false, ""},

	{"invalid: exemption without a namespace", &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{
		{MatchLabels: dsExemption.MatchLabels}}}}, false, "exempt[0].namespace"},
	{"invalid: exemption for every namespace", &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{
		{Namespace: "*", MatchLabels: dsExemption.MatchLabels}}}}, false, "exempt[0].namespace"},
	{"invalid: exemption of a whole namespace", &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{
		{Namespace: "nri-plugins"}}}}, false, "exempt[0].match_labels"},
	{"invalid: exemption annotation", &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{
		{Namespace: "nri-plugins", Annotation: "a b"}}}}, false, "exempt[0].annotation"},
	{"invalid: exemption selector", &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{dsExemption,
		{Namespace: "nri-plugins", MatchExpressions: []nri.LabelSelectorRequirement{{Key: "gpu", Operator: "Exists", Values: []string{"1"}}}}}}},
		false, "exempt[1].match_expressions[0].values"},
	{"invalid: exemption namespace", &scopeCase{plugin: nri.RequiredPlugin{Exempt: []nri.RequiredPluginExemption{
		{Namespace: "nri_plugins", MatchLabels: dsExemption.MatchLabels}}}}, false, "exempt[0].namespace"},
	{"invalid: * inside a namespace", &scopeCase{plugin: nri.RequiredPlugin{Namespaces: []string{"te*m"}}}, false, "namespaces"},
	{"invalid: two *", &scopeCase{plugin: nri.RequiredPlugin{Namespaces: []string{"nri-**"}}}, false, "namespaces"},
	{"invalid: upper case namespace", &scopeCase{plugin: nri.RequiredPlugin{ExcludeNamespaces: []string{"Default"}}}, false, "exclude_namespaces"},
	{"invalid: empty namespace", &scopeCase{plugin: nri.RequiredPlugin{ExcludeNamespaces: []string{""}}}, false, "exclude_namespaces"},
	{"invalid: namespace of 64", &scopeCase{plugin: nri.RequiredPlugin{Namespaces: []string{strings.Repeat("n", 64)}}}, false, "namespaces"},
	{"invalid: match_labels key", &scopeCase{plugin: nri.RequiredPlugin{MatchLabels: map[string]string{"/a": "b"}}}, false, "match_labels"},
	{"invalid: match_labels value", &scopeCase{plugin: nri.RequiredPlugin{MatchLabels: map[string]string{"a": "b c"}}}, false, `match_labels."a"`},
	{"invalid: operator", &scopeCase{plugin: nri.RequiredPlugin{MatchExpressions: []nri.LabelSelectorRequirement{
		{Key: "tier", Operator: "notin", Values: []string{"web"}}}}}, false, "match_expressions[0].operator"},
	{"invalid: fail_policy", &scopeCase{plugin: nri.RequiredPlugin{FailPolicy: "skip"}}, false, "fail_policy"},
	{"invalid: no events", &scopeCase{plugin: nri.RequiredPlugin{Events: []string{}}}, false, "events"},
	{"invalid: event", &scopeCase{plugin: nri.RequiredPlugin{Events: []string{"StopPodSandbox"}}}, false, "events"},
	{"invalid: registration_wait too long", &scopeCase{plugin: nri.RequiredPlugin{RegistrationWait: "61s"}}, false, "registration_wait"},
	{"invalid: registration_wait negative", &scopeCase{plugin: nri.RequiredPlugin{RegistrationWait: "-1s"}}, false, "registration_wait"},
	{"invalid: readiness", &scopeCase{plugin: nri.RequiredPlugin{Readiness: "Network"}}, false, "readiness"},
}

func TestScopeMatchesTheDocumentedRule(t *testing.T) {
	for _, tc := range scopeCases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			if c.plugin.RegistrationWait == "" {
				c.plugin.RegistrationWait = "0s"
			}
			if c.pod == nil {
				c.request, c.pod = createCtr, pod("default")
			}
			definite, _ := c.invalidKeys(t)
			if tc.invalid != "" {
				if !slices.Contains(definite, tc.invalid) {
					t.Fatalf("the rule finds the invalid keys %q, the table says %q", definite, tc.invalid)
				}
				err := c.plugins().Validate()
				if want := fmt.Sprintf("invalid required NRI plugin %q: %s = ", c.pluginKey(), tc.invalid); err == nil || !strings.HasPrefix(err.Error(), want) {
					t.Fatalf("Validate: %v, want an error starting %q", err, want)
				}
			} else {
				if len(definite) > 0 {
					t.Fatalf("the rule finds the invalid keys %q in a valid case", definite)
				}
				if got := c.documentedRefusal(); got != tc.refused {
					t.Fatalf("the rule refuses = %v, the table says %v", got, tc.refused)
				}
			}
			checkScope(t, c)
		})
	}
}

// Vocabularies of the scope fuzz target.
var (
	pluginKeys = words{
		common: []string{"guard", "10-guard", "1-guard", "guard_2.0+x"},
		edge:   []string{"", "10-", "gu ard", "10-gu/ard"},
	}
	failPolicies = words{common: []string{"", "fail", "ignore"}, edge: []string{"Fail", "skip"}}
	eventNames   = words{
		common: []string{"CreateContainer", "RunPodSandbox", "UpdateContainer", "ValidateContainerAdjustment"},
		edge:   []string{"createcontainer", "StopPodSandbox", ""},
	}
	// No raw strings: a valid registration_wait other than 0 would wait.
	waits       = words{common: []string{"0s", "0", "0ms"}, edge: []string{"-1s", "61s", "1h", "5", "soon"}}
	readinesses = words{common: []string{"", "condition", "network", "none"}, edge: []string{"Network", "ready"}}
	handlers    = words{common: []string{"", "runc", "kata", "crun"}}
	// Mostly valid selectors: selector_test.go explores their validity.
	scopeWords = vocabulary{
		keys:      words{common: []string{"app", "tier", "app.kubernetes.io/name", "gpu"}, edge: []string{"a b"}},
		values:    words{common: []string{"guard", "web", "", "db"}, edge: []string{"-a"}},
		operators: words{common: []string{"In", "NotIn", "Exists", "DoesNotExist"}, edge: []string{"in"}},
	}
	annotationKeys = words{
		common: []string{"example.com/exempt", "", "exempt"},
		edge:   []string{"Example.com/exempt", "/x", "a b"},
	}
	namespacePatterns = words{
		common: []string{"nri-plugins", "nri-*", "default", "kube-system", "prod-*", "team-a", "nri", "prod-",
			strings.Repeat("n", 63), strings.Repeat("n", 63) + "*"},
		edge: []string{"*", "", "te*m", "nri-**", "Default", "nri_plugins", "-a", "a-", "-*", "nri-plugins ",
			strings.Repeat("n", 64), strings.Repeat("n", 64) + "*"},
	}
	podNamespaces = words{common: []string{"default", "nri-plugins", "nri-x", "nri", "kube-system", "prod-a", "prod-",
		"team-a", "", "nri-plugins-2", "Default", strings.Repeat("n", 63)}}
	boolWords = []string{"true", "1", "t", "T", "TRUE", "True", "false", "0", "f", "F", "FALSE", "yes", "y", "on", "tRUE", ""}
	sources   = []string{"api", "file", "http", "", "API"}
)

func wordsFrom(in *input, w words, max int) []string {
	var list []string
	for range in.intn(max + 1) {
		list = append(list, in.word(w))
	}
	return list
}

// scopeCaseFrom reads a case from a fuzz input.
func scopeCaseFrom(in *input) *scopeCase {
	c := &scopeCase{key: in.word(pluginKeys)}
	p := &c.plugin
	p.FailPolicy = in.word(failPolicies)
	// Mostly the default; then [], and up to 3 events.
	if n := in.intn(8); n >= 4 {
		p.Events = []string{}
		for range n - 4 {
			p.Events = append(p.Events, in.word(eventNames))
		}
	}
	p.RegistrationWait = in.pick(waits)
	p.Readiness = in.word(readinesses)
	p.Namespaces = wordsFrom(in, namespacePatterns, 2)
	p.ExcludeNamespaces = wordsFrom(in, namespacePatterns, 2)
	s := selectorFrom(in, scopeWords)
	p.MatchLabels, p.MatchExpressions = s.labels, s.exprs
	p.RuntimeHandlers = wordsFrom(in, handlers, 2)
	switch in.intn(3) {
	case 1:
		p.ExemptStaticPods = ptr(true)
	case 2:
		p.ExemptStaticPods = ptr(false)
	}
	for range in.intn(3) {
		s := selectorFrom(in, scopeWords)
		p.Exempt = append(p.Exempt, nri.RequiredPluginExemption{Namespace: in.word(namespacePatterns),
			MatchLabels: s.labels, MatchExpressions: s.exprs, Annotation: in.word(annotationKeys)})
	}
	c.defaultHandler = in.word(handlers)
	c.request = []nri.Event{createCtr, runPod, updateCtr}[in.intn(3)]

	c.pod = pod(in.word(podNamespaces), withHandler(in.word(handlers)))
	for k, v := range labelsFrom(in, scopeWords) {
		c.pod.Labels[k] = v
	}
	if n := in.intn(len(sources) + 1); n < len(sources) {
		c.pod.Annotations[staticPodSource] = sources[n]
	}
	for _, e := range p.Exempt {
		if n := in.intn(len(boolWords) + 1); e.Annotation != "" && n < len(boolWords) {
			c.pod.Annotations[e.Annotation] = boolWords[n]
		}
	}
	return c
}

// FuzzScopeMatchesTheDocumentedRule reads a required plugin's
// configuration, a request and a pod from its input and checks NRI's
// decision against the documented rule for the pod and its variants; a configuration NRI rejects must
// be rejected with an error that wraps ErrInvalidRequiredPlugins and names
// a key the rule finds invalid (or leaves open).
func FuzzScopeMatchesTheDocumentedRule(f *testing.F) {
	f.Add([]byte{}) // the defaults; more seeds in testdata/fuzz
	f.Fuzz(func(t *testing.T, data []byte) {
		in := input(data)
		c := scopeCaseFrom(&in)
		checkScope(t, c, podVariants(c)...)
	})
}
