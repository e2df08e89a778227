package main

import (
	"math"
	"math/rand/v2"
	"testing"
)

// One segment: the slope and its interval are the textbook
// simple regression's, b = Sxy/Sxx, se = sqrt(s²/Sxx), t(0.975, n-2).
func TestFitGrowthIsSimpleRegression(t *testing.T) {
	// y per hour: t in seconds, the fit reports per hour.
	ts := []float64{0, 360, 720, 1080, 1440, 1800, 2160, 2520, 2880, 3240, 3600, 3960}
	ys := []float64{10.2, 10.9, 12.1, 12.8, 14.2, 14.9, 15.8, 17.2, 18.1, 18.8, 20.3, 20.9}
	seg := make([]int, len(ts))
	f, err := fitGrowth(ts, ys, seg)
	if err != nil {
		t.Fatal(err)
	}
	h := make([]float64, len(ts))
	for i := range ts {
		h[i] = ts[i] / 3600
	}
	mh, my := mean(h), mean(ys)
	var sxx, sxy float64
	for i := range h {
		sxx += (h[i] - mh) * (h[i] - mh)
		sxy += (h[i] - mh) * (ys[i] - my)
	}
	b := sxy / sxx
	var rss float64
	for i := range h {
		r := ys[i] - (my + b*(h[i]-mh))
		rss += r * r
	}
	se := math.Sqrt(rss / float64(len(h)-2) / sxx)
	const t10 = 2.228138851986274 // t(0.975, 10)
	if !close(f.Slope, b) || !close(f.SE, se) || !close(f.Lo, b-t10*se) || !close(f.Hi, b+t10*se) || f.DF != 10 {
		t.Fatalf("fit %+v, want slope %v se %v df 10", f, b, se)
	}
}

func close(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// A restart starts a process from its own level: one intercept per
// segment keeps the drop from reading as a negative slope, and a shared
// slope is found across segments.
func TestFitGrowthSegments(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var ts, ys []float64
	var seg []int
	for i := 0; i < 200; i++ {
		s := 0
		level := 100.0
		if i >= 120 {
			s, level = 1, 40.0
		}
		tt := float64(i) * 10
		ts = append(ts, tt)
		ys = append(ys, level+3*tt/3600+0.2*rng.NormFloat64())
		seg = append(seg, s)
	}
	f, err := fitGrowth(ts, ys, seg)
	if err != nil {
		t.Fatal(err)
	}
	if f.Segments != 2 || f.Lo > 3 || f.Hi < 3 || f.Hi-f.Lo > 2 {
		t.Fatalf("fit %+v: the interval should hold the slope 3/h and be narrow", f)
	}
}

func TestFitGrowthTooFew(t *testing.T) {
	if _, err := fitGrowth([]float64{1, 2, 3}, []float64{1, 2, 3}, []int{0, 0, 0}); err != errTooFew {
		t.Fatalf("3 points: %v, want errTooFew", err)
	}
	if _, err := fitGrowth([]float64{1, 2, 3, 4}, []float64{1, 2, 3, 5}, []int{0, 0, 0, 0}); err != nil {
		t.Fatalf("4 points of one process: %v, want a fit", err)
	}
}

func TestQuantile(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, c := range []struct{ q, want float64 }{{0.5, 5}, {0.99, 10}, {0.1, 1}, {0, 1}, {1, 10}} {
		if got := quantile(v, c.q); got != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if v[0] != 5 {
		t.Errorf("quantile sorted its input")
	}
}
