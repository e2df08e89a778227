package main

import (
	"slices"
	"strings"
	"testing"
)

func TestPlanIsTheSeeds(t *testing.T) {
	nodes := []string{"crio", "containerd"}
	a, b := makePlan(37, 1800, nodes), makePlan(37, 1800, nodes)
	if a.digest() != b.digest() {
		t.Fatalf("the same seed gave two plans: %s, %s", a.digest(), b.digest())
	}
	if c := makePlan(38, 1800, nodes); c.digest() == a.digest() {
		t.Fatalf("seeds 37 and 38 gave the same plan")
	}
	// A seed's plan does not change unless on purpose: the docs and the CI
	// name seeds, and a run again must draw what the first one drew.
	if d := makePlan(136, 300, nodes).digest(); d != "e6abff7ed00d" {
		t.Fatalf("seed 136, 5 min: plan digest %s, want e6abff7ed00d (the CI's plan changed)", d)
	}
	// A longer run of a seed begins as the shorter one: every fault the
	// short one can start (the plan holds more than its duration takes).
	short, long := makePlan(37, 300, nodes), makePlan(37, 1800, nodes)
	planned := 0.0
	for i := 0; planned <= 300; i++ {
		planned += short.Faults[i].Gap + short.Faults[i].Hold
		if short.Faults[i] != long.Faults[i] {
			t.Fatalf("fault %d: %+v in 5 min, %+v in 30", i, short.Faults[i], long.Faults[i])
		}
	}
	for i := range short.Churn {
		if short.Churn[i] != long.Churn[i] {
			t.Fatalf("churn %d: %+v in 5 min, %+v in 30", i, short.Churn[i], long.Churn[i])
		}
	}
}

func TestPlanDrawsEveryKindBeforeRepeating(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		p := makePlan(seed, 600, []string{"crio", "containerd"})
		seen := map[string]bool{}
		for i, f := range p.Faults {
			if i == len(faultKinds) {
				break
			}
			if seen[f.Kind] {
				t.Fatalf("seed %d: %s twice among the first %d faults", seed, f.Kind, len(faultKinds))
			}
			seen[f.Kind] = true
		}
		if len(seen) != len(faultKinds) {
			t.Fatalf("seed %d: %d kinds in the first bag, want %d", seed, len(seen), len(faultKinds))
		}
	}
}

func TestPlanFaultsFitTheirKind(t *testing.T) {
	p := makePlan(7, 3600, []string{"containerd", "crio"})
	if p.Faults[0].Gap != firstGap {
		t.Errorf("first gap %.1f, want %.1f", p.Faults[0].Gap, firstGap)
	}
	for _, f := range p.Faults {
		switch {
		case clusterWide[f.Kind] && f.Node != 0:
			t.Errorf("%s on node %d, want every node (0)", f.Kind, f.Node)
		case f.Kind == kIgnoreFlip && f.Node != 2:
			t.Errorf("ignore-flip on node %d, the CRI-O node is 2", f.Node)
		case !clusterWide[f.Kind] && (f.Node < 1 || f.Node > 2):
			t.Errorf("%s on node %d", f.Kind, f.Node)
		}
		if r, ok := holdRange[f.Kind]; ok && (f.Hold < r[0] || f.Hold > r[1]) {
			t.Errorf("%s holds %.1f s, outside %v", f.Kind, f.Hold, r)
		}
		if f.Gap < firstGap && (f.Gap < gapMin || f.Gap > gapMax) {
			t.Errorf("gap %.1f outside [%v, %v]", f.Gap, gapMin, gapMax)
		}
	}
	// No CRI-O node: no ignore-flip.
	for _, f := range makePlan(7, 3600, []string{"containerd", "containerd"}).Faults {
		if f.Kind == kIgnoreFlip {
			t.Fatalf("ignore-flip planned without a CRI-O node")
		}
	}
}

func TestPlanChurn(t *testing.T) {
	p := makePlan(1, 300, []string{"crio", "containerd"})
	if len(p.Churn) < 300/int(churnMax) {
		t.Fatalf("%d churn operations in 300 s", len(p.Churn))
	}
	last, jobs := -1.0, 0
	ops := map[string]int{}
	for _, c := range p.Churn {
		if c.At <= last || c.At >= 300 {
			t.Fatalf("churn at %.1f after %.1f", c.At, last)
		}
		last = c.At
		ops[c.Op]++
		if c.Op == "job" {
			jobs++
			if c.Arg != jobs {
				t.Fatalf("job %d numbered %d", jobs, c.Arg)
			}
		}
	}
	for _, o := range churnOps {
		if ops[o.op] == 0 {
			t.Errorf("no %s in 300 s", o.op)
		}
	}
	var b strings.Builder
	if err := p.writeChurn(&b); err != nil || strings.Count(b.String(), "\n") != len(p.Churn) {
		t.Fatalf("writeChurn: %v", err)
	}
}

