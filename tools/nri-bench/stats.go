package main

import (
	"math/rand/v2"
	"slices"
	"time"
)

// Round noise on a shared 2-vCPU machine (±10 % per round) is larger than
// the 3 % and 5 % margins of the targets, so a single ratio of two rounds
// cannot settle them. The comparison is therefore made per round, (c)
// against (b) of the same round, and its uncertainty is estimated by
// resampling whole rounds: a round is the unit that the load changes hit.

// bootstrapResamples is how many round resamples estimate an interval.
const bootstrapResamples = 4000

// comparison is (c) against (b) over paired rounds.
type comparison struct {
	// rate is the median over rounds of (c)/(b) throughput, with its 95 %
	// bootstrap interval.
	rate, rateLo, rateHi float64
	// p99 is (c)'s p99 over all its creates divided by (b)'s, with its 95 %
	// bootstrap interval.
	p99, p99Lo, p99Hi float64
}

// compare pairs round i of b with round i of c. The seed makes a report
// reproducible from its rounds.
func compare(b, c []result, seed uint64) comparison {
	n := min(len(b), len(c))
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	rateOf := func(idx []int) float64 {
		rs := make([]float64, len(idx))
		for k, i := range idx {
			rs[k] = c[i].rate / b[i].rate
		}
		return median(rs)
	}
	sb, sc := sortedLats(b[:n]), sortedLats(c[:n])
	p99Of := func(idx []int) float64 {
		return float64(pooledP99(sc, idx)) / float64(pooledP99(sb, idx))
	}
	cmp := comparison{rate: rateOf(all), p99: p99Of(all)}
	if n < 2 {
		cmp.rateLo, cmp.rateHi, cmp.p99Lo, cmp.p99Hi = cmp.rate, cmp.rate, cmp.p99, cmp.p99
		return cmp
	}
	rng := rand.New(rand.NewPCG(seed, 0x6e726967617465))
	rates := make([]float64, bootstrapResamples)
	p99s := make([]float64, bootstrapResamples)
	idx := make([]int, n)
	for r := range bootstrapResamples {
		for k := range idx {
			idx[k] = rng.IntN(n)
		}
		rates[r], p99s[r] = rateOf(idx), p99Of(idx)
	}
	cmp.rateLo, cmp.rateHi = interval95(rates)
	cmp.p99Lo, cmp.p99Hi = interval95(p99s)
	return cmp
}

// sortedLats returns each round's latencies, sorted.
func sortedLats(rs []result) [][]time.Duration {
	s := make([][]time.Duration, len(rs))
	for i, r := range rs {
		s[i] = slices.Sorted(slices.Values(r.lats))
	}
	return s
}

// pooledP99 is percentiles' p99 of the union of the rounds idx (a round may
// repeat) of sorted. Only the top m = N - rank creates of the union matter,
// and those are among each round's own top m, so the resampling loop sorts
// a few dozen values instead of every create.
func pooledP99(sorted [][]time.Duration, idx []int) time.Duration {
	total := 0
	for _, i := range idx {
		total += len(sorted[i])
	}
	if total == 0 {
		return 0
	}
	rank := max(0, min(int(0.99*float64(total)+0.999999)-1, total-1))
	m := total - rank // the wanted create is the m-th largest
	var top []time.Duration
	for _, i := range idx {
		s := sorted[i]
		top = append(top, s[max(0, len(s)-m):]...)
	}
	slices.Sort(top)
	return top[len(top)-m]
}

// verdict says whether the interval [lo, hi] meets a target that wants the
// value at least (atLeast) or at most the bound: "met" when the whole
// interval is on the right side, "missed" when it is wholly on the wrong
// side, "unsettled" (more rounds needed) when it straddles the bound.
func verdict(lo, hi, bound float64, atLeast bool) string {
	if !atLeast {
		lo, hi, bound = -hi, -lo, -bound
	}
	switch {
	case lo >= bound:
		return "met"
	case hi < bound:
		return "missed"
	default:
		return "unsettled"
	}
}

// median returns the median of xs (the mean of the middle two for an even
// count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// interval95 returns the 2.5th and 97.5th percentiles of xs.
func interval95(xs []float64) (float64, float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	at := func(p float64) float64 { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return at(0.025), at(0.975)
}
