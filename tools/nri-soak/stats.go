package main

import (
	"errors"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat/distuv"
)

// growthFit is the least-squares fit of a series sampled over time,
//
//	y = a_s + b*t
//
// with an intercept a_s for each segment s (a process's lifetime: a
// restarted runtime starts from its own level) and a common slope b. The
// growth check fits it to each runtime's levels at the soak's rests, where
// nothing of the soak runs: what changes from one rest to the next is what
// the runtime kept.
type growthFit struct {
	N, Segments int
	// Slope b, its standard error and the t-based 95 % interval, per
	// hour.
	Slope, SE, Lo, Hi float64
	DF                int
	Median            float64
}

var errTooFew = errors.New("too few samples for a fit")

// minDF: the least degrees of freedom of a fit. Two (four rests of one
// process) give a wide interval (t = 4.30), which an exact level at rest
// keeps narrow and a noisy one shows as inconclusive.
const minDF = 2

// fitGrowth fits the model to the points (t, y) with segments seg.
func fitGrowth(t, y []float64, seg []int) (growthFit, error) {
	n := len(y)
	ids := map[int]int{}
	for _, s := range seg {
		if _, ok := ids[s]; !ok {
			ids[s] = len(ids)
		}
	}
	k := len(ids)
	p := k + 1
	if n-p < minDF {
		return growthFit{}, errTooFew
	}
	// Centre t for conditioning; the slope does not change.
	tm := mean(t)
	X := mat.NewDense(n, p, nil)
	for i := 0; i < n; i++ {
		X.Set(i, ids[seg[i]], 1)
		X.Set(i, k, (t[i]-tm)/3600)
	}
	var xtx mat.SymDense
	xtx.SymOuterK(1, X.T())
	var chol mat.Cholesky
	if ok := chol.Factorize(&xtx); !ok {
		return growthFit{}, errors.New("singular fit")
	}
	// A near-singular system (a segment of one point in time) is as bad.
	if c := chol.Cond(); c > 1e12 || math.IsInf(c, 0) || math.IsNaN(c) {
		return growthFit{}, errors.New("ill-conditioned fit")
	}
	Y := mat.NewVecDense(n, y)
	var xty mat.VecDense
	xty.MulVec(X.T(), Y)
	var beta mat.VecDense
	if err := chol.SolveVecTo(&beta, &xty); err != nil {
		return growthFit{}, err
	}
	var fitted mat.VecDense
	fitted.MulVec(X, &beta)
	rss := 0.0
	for i := 0; i < n; i++ {
		r := y[i] - fitted.AtVec(i)
		rss += r * r
	}
	df := n - p
	s2 := rss / float64(df)
	var inv mat.SymDense
	if err := chol.InverseTo(&inv); err != nil {
		return growthFit{}, err
	}
	// Per hour, as the design's t column is in hours.
	b := beta.AtVec(k)
	se := math.Sqrt(s2 * inv.At(k, k))
	q := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}.Quantile(0.975)
	// Levels that are exactly equal (a count at rest) leave rounding
	// residue of 1e-14 where the slope is 0.
	b, se = denoise(b), denoise(se)
	return growthFit{
		N: n, Segments: k, DF: df,
		Slope: b, SE: se, Lo: b - q*se, Hi: b + q*se,
		Median: median(y),
	}, nil
}

func denoise(x float64) float64 {
	if math.Abs(x) < 1e-9 {
		return 0
	}
	return x
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// median of v (v is not changed).
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	return quantile(v, 0.5)
}

// quantile returns the q-quantile of v by the nearest-rank method: the
// smallest value with at least q of the values at or below it.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	r := int(math.Ceil(q * float64(len(s))))
	if r < 1 {
		r = 1
	}
	return s[r-1]
}
