package main

import (
	"strings"
	"testing"
)

// growthRecords: a 30-minute soak of one node whose runtime (one process)
// is sampled every 5 s to 2000 s, resting at 900, 1125, 1350, 1575 and
// 1900 s (30 s of samples each). busy gives a sample's value under churn,
// rest its value at a rest.
func growthRecords(busy, rest func(t float64) float64) *records {
	r := &records{Run: runInfo{Start: 0, FaultsEnd: 1800, End: 2000, GrowthMin: 600,
		Nodes: []nodeInfo{{N: 1, Name: "nrigate-1", Runtime: "crio"}}}}
	for _, b := range []float64{900, 1125, 1350, 1575, 1900} {
		r.Rests = append(r.Rests, restRec{Begin: b, Quiet: b + 15, From: b + 25, To: b + 55, OK: true})
	}
	resting := func(t float64) bool {
		for _, x := range r.Rests {
			if t >= x.From && t <= x.To {
				return true
			}
		}
		return false
	}
	for t := 0.0; t <= 2000; t += 5 {
		v := busy(t)
		if resting(t) {
			v = rest(t)
		}
		kb, n := v*1024, v
		r.Samples = append(r.Samples, sample{T: t, Node: 1, PID: 7, RSSAnonKB: &kb, FDs: &n, Goroutines: &n})
	}
	return r
}

// wobble: a deterministic load pattern, as churn gives (tens of requests in
// flight, up and down).
func wobble(t float64) float64 { return float64(int(t*7919)%41) - 20 }

func verdicts(gs []growthResult) map[string]string {
	m := map[string]string{}
	for _, g := range gs {
		m[g.Metric] = g.Verdict
	}
	return m
}

// Under churn the level follows the requests in flight, and more of them
// late in the run read as growth in a slope over every sample; at rest the
// runtime is back where it was: bounded.
func TestGrowthJudgedAtRests(t *testing.T) {
	r := growthRecords(
		func(t float64) float64 { return 60 + t/60 + wobble(t) }, // +60 an hour under load
		func(t float64) float64 { return 37 + float64(int(t)%2)*0.2 },
	)
	gs, vs := checkGrowth(r)
	if len(vs) != 0 {
		t.Fatalf("violations %v, want none", vs)
	}
	for m, v := range verdicts(gs) {
		if v != gBounded {
			t.Errorf("%s: %s, want %s (%+v)", m, v, gBounded, gs)
		}
	}
}

// A runtime that keeps one fd per 20 s (about one per pod) is higher at
// every rest: growing, a violation naming the series.
func TestGrowthAtRestsIsAViolation(t *testing.T) {
	r := growthRecords(
		func(t float64) float64 { return 60 + wobble(t) },
		func(t float64) float64 { return 37 + t/20 },
	)
	gs, vs := checkGrowth(r)
	if v := verdicts(gs); v["open fds"] != gGrowing || v["goroutines"] != gGrowing || v["RSS (anonymous)"] != gGrowing {
		t.Fatalf("verdicts %v, want growing", v)
	}
	if len(vs) != 3 || vs[0].Kind != vGrowth || !strings.Contains(vs[0].Detail, "grows from rest to rest") {
		t.Fatalf("violations %+v", vs)
	}
}

// Two objects more at the last rest than at the first are within the
// slack of a count; an RSS that rose 2 % is within its tolerance.
func TestGrowthSlack(t *testing.T) {
	r := growthRecords(
		func(t float64) float64 { return 60 + wobble(t) },
		func(t float64) float64 {
			if t > 1800 {
				return 39
			}
			return 37
		},
	)
	gs, vs := checkGrowth(r)
	if len(vs) != 0 {
		t.Fatalf("violations %v (%+v)", vs, gs)
	}
	if v := verdicts(gs); v["open fds"] != gBounded && v["open fds"] != gInconclusive {
		t.Fatalf("open fds: %s", v["open fds"])
	}
}

// Without rests, or with rests that were not quiet, growth is not judged,
// and the report says why.
func TestGrowthNotJudgedWithoutRests(t *testing.T) {
	flat := func(float64) float64 { return 37 }
	r := growthRecords(flat, flat)
	r.Rests = nil
	gs, vs := checkGrowth(r)
	if len(vs) != 0 || gs[0].Verdict != gNotJudged || !strings.Contains(gs[0].Err, "no rests recorded") {
		t.Fatalf("no rests: %+v, %v", gs[0], vs)
	}
	r = growthRecords(flat, flat)
	for i := range r.Rests[:3] {
		r.Rests[i].OK, r.Rests[i].Why = false, "soak pods still there"
	}
	gs, _ = checkGrowth(r)
	if gs[0].Verdict != gNotJudged || !strings.Contains(gs[0].Err, "2 quiet rests") {
		t.Fatalf("two quiet rests: %+v", gs[0])
	}
	// Rests that span less than growth_min.
	r = growthRecords(flat, flat)
	r.Run.GrowthMin = 1200
	gs, _ = checkGrowth(r)
	if gs[0].Verdict != gNotJudged || !strings.Contains(gs[0].Err, "the rests span") {
		t.Fatalf("short span: %+v", gs[0])
	}
}

// A runtime restarted within its warm-up before a rest is not judged at
// that rest; a process of its own starts from its own level.
func TestGrowthRestartedRuntime(t *testing.T) {
	r := growthRecords(func(float64) float64 { return 60 }, func(float64) float64 { return 37 })
	for i := range r.Samples {
		if r.Samples[i].T >= 1000 {
			r.Samples[i].PID = 8
			v := *r.Samples[i].FDs + 10 // another level
			r.Samples[i].FDs = &v
		}
	}
	levels := restLevels(r, 1, func(s sample) *float64 { return s.FDs }, 1)
	var pids []int
	for _, l := range levels {
		pids = append(pids, l.PID)
	}
	// 900: process 7; 1125: 8 in its warm-up (from 1000 to 1300); then 8.
	if len(levels) != 4 || pids[0] != 7 || pids[1] != 8 || levels[1].T < 1350 {
		t.Fatalf("levels %+v", levels)
	}
}
