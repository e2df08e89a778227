package selectortest

import (
	"fmt"
	"sort"
	"strings"

	nri "github.com/containerd/nri/pkg/adaptation"
)

// input is the bytes of a fuzz case, read as a sequence of choices. Past
// its end every choice reads as 0, the first word of a vocabulary, so
// that every input is a complete case and a short input a simple one.
type input []byte

func (in *input) next() byte {
	if len(*in) == 0 {
		return 0
	}
	b := (*in)[0]
	*in = (*in)[1:]
	return b
}

// intn returns a number from 0 to n-1.
func (in *input) intn(n int) int {
	return int(in.next()) % n
}

// words is a vocabulary: the common words, which most bytes choose, and
// the edge cases, which a byte from edgeByte to rawByte chooses with the
// byte after it.
type words struct {
	common, edge []string
}

const (
	edgeByte = 0xe0
	// rawByte starts a raw string in word: a string of the input's own
	// bytes instead of a word, for the cases no vocabulary foresees.
	rawByte = 0xf0
)

// pick returns one of the words.
func (in *input) pick(w words) string {
	b := in.next()
	if b >= edgeByte && len(w.edge) > 0 {
		return w.edge[in.intn(len(w.edge))]
	}
	return w.common[int(b)%len(w.common)]
}

// word returns one of the words or, for a byte of rawByte or more, the
// next up to 79 bytes of the input as they are.
func (in *input) word(w words) string {
	if len(*in) == 0 || (*in)[0] < rawByte {
		return in.pick(w)
	}
	in.next()
	n := min(in.intn(80), len(*in))
	s := string((*in)[:n])
	*in = (*in)[n:]
	return s
}

// vocabulary is the words of a selector and of pod labels.
type vocabulary struct {
	keys, values, operators words
}

// selectorWords are the words of the selector fuzz target: valid forms,
// and the edges and invalid forms Kubernetes' validation distinguishes.
var selectorWords = vocabulary{
	keys: words{
		common: []string{
			"app", "tier", "gpu", "a", "app.kubernetes.io/name", "example.com/gpu", "k8s.io/x",
			"A", "a.b-c_d", "a1", "1a", "in", "notin", "0.0.0.0/a",
			strings.Repeat("k", 63), strings.Repeat("d", 253) + "/k", strings.Repeat("d", 64) + ".com/k",
			"example.com/" + strings.Repeat("k", 63),
		},
		edge: []string{
			"", " ", "a b", "é", "a\n", "a\x00", "x/y/z", "/a", "a/", "-a", "a-", "_a", "a_", ".a", "a.",
			"Example.com/a", "ex_ample.com/a", "a..b/c", ".a.com/b", "-a.com/b", "a.com-/b", "a.com./b",
			strings.Repeat("k", 64), strings.Repeat("d", 254) + "/k", "example.com/" + strings.Repeat("k", 64),
		},
	},
	values: words{
		common: []string{"web", "db", "cache", "guard", "x", "true", "1", "", "A", "a.b-c_d", "7", strings.Repeat("v", 63)},
		edge:   []string{"-a", "a-", "_a", "a_", ".a", "a.", "a b", "é", "a/b", "a\n", "a\x00", "*", strings.Repeat("v", 64)},
	},
	operators: words{
		common: []string{"In", "NotIn", "Exists", "DoesNotExist"},
		edge: []string{"in", "notin", "exists", "doesnotexist", "IN", "Notin", "DoesNotexist", "In ",
			"", "=", "==", "!=", "Equals", "Gt", "Lt", "!"},
	},
}

// selector is a label selector as NRI's configuration holds it.
type selector struct {
	labels map[string]string
	exprs  []nri.LabelSelectorRequirement
}

func (s selector) empty() bool {
	return len(s.labels) == 0 && len(s.exprs) == 0
}

func (s selector) String() string {
	return fmt.Sprintf("match_labels = %s, match_expressions = %s", describeLabels(s.labels), describeExprs(s.exprs))
}

