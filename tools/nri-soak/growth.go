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

// countSlack: a count (goroutines, open fds) may differ by this many from
// the first rest to the last without growing: a cache filled once, a
// connection the kubelet keeps. A leak of one per pod is hundreds.
const countSlack = 2.0

// rssSlack: RSS (MiB) may differ by this much from the first rest to the
// last without growing. Go's scavenger returns the heap of the load before
// a rest over minutes, so that a rest's level depends on the load before
// it: in the 30-minute run of seed 3871859158 CRI-O's anonymous RSS fell
// by 2.3 MiB within one rest's 30 s. A leak of a few KiB per pod is more.
const rssSlack = 4.0

// warmup: samples of a runtime started during the soak are left out for
// this long after its first sample. A restarted runtime's RSS climbs for
// minutes while its heap and caches fill (the 30-minute runs of
// docs/reliability.md: a minute after a restart the slope of the next
// minutes is still tens of MiB an hour and falls to the noise by about
// five).
const warmup = 300.0

type growthResult struct {
	Node   int
	Metric string
	Unit   string
	Fit    growthFit
	// Tol: the tolerance in Unit per hour.
	Tol float64
	// Span: the seconds the fitted rests cover, summed over the processes
	// (each from its first fitted rest to its last).
	Span    float64
	Verdict string
	Err     string
}

// The verdicts.
const (
	gBounded      = "bounded"      // the interval lies below the tolerance
	gGrowing      = "growing"      // the interval lies above it: a violation
	gInconclusive = "inconclusive" // the interval straddles it
	gNotJudged    = "not judged"   // too few rests, or they span under growth_min
)

// growthMetrics are the series judged. RSS is its anonymous part: the rest
// is file pages (the binary's code as more of it runs, containerd's
// mmapped bolt database as it grows), which the kernel reclaims and which
// rise over a soak without anything leaking.
var growthMetrics = []struct {
	name, unit string
	get        func(sample) *float64
	scale      float64
	// slack: how much the series may differ over the rests' span.
	slack float64
}{
	{"RSS (anonymous)", "MiB", func(s sample) *float64 { return s.RSSAnonKB }, 1.0 / 1024, rssSlack},
	{"goroutines", "", func(s sample) *float64 { return s.Goroutines }, 1, countSlack},
	{"open fds", "", func(s sample) *float64 { return s.FDs }, 1, countSlack},
}

// secondHalf returns the second half of the fault phase: [mid, end].
func (r *records) secondHalf() (float64, float64) {
	end := r.Run.FaultsEnd
	if end == 0 {
		end = r.end()
	}
	return r.Run.Start + (end-r.Run.Start)/2, end
}

// restLevel is a runtime's level at a rest: the median of its samples
// then, of the process sampled most.
type restLevel struct {
	T, Y float64
	PID  int
}

// restLevels returns node n's levels of metric m at each quiet rest (the
// plan puts them in the second half of the planned time; the soak adds one
// at the end), leaving out a process in its warm-up.
func restLevels(r *records, n int, get func(sample) *float64, scale float64) []restLevel {
	first := map[int]float64{}
	soakFirst := math.Inf(1)
	for _, s := range r.Samples {
		if s.Node != n || s.PID == 0 {
			continue
		}
		if _, ok := first[s.PID]; !ok {
			first[s.PID] = s.T
		}
		soakFirst = math.Min(soakFirst, s.T)
	}
	var out []restLevel
	for _, rest := range r.Rests {
		if !rest.OK {
			continue
		}
		byPID := map[int][]float64{}
		at := map[int][]float64{}
		for _, s := range r.Samples {
			if s.Node != n || s.PID == 0 || s.T < rest.From || s.T > rest.To {
				continue
			}
			if f := first[s.PID]; f > soakFirst && s.T < f+warmup {
				continue
			}
			if v := get(s); v != nil {
				byPID[s.PID] = append(byPID[s.PID], *v*scale)
				at[s.PID] = append(at[s.PID], s.T)
			}
		}
		pid := 0
		for p, v := range byPID {
			if len(v) > len(byPID[pid]) || (len(v) == len(byPID[pid]) && p > pid) {
				pid = p
			}
		}
		// Two samples at least: a rest of one sample is a moment.
		if len(byPID[pid]) < 2 {
			continue
		}
		out = append(out, restLevel{T: mean(at[pid]), Y: median(byPID[pid]), PID: pid})
	}
	return out
}

// checkGrowth fits each runtime's RSS (anonymous), goroutines and open fds
// at the rests (the plan rests the churn in a long soak's second half, and
// the soak rests once more after its namespace is deleted): one level per
// rest, one intercept per process.
func checkGrowth(r *records) ([]growthResult, []violation) {
	var res []growthResult
	var vs []violation
	_, end := r.secondHalf()
	for _, n := range r.Run.Nodes {
		for _, m := range growthMetrics {
			g := growthResult{Node: n.N, Metric: m.name, Unit: m.unit}
			levels := restLevels(r, n.N, m.get, m.scale)
			var t, y []float64
			var seg []int
			for _, l := range levels {
				t, y, seg = append(t, l.T), append(y, l.Y), append(seg, l.PID)
			}
			g.Span = coverage(t, seg)
			fit, err := fitGrowth(t, y, seg)
			if err != nil {
				g.Verdict = gNotJudged
				g.Err = fmt.Sprintf("%d quiet rests: %v", len(levels), err)
				if len(r.Rests) == 0 {
					g.Err = "no rests recorded (a soak of " + dur(growthPlanMin) + " or longer rests its churn in the second half)"
				}
				res = append(res, g)
				continue
			}
			g.Fit = fit
			g.Tol = growthTolerance * math.Abs(fit.Median)
			if g.Span > 0 {
				g.Tol = math.Max(g.Tol, m.slack/(g.Span/3600))
			}
			switch {
			case g.Span < r.Run.GrowthMin:
				g.Verdict = gNotJudged
				g.Err = fmt.Sprintf("the rests span %s, under %s", dur(g.Span), dur(r.Run.GrowthMin))
			case fit.Lo > g.Tol:
				g.Verdict = gGrowing
				vs = append(vs, r.violation(end, vGrowth, n.N, "%s's %s grows from rest to rest: %+.3g%s/h (95 %% interval %+.3g … %+.3g), above the tolerance %.3g%s/h",
					n.Name, m.name, fit.Slope, sp(m.unit), fit.Lo, fit.Hi, g.Tol, sp(m.unit)))
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
