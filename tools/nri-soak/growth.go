package main

import (
	"fmt"
	"math"
)

// growthTolerance: a series grows if its whole 95 % interval of the slope
// lies above this fraction of its median per hour. A leak of one object
// per pod at the soak's rate of pods far exceeds it; a heap that
// breathes with the garbage collector does not.
const growthTolerance = 0.10

// warmup: samples of a runtime started during the soak are left out for
// this long after its first sample. A restarted runtime's RSS climbs for
// minutes while its heap and caches fill (the 30-minute runs of
// docs/reliability.md: a minute after a restart the slope of the next
// minutes is still tens of MiB an hour and falls to the noise by about
// five), and a slope fitted over such stretches measures that, not a
// leak.
const warmup = 300.0

type growthResult struct {
	Node   int
	Metric string
	Unit   string
	Fit    growthFit
	// Tol: the tolerance in Unit per hour.
	Tol float64
	// Span: the seconds the fitted samples cover, summed over the
	// processes (each from its first fitted sample to its last).
	Span    float64
	Verdict string
	Err     string
}

// The verdicts.
const (
	gBounded      = "bounded"      // the interval lies below the tolerance
	gGrowing      = "growing"      // the interval lies above it: a violation
	gInconclusive = "inconclusive" // the interval straddles it
	gNotJudged    = "not judged"   // the second half is shorter than growth_min
)

var growthMetrics = []struct {
	name, unit string
	get        func(sample) *float64
	scale      float64
}{
	{"RSS", "MiB", func(s sample) *float64 { return s.RSSKB }, 1.0 / 1024},
	{"goroutines", "", func(s sample) *float64 { return s.Goroutines }, 1},
	{"open fds", "", func(s sample) *float64 { return s.FDs }, 1},
}

// halves returns the second half of the fault phase: [mid, end].
func (r *records) secondHalf() (float64, float64) {
	end := r.Run.FaultsEnd
	if end == 0 {
		end = r.end()
	}
	return r.Run.Start + (end-r.Run.Start)/2, end
}

// checkGrowth fits each runtime's RSS, goroutines and open fds over the
// second half of the fault phase (fitGrowth: one level per process, the
// runtime's sandboxes and containers as covariate).
func checkGrowth(r *records) ([]growthResult, []violation) {
	var res []growthResult
	var vs []violation
	mid, end := r.secondHalf()
	for _, n := range r.Run.Nodes {
		first := map[int]float64{}
		var all []sample
		for _, s := range r.Samples {
			if s.Node != n.N || s.PID == 0 {
				continue
			}
			if _, ok := first[s.PID]; !ok {
				first[s.PID] = s.T
			}
			all = append(all, s)
		}
		var soakFirst float64
		if len(all) > 0 {
			soakFirst = all[0].T
		}
		for _, m := range growthMetrics {
			g := growthResult{Node: n.N, Metric: m.name, Unit: m.unit}
			var t, x, y []float64
			var seg []int
			for _, s := range all {
				if s.T < mid || s.T > end {
					continue
				}
				// A process that started during the soak: past its warm-up.
				if f := first[s.PID]; f > soakFirst && s.T < f+warmup {
					continue
				}
				v := m.get(s)
				if v == nil {
					continue
				}
				t = append(t, s.T)
				y = append(y, *v*m.scale)
				seg = append(seg, s.PID)
				if s.Containers != nil {
					x = append(x, *s.Containers)
				}
			}
			if len(x) != len(y) {
				x = nil
			}
			g.Span = coverage(t, seg)
			fit, err := fitGrowth(t, x, y, seg)
			if err != nil {
				g.Err, g.Verdict = err.Error(), gNotJudged
				res = append(res, g)
				continue
			}
			g.Fit = fit
			g.Tol = growthTolerance * math.Abs(fit.Median)
			switch {
			case g.Span < r.Run.GrowthMin:
				g.Verdict = gNotJudged
				g.Err = fmt.Sprintf("%s of samples at least %s into a process, under %s", dur(g.Span), dur(warmup), dur(r.Run.GrowthMin))
			case fit.Lo > g.Tol:
				g.Verdict = gGrowing
				vs = append(vs, r.violation(end, vGrowth, n.N, "%s's %s grows over the second half: %+.3g%s/h (95 %% interval %+.3g … %+.3g), above the tolerance %.3g%s/h (%.0f %% of its median %.4g)",
					n.Name, m.name, fit.Slope, sp(m.unit), fit.Lo, fit.Hi, g.Tol, sp(m.unit), growthTolerance*100, fit.Median))
			case fit.Hi <= g.Tol:
				g.Verdict = gBounded
			default:
				g.Verdict = gInconclusive
			}
			res = append(res, g)
		}
	}
	return res, vs
}

func sp(unit string) string {
	if unit == "" {
		return ""
	}
	return " " + unit
}

func (g growthResult) String() string {
	if g.Err != "" {
		return fmt.Sprintf("%s: %s", g.Metric, g.Err)
	}
	return fmt.Sprintf("%s: %+.3g%s/h [%+.3g, %+.3g] (%s)", g.Metric, g.Fit.Slope, sp(g.Unit), g.Fit.Lo, g.Fit.Hi, g.Verdict)
}

// coverage returns the time the samples at t cover: per segment (a
// process), from its first sample to its last.
func coverage(t []float64, seg []int) float64 {
	first, last := map[int]float64{}, map[int]float64{}
	for i, s := range seg {
		if _, ok := first[s]; !ok {
			first[s] = t[i]
		}
		last[s] = t[i]
	}
	c := 0.0
	for s := range first {
		c += last[s] - first[s]
	}
	return c
}
