package selectortest

import (
	"strings"
	"testing"

	nri "github.com/containerd/nri/pkg/adaptation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// kubernetes returns Kubernetes' selector for s, or its error.
func (s selector) kubernetes() (labels.Selector, error) {
	ls := &metav1.LabelSelector{MatchLabels: s.labels}
	for _, e := range s.exprs {
		ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: e.Key, Operator: metav1.LabelSelectorOperator(e.Operator), Values: e.Values,
		})
	}
	return metav1.LabelSelectorAsSelector(ls)
}

// placement is where a selector stands in the configuration of the
// required plugin guard.
type placement int

const (
	// own is guard's own match_labels and match_expressions: the pods
	// it selects are refused.
	own placement = iota
	// exemptAnnotated is an exemption in the pod's namespace with an
	// annotation that the pod carries as "true": the pods it selects
	// are exempt, the others refused.
	exemptAnnotated
	// exemptAlone is an exemption in the pod's namespace by the selector
	// alone, which is invalid when the selector is empty.
	exemptAlone
)

const (
	podNamespace     = "nri-plugins"
	exemptAnnotation = "example.com/exempt"
)

func (p placement) String() string {
	return [...]string{"the plugin's selector", "an exemption's selector with an annotation", "an exemption's selector"}[p]
}

// plugins returns the configuration with s at p.
func (p placement) plugins(s selector) nri.RequiredPlugins {
	guard := nri.RequiredPlugin{RegistrationWait: "0s", Events: []string{"RunPodSandbox"}}
	if p == own {
		guard.MatchLabels, guard.MatchExpressions = s.labels, s.exprs
	} else {
		e := nri.RequiredPluginExemption{Namespace: podNamespace, MatchLabels: s.labels, MatchExpressions: s.exprs}
		if p == exemptAnnotated {
			e.Annotation = exemptAnnotation
		}
		guard.Exempt = []nri.RequiredPluginExemption{e}
	}
	return nri.RequiredPlugins{"guard": guard}
}

// keyPrefix is how an error names the keys of the selector at p.
func (p placement) keyPrefix() string {
	if p == own {
		return `invalid required NRI plugin "guard": match_`
	}
	return `invalid required NRI plugin "guard": exempt[0].match_`
}

func (p placement) pod(labels map[string]string) *nri.PodSandbox {
	pod := &nri.PodSandbox{Id: "pod0", Name: "pod0", Uid: "uid0", Namespace: podNamespace, Labels: labels}
	if p == exemptAnnotated {
		pod.Annotations = map[string]string{exemptAnnotation: "true"}
	}
	return pod
}

// selected returns whether the selector at p selected the pod, given
// whether the pod was refused.
func (p placement) selected(refused bool) bool {
	return refused == (p == own)
}

// compareSelector checks NRI's selector against Kubernetes' at each
// placement: the same acceptance, and the same matches on the label sets
// that exercise it.
func compareSelector(t *testing.T, s selector, extra ...map[string]string) {
	t.Helper()
	theirs, theirErr := s.kubernetes()
	for _, p := range []placement{own, exemptAnnotated, exemptAlone} {
		a, err := adaptation(t, p.plugins(s), "")
		if p == exemptAlone && s.empty() {
			// Documented: an exemption needs a selector or an annotation.
			if want := `exempt[0].match_labels = {}: an exemption needs`; err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("an exemption with neither selector nor annotation: error %v, want one with %q", err, want)
			}
			continue
		}
		if (err == nil) != (theirErr == nil) {
			t.Fatalf("%s as %s: NRI's error %v, Kubernetes' error %v", s, p, err, theirErr)
		}
		if err != nil {
			if !strings.Contains(err.Error(), p.keyPrefix()) {
				t.Fatalf("%s as %s: the error %q does not name the selector's key (%s...)", s, p, err, p.keyPrefix())
			}
			continue
		}
		for _, set := range labelSets(s, extra...) {
			got := p.selected(refuses(t, a, nri.Event_RUN_POD_SANDBOX, p.pod(set), nil))
			if want := theirs.Matches(labels.Set(set)); got != want {
				t.Fatalf("%s as %s, pod labels %s: NRI selects %v, Kubernetes %v", s, p, describeLabels(set), got, want)
			}
		}
	}
}

type req = nri.LabelSelectorRequirement