// selectorFrom reads up to 3 match_labels and up to 4 match_expressions
// of up to 3 values, an absent values and "values = []" among them.
func selectorFrom(in *input, v vocabulary) selector {
	var s selector
	if n := in.intn(4); n > 0 {
		s.labels = map[string]string{}
		for range n {
			s.labels[in.word(v.keys)] = in.word(v.values)
		}
	}
	for range in.intn(5) {
		e := nri.LabelSelectorRequirement{Key: in.word(v.keys), Operator: in.word(v.operators)}
		// Mostly the values the operator takes; then the others.
		count := 0
		switch n := in.intn(8); {
		case n == 6: // no values key
		case n == 7:
			e.Values = []string{}
		case e.Operator == "Exists" || e.Operator == "DoesNotExist":
			count = n / 4
		default:
			count = 1 + n%3
		}
		for range count {
			e.Values = append(e.Values, in.word(v.values))
		}
		s.exprs = append(s.exprs, e)
	}
	return s
}

// labelsFrom reads up to 3 pod labels.
func labelsFrom(in *input, v vocabulary) map[string]string {
	labels := map[string]string{}
	for range in.intn(4) {
		labels[in.word(v.keys)] = in.word(v.values)
	}
	return labels
}

// labelSets returns the pod labels that exercise a selector: none, the
// extra ones, every requirement satisfied at once by the first value the
// selector names for its key, and that set with each key of the selector
// set in turn to each value the selector names for it, to another value,
// to the empty value, and left out.
func labelSets(s selector, extra ...map[string]string) []map[string]string {
	values := map[string][]string{}
	for k, v := range s.labels {
		values[k] = append(values[k], v)
	}
	for _, e := range s.exprs {
		values[e.Key] = append(values[e.Key], e.Values...)
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)

	all := map[string]string{}
	for _, k := range keys {
		all[k] = "x"
		if len(values[k]) > 0 {
			all[k] = values[k][0]
		}
	}
	with := func(k, v string, set bool) map[string]string {
		m := map[string]string{}
		for k2, v2 := range all {
			m[k2] = v2
		}
		if set {
			m[k] = v
		} else {
			delete(m, k)
		}
		return m
	}
	sets := append([]map[string]string{{}, all}, extra...)
	for _, k := range keys {
		for _, v := range append(values[k], "other", "") {
			sets = append(sets, with(k, v, true))
		}
		sets = append(sets, with(k, "", false))
	}
	return sets
}

func describeLabels(m map[string]string) string {
	if m == nil {
		return "nil"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%q = %q", k, m[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func describeExprs(exprs []nri.LabelSelectorRequirement) string {
	if exprs == nil {
		return "nil"
	}
	parts := make([]string, len(exprs))
	for i, e := range exprs {
		parts[i] = fmt.Sprintf("{key = %q, operator = %q, values = %s}", e.Key, e.Operator, describeList(e.Values))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// describePlugins shows a configuration in full, for failure messages.
func describePlugins(plugins nri.RequiredPlugins) string {
	keys := make([]string, 0, len(plugins))
	for k := range plugins {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		p := plugins[k]
		fmt.Fprintf(&b, "[%q] fail_policy = %q, events = %s, registration_wait = %q, readiness = %q, "+
			"namespaces = %s, exclude_namespaces = %s, %s, runtime_handlers = %s, exempt_static_pods = %s",
			k, p.FailPolicy, describeList(p.Events), p.RegistrationWait, p.Readiness, describeList(p.Namespaces),
			describeList(p.ExcludeNamespaces), selector{p.MatchLabels, p.MatchExpressions}, describeList(p.RuntimeHandlers),
			describeBool(p.ExemptStaticPods))
		for i, e := range p.Exempt {
			fmt.Fprintf(&b, "; exempt[%d]: namespace = %q, %s, annotation = %q",
				i, e.Namespace, selector{e.MatchLabels, e.MatchExpressions}, e.Annotation)
		}
	}
	return b.String()
}

func describeList(l []string) string {
	if l == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", l)
}

func describeBool(b *bool) string {
	if b == nil {
		return "unset"
	}
	return fmt.Sprint(*b)
}

// describePod shows what of a pod the decision reads.
func describePod(pod *nri.PodSandbox) string {
	return fmt.Sprintf("pod namespace = %q, labels = %s, annotations = %s, runtime_handler = %q",
		pod.GetNamespace(), describeLabels(pod.GetLabels()), describeLabels(pod.GetAnnotations()), pod.GetRuntimeHandler())
}
