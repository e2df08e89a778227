// Package selectortest checks that NRI's label selector (the plugin
// policy's pod_selector, implemented in NRI so that NRI's go.mod needs no
// k8s.io module) accepts the same selectors as Kubernetes and matches the
// same label sets: k8s.io/apimachinery/pkg/labels is the reference. It
// lives outside NRI's module, which must not require k8s.io/apimachinery.
// scope_test.go checks the policy's whole scope and exemption decision
// against the documented rule, written down independently, with
// Kubernetes' selector.
package selectortest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/adaptation/policy"
	"k8s.io/apimachinery/pkg/labels"
)

// labelSets returns label sets that exercise a Kubernetes selector: for
// each requirement, its key with each of its values, with another value,
// with an integer, and absent; plus the given extra labels.
func labelSets(sel labels.Selector, extra map[string]string) []map[string]string {
	reqs, _ := sel.Requirements()
	base := map[string]string{}
	for k, v := range extra {
		base[k] = v
	}
	sets := []map[string]string{base, {}}
	with := func(key, value string) map[string]string {
		s := map[string]string{}
		for k, v := range base {
			s[k] = v
		}
		s[key] = value
		return s
	}
	for _, r := range reqs {
		for _, v := range r.ValuesUnsorted() {
			sets = append(sets, with(r.Key(), v))
		}
		sets = append(sets, with(r.Key(), "other"), with(r.Key(), "7"), with(r.Key(), ""))
		// All requirements satisfied by their first value at once.
		all := map[string]string{}
		for _, r2 := range reqs {
			if vals := r2.ValuesUnsorted(); len(vals) > 0 {
				all[r2.Key()] = vals[0]
			} else {
				all[r2.Key()] = "x"
			}
		}
		sets = append(sets, all)
	}
	return sets
}

// compare fails if NRI's selector and Kubernetes' disagree on sel.
func compare(t *testing.T, sel string, extra map[string]string) {
	t.Helper()
	ours, ourErr := policy.ParseSelector(sel)
	theirs, theirErr := labels.Parse(sel)
	if (ourErr == nil) != (theirErr == nil) {
		t.Fatalf("selector %q: NRI error %v, Kubernetes error %v", sel, ourErr, theirErr)
	}
	if ourErr != nil {
		return
	}
	for _, set := range labelSets(theirs, extra) {
		if got, want := ours.Matches(set), theirs.Matches(labels.Set(set)); got != want {
			t.Fatalf("selector %q on %v: NRI matches %v, Kubernetes %v", sel, set, got, want)
		}
	}
}

var seeds = []string{
	"",
	" ",
	"app=guard",
	"app==guard",
	"app!=guard",
	"app.kubernetes.io/name=device-injector",
	"example.com/a=b",
	"a in (x, y),b notin (z),c,!d",
	"a in ()",
	"a in (,)",
	"a in (x,,y)",
	"a in (,x)",
	"a notin (x,)",
	"in in (in)",
	"notin notin (notin)",
	"a=in",
	"a>1",
	"a<-1",
	"a>1,a<10",
	"a>x",
	"a=",
	"a==",
	"a!=",
	"!a",
	"!a=b",
	"!!a",
	"a,",
	",a",
	"a,,b",
	"a b",
	"a=b=c",
	"a=b c",
	"(a)",
	"a in b",
	"a in (b",
	"a in (b c)",
	"a in (b,c",
	"a/b/c=d",
	"/a=b",
	"A/b=c",
	"a/=b",
	"-a=b",
	"a-=b",
	"a=-b",
	"a=b-",
	"a=" + strings.Repeat("x", 63),
	"a=" + strings.Repeat("x", 64),
	strings.Repeat("k", 63) + "=v",
	strings.Repeat("k", 64) + "=v",
	strings.Repeat("d", 254) + "/k=v",
	"a\tin\n(x)",
	"a=b\x00,c",
	"a \x00=b",
	"a\x00b=c",
	"\x00",
	"a=é",
	"a==b==c",
	"a!==b",
	"a=!b",
	"a<=1",
	"a>=1",
	"a=(b)",
	"a in (b)=c",
	"a,!",
	"!",
	"=",
	"a notin ()",
	"x.y_z-1=1.a_b-c",
}

func TestSelectorMatchesKubernetes(t *testing.T) {
	for _, sel := range seeds {
		t.Run(fmt.Sprintf("%q", sel), func(t *testing.T) {
			compare(t, sel, map[string]string{"app": "guard"})
		})
	}
}

func FuzzSelectorMatchesKubernetes(f *testing.F) {
	for _, sel := range seeds {
		f.Add(sel, "app", "guard")
	}
	f.Fuzz(func(t *testing.T, sel, key, value string) {
		compare(t, sel, map[string]string{key: value})
	})
}