var selectorCases = []struct {
	name  string
	s     selector
	valid bool // Kubernetes' answer, which NRI must give too
}{
	{name: "empty", s: selector{}, valid: true},
	{name: "empty, not nil", s: selector{labels: map[string]string{}, exprs: []req{}}, valid: true},
	{name: "match_labels", s: selector{labels: map[string]string{"app": "guard", "tier": "web"}}, valid: true},
	{name: "match_labels empty value", s: selector{labels: map[string]string{"app": ""}}, valid: true},
	{name: "match_labels qualified key", s: selector{labels: map[string]string{"app.kubernetes.io/name": "device-injector"}}, valid: true},
	{name: "In", s: selector{exprs: []req{{Key: "tier", Operator: "In", Values: []string{"web", "db"}}}}, valid: true},
	{name: "In empty value", s: selector{exprs: []req{{Key: "tier", Operator: "In", Values: []string{""}}}}, valid: true},
	{name: "NotIn", s: selector{exprs: []req{{Key: "tier", Operator: "NotIn", Values: []string{"cache"}}}}, valid: true},
	{name: "NotIn empty value", s: selector{exprs: []req{{Key: "tier", Operator: "NotIn", Values: []string{""}}}}, valid: true},
	{name: "Exists", s: selector{exprs: []req{{Key: "gpu", Operator: "Exists"}}}, valid: true},
	{name: "Exists, values = []", s: selector{exprs: []req{{Key: "gpu", Operator: "Exists", Values: []string{}}}}, valid: true},
	{name: "DoesNotExist", s: selector{exprs: []req{{Key: "gpu", Operator: "DoesNotExist"}}}, valid: true},
	{name: "every operator", s: selector{labels: map[string]string{"example.com/gpu": "true"}, exprs: []req{
		{Key: "tier", Operator: "In", Values: []string{"web", "db"}},
		{Key: "tier", Operator: "NotIn", Values: []string{"cache"}},
		{Key: "gpu", Operator: "Exists"},
		{Key: "cpu-only", Operator: "DoesNotExist"},
	}}, valid: true},
	{name: "In without values", s: selector{exprs: []req{{Key: "tier", Operator: "In"}}}},
	{name: "In, values = []", s: selector{exprs: []req{{Key: "tier", Operator: "In", Values: []string{}}}}},
	{name: "NotIn without values", s: selector{exprs: []req{{Key: "tier", Operator: "NotIn"}}}},
	{name: "Exists with values", s: selector{exprs: []req{{Key: "gpu", Operator: "Exists", Values: []string{"1"}}}}},
	{name: "Exists with an empty value", s: selector{exprs: []req{{Key: "gpu", Operator: "Exists", Values: []string{""}}}}},
	{name: "DoesNotExist with values", s: selector{exprs: []req{{Key: "gpu", Operator: "DoesNotExist", Values: []string{"1"}}}}},
	{name: "operator in", s: selector{exprs: []req{{Key: "tier", Operator: "in", Values: []string{"web"}}}}},
	{name: "operator notin", s: selector{exprs: []req{{Key: "tier", Operator: "notin", Values: []string{"web"}}}}},
	{name: "operator exists", s: selector{exprs: []req{{Key: "tier", Operator: "exists"}}}},
	{name: "operator DoesNotexist", s: selector{exprs: []req{{Key: "tier", Operator: "DoesNotexist"}}}},
	{name: "operator IN", s: selector{exprs: []req{{Key: "tier", Operator: "IN", Values: []string{"web"}}}}},
	{name: "operator with a space", s: selector{exprs: []req{{Key: "tier", Operator: "In ", Values: []string{"web"}}}}},
	{name: "operator empty", s: selector{exprs: []req{{Key: "tier", Values: []string{"web"}}}}},
	{name: "operator =", s: selector{exprs: []req{{Key: "tier", Operator: "=", Values: []string{"web"}}}}},
	{name: "operator Equals", s: selector{exprs: []req{{Key: "tier", Operator: "Equals", Values: []string{"web"}}}}},
	{name: "operator Gt", s: selector{exprs: []req{{Key: "n", Operator: "Gt", Values: []string{"1"}}}}},
	{name: "duplicate key, In and NotIn", s: selector{exprs: []req{
		{Key: "tier", Operator: "In", Values: []string{"web", "db"}},
		{Key: "tier", Operator: "NotIn", Values: []string{"db"}},
	}}, valid: true},
	{name: "duplicate key, disjoint In", s: selector{exprs: []req{
		{Key: "tier", Operator: "In", Values: []string{"web"}},
		{Key: "tier", Operator: "In", Values: []string{"db"}},
	}}, valid: true},
	{name: "duplicate key, Exists and DoesNotExist", s: selector{exprs: []req{
		{Key: "gpu", Operator: "Exists"}, {Key: "gpu", Operator: "DoesNotExist"},
	}}, valid: true},
	{name: "duplicate key, match_labels and NotIn", s: selector{labels: map[string]string{"tier": "web"},
		exprs: []req{{Key: "tier", Operator: "NotIn", Values: []string{"web"}}}}, valid: true},
	{name: "duplicate values", s: selector{exprs: []req{{Key: "tier", Operator: "In", Values: []string{"web", "web"}}}}, valid: true},
	{name: "key of 63", s: selector{labels: map[string]string{strings.Repeat("k", 63): "v"}}, valid: true},
	{name: "key of 64", s: selector{labels: map[string]string{strings.Repeat("k", 64): "v"}}},
	{name: "key prefix of 253", s: selector{exprs: []req{{Key: strings.Repeat("d", 253) + "/k", Operator: "Exists"}}}, valid: true},
	{name: "key prefix of 254", s: selector{exprs: []req{{Key: strings.Repeat("d", 254) + "/k", Operator: "Exists"}}}},
	{name: "key prefix label of 64", s: selector{exprs: []req{{Key: strings.Repeat("d", 64) + ".com/k", Operator: "Exists"}}}, valid: true},
	{name: "key name of 64 after a prefix", s: selector{exprs: []req{{Key: "example.com/" + strings.Repeat("k", 64), Operator: "Exists"}}}},
	{name: "key upper case", s: selector{labels: map[string]string{"App": "guard"}}, valid: true},
	{name: "key prefix upper case", s: selector{labels: map[string]string{"Example.com/app": "guard"}}},
	{name: "key prefix underscore", s: selector{labels: map[string]string{"ex_ample.com/app": "guard"}}},
	{name: "key prefix empty", s: selector{labels: map[string]string{"/app": "guard"}}},
	{name: "key name empty", s: selector{labels: map[string]string{"example.com/": "guard"}}},
	{name: "key two slashes", s: selector{labels: map[string]string{"a/b/c": "guard"}}},
	{name: "key prefix empty label", s: selector{labels: map[string]string{"a..b/c": "guard"}}},
	{name: "key prefix leading dot", s: selector{labels: map[string]string{".a.com/c": "guard"}}},
	{name: "key prefix trailing dash", s: selector{labels: map[string]string{"a.com-/c": "guard"}}},
	{name: "key empty", s: selector{labels: map[string]string{"": "guard"}}},
	{name: "key leading dash", s: selector{exprs: []req{{Key: "-app", Operator: "Exists"}}}},
	{name: "key trailing dot", s: selector{exprs: []req{{Key: "app.", Operator: "Exists"}}}},
	{name: "key inner characters", s: selector{exprs: []req{{Key: "a.b-c_d", Operator: "Exists"}}}, valid: true},
	{name: "key non-ASCII", s: selector{exprs: []req{{Key: "é", Operator: "Exists"}}}},
	{name: "key with a space", s: selector{exprs: []req{{Key: "a b", Operator: "Exists"}}}},
	{name: "key with a newline", s: selector{exprs: []req{{Key: "a\n", Operator: "Exists"}}}},
	{name: "value of 63", s: selector{labels: map[string]string{"app": strings.Repeat("v", 63)}}, valid: true},
	{name: "value of 64", s: selector{labels: map[string]string{"app": strings.Repeat("v", 64)}}},
	{name: "value leading dash", s: selector{labels: map[string]string{"app": "-web"}}},
	{name: "value trailing underscore", s: selector{exprs: []req{{Key: "app", Operator: "In", Values: []string{"web_"}}}}},
	{name: "value with a slash", s: selector{exprs: []req{{Key: "app", Operator: "NotIn", Values: []string{"a/b"}}}}},
	{name: "value non-ASCII", s: selector{exprs: []req{{Key: "app", Operator: "In", Values: []string{"web", "é"}}}}},
	{name: "value inner characters", s: selector{exprs: []req{{Key: "app", Operator: "In", Values: []string{"A.b-c_D"}}}}, valid: true},
	{name: "invalid value after a valid one", s: selector{exprs: []req{{Key: "app", Operator: "In", Values: []string{"web", "a b"}}}}},
	{name: "valid requirement, then an invalid one", s: selector{exprs: []req{
		{Key: "app", Operator: "Exists"}, {Key: "tier", Operator: "In"},
	}}},
}

func TestSelectorMatchesKubernetes(t *testing.T) {
	for _, tc := range selectorCases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.s.kubernetes(); (err == nil) != tc.valid {
				t.Fatalf("%s: Kubernetes' error %v, the table says valid = %v", tc.s, err, tc.valid)
			}
			compareSelector(t, tc.s, map[string]string{"app": "guard", "example.com/gpu": "true"})
		})
	}
}

// FuzzSelectorMatchesKubernetes reads a selector and extra pod labels
// from its input (input_test.go) and compares NRI's selector with
// Kubernetes' on them, at each placement.
func FuzzSelectorMatchesKubernetes(f *testing.F) {
	f.Add([]byte{}) // the empty selector; more seeds in testdata/fuzz
	f.Fuzz(func(t *testing.T, data []byte) {
		in := input(data)
		s := selectorFrom(&in, selectorWords)
		compareSelector(t, s, labelsFrom(&in, selectorWords))
	})
}