func TestPlanOfSomeKinds(t *testing.T) {
	only := []string{kPluginKill, kPluginHang, kIgnoreFlip}
	p := makePlanOf(5, 1800, []string{"crio", "containerd"}, only)
	for _, f := range p.Faults {
		if !slices.Contains(only, f.Kind) {
			t.Fatalf("%s drawn, not among %v", f.Kind, only)
		}
	}
	if len(p.Faults) == 0 || p.digest() == makePlan(5, 1800, []string{"crio", "containerd"}).digest() {
		t.Fatalf("the kinds did not change the plan")
	}
}

func TestPlanRestartsRuntimesEarlyInALongSoak(t *testing.T) {
	nodes := []string{"crio", "containerd"}
	for seed := uint64(0); seed < 50; seed++ {
		for _, duration := range []float64{growthPlanMin, 1800, 3600} {
			p := makePlan(seed, duration, nodes)
			planned, after := 0.0, map[string]int{}
			for _, f := range p.Faults {
				if restartKinds[f.Kind] && planned > duration/4 {
					t.Fatalf("seed %d, %.0f s: %s planned at %.1f s, after the first quarter", seed, duration, f.Kind, planned)
				}
				if planned > duration/4 {
					after[f.Kind]++
				}
				planned += f.Gap + f.Hold
			}
			// The other kinds go on to the end.
			for _, k := range faultKinds {
				if !restartKinds[k] && after[k] == 0 {
					t.Fatalf("seed %d, %.0f s: no %s after the first quarter", seed, duration, k)
				}
			}
		}
	}
	// A short soak, which cannot judge growth, keeps every kind throughout.
	p := makePlan(136, 300, nodes)
	if !slices.ContainsFunc(p.Faults[len(faultKinds):], func(f fault) bool { return restartKinds[f.Kind] }) {
		t.Fatalf("seed 136, 5 min: no runtime restart after the first bag")
	}
}

func TestPlanRestsTheChurnInALongSoak(t *testing.T) {
	nodes := []string{"crio", "containerd"}
	for seed := uint64(0); seed < 20; seed++ {
		for _, duration := range []float64{growthPlanMin, 1800, 3600} {
			p := makePlan(seed, duration, nodes)
			var rests []float64
			for _, c := range p.Churn {
				if c.Op == "rest" {
					if c.Arg != restHold || c.Node != 0 {
						t.Fatalf("seed %d, %.0f s: %+v, want a rest of %.0f s on node 0", seed, duration, c, restHold)
					}
					rests = append(rests, c.At)
				}
			}
			if len(rests) != len(restAt) {
				t.Fatalf("seed %d, %.0f s: rests at %v, want %d", seed, duration, rests, len(restAt))
			}
			for i, r := range rests {
				if r != round1(restAt[i]*duration) || r < duration/2 {
					t.Fatalf("seed %d, %.0f s: rest %d at %.1f, want %.1f in the second half", seed, duration, i, r, restAt[i]*duration)
				}
				for _, c := range p.Churn {
					if c.Op != "rest" && c.At >= r && c.At < r+restWindow {
						t.Fatalf("seed %d, %.0f s: %s at %.1f during the rest at %.1f", seed, duration, c.Op, c.At, r)
					}
				}
			}
			// Around the rests, the churn is the seed's churn of a soak
			// without rests (its streams are drawn the same).
			plain := makePlan(seed, growthPlanMin-1, nodes)
			var want, got []churn
			for _, c := range plain.Churn {
				if c.At < growthPlanMin-2 && !slices.ContainsFunc(rests, func(r float64) bool { return c.At >= r && c.At < r+restWindow }) {
					want = append(want, c)
				}
			}
			for _, c := range p.Churn {
				if c.Op != "rest" && c.At < growthPlanMin-2 {
					got = append(got, c)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d, %.0f s: the churn around the rests is not the churn without them: %d ops, want %d", seed, duration, len(got), len(want))
			}
		}
	}
	// A short soak cannot judge growth and does not rest.
	for _, c := range makePlan(136, 300, nodes).Churn {
		if c.Op == "rest" {
			t.Fatalf("seed 136, 5 min: a rest at %.1f", c.At)
		}
	}
}
