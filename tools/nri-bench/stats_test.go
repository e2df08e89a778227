package main

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// rounds builds results with the given throughputs; each round's latencies
// are 200 draws around base scaled by scale[i] (so p99 follows the scale).
func rounds(rates, scale []float64, base time.Duration, seed uint64) []result {
	rng := rand.New(rand.NewPCG(seed, 1))
	rs := make([]result, len(rates))
	for i, r := range rates {
		lats := make([]time.Duration, 200)
		for k := range lats {
			lats[k] = time.Duration(float64(base) * scale[i] * (0.5 + rng.Float64()))
		}
		rs[i] = result{rate: r, lats: lats}
	}
	return rs
}

func ones(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

func TestCompareRecordedContainerdRounds(t *testing.T) {
	// The per-round (b) and (c) throughputs of one containerd run
	// (docs/performance.md, 11 rounds of 400 creates).
	b := []float64{95.1, 99.9, 94.6, 98.6, 94.0, 96.4, 97.2, 95.5, 98.5, 95.1, 97.4}
	c := []float64{98.2, 108.7, 102.8, 92.1, 99.5, 96.2, 98.7, 98.1, 99.3, 94.6, 95.3}
	k := compare(rounds(b, ones(11), 25*time.Millisecond, 1), rounds(c, ones(11), 25*time.Millisecond, 2), 7)
	if math.Abs(k.rate-1.015) > 0.001 {
		t.Errorf("median of per-round ratios = %.4f, want 1.015 (round 7's 98.7/97.2)", k.rate)
	}
	if !(k.rateLo <= k.rate && k.rate <= k.rateHi) {
		t.Errorf("interval [%.3f, %.3f] does not hold the median %.3f", k.rateLo, k.rateHi, k.rate)
	}
	if k.rateLo < 0.97 || k.rateHi > 1.09 {
		t.Errorf("interval [%.3f, %.3f] is wider than these rounds allow (ratios 0.934..1.088)", k.rateLo, k.rateHi)
	}
	if v := verdict(k.rateLo, k.rateHi, minThroughputRatio, true); v != "met" {
		t.Errorf("verdict = %s, want met", v)
	}
	if !(k.p99Lo <= k.p99 && k.p99 <= k.p99Hi) || k.p99Lo < 0.9 || k.p99Hi > 1.1 {
		t.Errorf("p99 ratio %.3f [%.3f, %.3f]: same latency distribution should give ~1", k.p99, k.p99Lo, k.p99Hi)
	}
}

func TestCompareSeesASlowerC(t *testing.T) {
	// (c) 10 % slower in every round, with ±5 % round noise shared by both.
	noise := []float64{1.05, 0.95, 1.0, 1.03, 0.97, 1.02, 0.98, 1.04, 0.96}
	b := make([]float64, len(noise))
	c := make([]float64, len(noise))
	slow := make([]float64, len(noise))
	for i, f := range noise {
		b[i], c[i], slow[i] = 100*f, 90*f, 1.2
	}
	k := compare(rounds(b, ones(len(b)), 20*time.Millisecond, 3), rounds(c, slow, 20*time.Millisecond, 4), 9)
	if math.Abs(k.rate-0.9) > 1e-9 || k.rateHi > 0.9+1e-9 {
		t.Errorf("throughput ratio %.3f [%.3f, %.3f], want 0.900 throughout (the noise cancels per round)", k.rate, k.rateLo, k.rateHi)
	}
	if v := verdict(k.rateLo, k.rateHi, minThroughputRatio, true); v != "missed" {
		t.Errorf("throughput verdict = %s, want missed", v)
	}
	if k.p99 < 1.15 || k.p99 > 1.25 {
		t.Errorf("p99 ratio %.3f, want ~1.2", k.p99)
	}
	if v := verdict(k.p99Lo, k.p99Hi, maxP99Ratio, false); v != "missed" {
		t.Errorf("p99 verdict = %s, want missed", v)
	}
}

func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		lo, hi, bound float64
		atLeast       bool
		want          string
	}{
		{0.98, 1.02, 0.97, true, "met"},
		{0.97, 1.02, 0.97, true, "met"},
		{0.95, 1.02, 0.97, true, "unsettled"},
		{0.90, 0.96, 0.97, true, "missed"},
		{0.95, 1.04, 1.05, false, "met"},
		{1.00, 1.07, 1.05, false, "unsettled"},
		{1.06, 1.10, 1.05, false, "missed"},
	} {
		if got := verdict(tc.lo, tc.hi, tc.bound, tc.atLeast); got != tc.want {
			t.Errorf("verdict(%v, %v, %v, atLeast=%v) = %s, want %s", tc.lo, tc.hi, tc.bound, tc.atLeast, got, tc.want)
		}
	}
}

func TestMedianAndOneRound(t *testing.T) {
	if m := median([]float64{3, 1, 2, 4}); m != 2.5 {
		t.Errorf("median of 1..4 = %v, want 2.5", m)
	}
	k := compare(rounds([]float64{100}, ones(1), time.Millisecond, 5), rounds([]float64{95}, ones(1), time.Millisecond, 5), 1)
	if k.rateLo != k.rate || k.rateHi != k.rate || k.rate != 0.95 {
		t.Errorf("one round: %.3f [%.3f, %.3f], want 0.95 with no interval", k.rate, k.rateLo, k.rateHi)
	}
}

func TestPooledP99IsPercentilesOfTheUnion(t *testing.T) {
	rs := rounds([]float64{1, 1, 1, 1, 1}, []float64{1, 1.3, 0.8, 2, 1.1}, 10*time.Millisecond, 11)
	rs[3].lats = rs[3].lats[:37] // rounds of unequal size
	sorted := sortedLats(rs)
	for _, idx := range [][]int{{0}, {3}, {0, 1, 2, 3, 4}, {3, 3, 1}, {4, 4, 4, 0, 2}} {
		var union []time.Duration
		for _, i := range idx {
			union = append(union, rs[i].lats...)
		}
		_, want := percentiles(union)
		if got := pooledP99(sorted, idx); got != want {
			t.Errorf("rounds %v: pooledP99 = %v, percentiles of the union = %v", idx, got, want)
		}
	}
}
