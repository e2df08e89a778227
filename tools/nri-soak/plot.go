package main

import (
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// binSeconds: the creates and refusals are counted per bin.
const binSeconds = 30.0

// nodeColors: node 1, node 2, ...
var nodeColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// kindColors: one light color per fault kind, as in faultKinds.
var kindColors = []color.Color{
	color.RGBA{R: 0xae, G: 0xc7, B: 0xe8, A: 0xff},
	color.RGBA{R: 0xff, G: 0xbb, B: 0x78, A: 0xff},
	color.RGBA{R: 0x98, G: 0xdf, B: 0x8a, A: 0xff},
	color.RGBA{R: 0xff, G: 0x98, B: 0x96, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0xc5, G: 0xb0, B: 0xd5, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	color.RGBA{R: 0xf7, G: 0xb6, B: 0xd2, A: 0xff},
	color.RGBA{R: 0xbc, G: 0xbd, B: 0x22, A: 0xff},
}

func kindColor(kind string) color.Color {
	for i, k := range faultKinds {
		if k == kind {
			return kindColors[i%len(kindColors)]
		}
	}
	return color.Gray{Y: 0x99}
}

func lighten(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	return color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: 0x50}
}

// faultBars draws each fault as a bar from its start to its end on its
// node's row (row 0: every node); faultSpans shades the faults' times over
// a whole panel.
type faultBars struct {
	faults []faultRec
	t0     float64
	rows   int
	end    float64
}

func (f faultBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for _, fr := range f.faults {
		end := fr.End
		if end == 0 {
			end = f.end
		}
		x0, x1 := trX((fr.Start-f.t0)/60), trX((end-f.t0)/60)
		if x1-x0 < 1.5 {
			x1 = x0 + 1.5
		}
		y0, y1 := trY(float64(fr.Node)-0.35), trY(float64(fr.Node)+0.35)
		c.FillPolygon(kindColor(fr.Kind), c.ClipPolygonXY([]vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}))
	}
}

func (f faultBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	return 0, (f.end - f.t0) / 60, -0.5, float64(f.rows) - 0.5
}

type faultSpans faultBars

func (f faultSpans) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, fr := range f.faults {
		end := fr.End
		if end == 0 {
			end = f.end
		}
		x0, x1 := trX((fr.Start-f.t0)/60), trX((end-f.t0)/60)
		c.FillPolygon(lighten(kindColor(fr.Kind)), c.ClipPolygonX([]vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}}))
	}
}

// swatch is a legend entry of a fault kind.
type swatch struct{ c color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(s.c, []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}})
}

// series splits (t, y) points of one node into lines where the runtime
// was restarted or sampling stopped, in minutes from t0.
func series(r *records, node int, get func(sample) (float64, bool)) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	lastPID, lastT := 0, 0.0
	for _, s := range r.Samples {
		if s.Node != node || s.PID == 0 {
			continue
		}
		v, ok := get(s)
		if !ok {
			continue
		}
		if len(cur) > 0 && (s.PID != lastPID || s.T-lastT > 30) {
			out = append(out, cur)
			cur = nil
		}
		cur = append(cur, plotter.XY{X: (s.T - r.Run.Start) / 60, Y: v})
		lastPID, lastT = s.PID, s.T
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// binned counts events at times ts per binSeconds, as a step line in
// events per bin.
func binned(r *records, ts []float64, end float64) plotter.XYs {
	n := int(math.Ceil((end - r.Run.Start) / binSeconds))
	if n < 1 {
		n = 1
	}
	counts := make([]float64, n)
	for _, t := range ts {
		i := int((t - r.Run.Start) / binSeconds)
		if i >= 0 && i < n {
			counts[i]++
		}
	}
	xy := make(plotter.XYs, 0, 2*n)
	last := (end - r.Run.Start) / 60
	for i, c := range counts {
		xy = append(xy, plotter.XY{X: float64(i) * binSeconds / 60, Y: c}, plotter.XY{X: math.Min(float64(i+1)*binSeconds/60, last), Y: c})
	}
	return xy
}

// writePlot draws the soak over time: the faults per node; the
// containers each runtime created for the soak and the refusals, per 30
// s; each runtime's RSS (anonymous), goroutines and open fds, with its
// levels at the rests (the growth check's points).
func writePlot(r *records, file string) error {
	end := r.end()
	xmax := (end - r.Run.Start) / 60
	rows := len(r.Run.Nodes) + 1
	fb := faultBars{faults: r.Faults, t0: r.Run.Start, rows: rows, end: end}

	newPlot := func(title, ylabel string) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.Y.Label.Text = ylabel
		p.X.Min, p.X.Max = 0, xmax
		p.Add(plotter.NewGrid())
		return p
	}

	// Faults.
	pf := newPlot("faults (seed "+u64(r.Run.Seed)+")", "")
	pf.Add(fb)
	names := []string{"all"}
	for _, n := range r.Run.Nodes {
		names = append(names, n.Name+" "+n.Runtime)
	}
	pf.NominalY(names...)
	// The rows at the bottom, the legend of the kinds above them.
	pf.Y.Min, pf.Y.Max = -0.5, float64(rows)-0.5+6
	used := map[string]bool{}
	for _, f := range r.Faults {
		used[f.Kind] = true
	}
	for _, k := range faultKinds {
		if used[k] {
			pf.Legend.Add(k, swatch{kindColor(k)})
		}
	}
	pf.Legend.Top, pf.Legend.Left = true, false
	pf.Legend.XOffs = vg.Points(0)

	// Creates and refusals.
	pc := newPlot("containers created for the soak / refusals, per 30 s", "per 30 s")
	pc.Add(faultSpans(fb))
	pc.Legend.Top = true
	for i, n := range r.Run.Nodes {
		var cr, rf []float64
		for _, c := range r.Runtime[n.N].Created {
			if c.NS == r.Run.Namespace && c.Name != "" {
				cr = append(cr, c.T)
			}
		}
		for _, p := range r.Runtime[n.N].Policy {
			if p.Kind == "refused" {
				rf = append(rf, p.T)
			}
		}
		l, err := plotter.NewLine(binned(r, cr, end))
		if err != nil {
			return err
		}
		l.Color = nodeColors[i%len(nodeColors)]
		l.Width = vg.Points(1.2)
		pc.Add(l)
		pc.Legend.Add(n.Name+" created", l)
		lr, err := plotter.NewLine(binned(r, rf, end))
		if err != nil {
			return err
		}
		lr.Color = nodeColors[i%len(nodeColors)]
		lr.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
		lr.Width = vg.Points(1)
		pc.Add(lr)
		pc.Legend.Add(n.Name+" refused", lr)
	}

	panels := []*plot.Plot{pf, pc}
	for _, m := range growthMetrics {
		p := newPlot("runtime "+m.name, m.unit)
		p.Add(faultSpans(fb))
		p.Legend.Top = true
		for i, n := range r.Run.Nodes {
			segs := series(r, n.N, func(s sample) (float64, bool) {
				v := m.get(s)
				if v == nil {
					return 0, false
				}
				return *v * m.scale, true
			})
			for j, xy := range segs {
				l, err := plotter.NewLine(xy)
				if err != nil {
					return err
				}
				l.Color = nodeColors[i%len(nodeColors)]
				p.Add(l)
				if j == 0 {
					p.Legend.Add(n.Name+" "+n.Runtime, l)
				}
			}
			// The levels the growth check fits: one per rest.
			var pts plotter.XYs
			for _, l := range restLevels(r, n.N, m.get, m.scale) {
				pts = append(pts, plotter.XY{X: (l.T - r.Run.Start) / 60, Y: l.Y})
			}
			if len(pts) > 0 {
				sc, err := plotter.NewScatter(pts)
				if err != nil {
					return err
				}
				sc.Color = nodeColors[i%len(nodeColors)]
				sc.Shape = draw.BoxGlyph{}
				sc.Radius = vg.Points(3)
				p.Add(sc)
				if i == 0 {
					p.Legend.Add("level at a rest", sc)
				}
			}
		}
		panels = append(panels, p)
	}
	panels[len(panels)-1].X.Label.Text = "minutes from the start"
	for _, p := range panels[1:] {
		// Room above the data for the legend.
		p.Y.Max += (p.Y.Max - p.Y.Min) * 0.35
	}
	for _, p := range panels {
		p.X.Min, p.X.Max = 0, xmax
	}

	const w, rowH = 24 * vg.Centimeter, 6 * vg.Centimeter
	img := vgimg.NewWith(vgimg.UseWH(w, rowH*vg.Length(len(panels))), vgimg.UseDPI(110))
	dc := draw.New(img)
	// One column, the panels' x axes aligned.
	grid := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		grid[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4),
		PadLeft: vg.Points(4), PadRight: vg.Points(8), PadY: vg.Points(6)}
	canvases := plot.Align(grid, tiles, dc)
	for i, p := range panels {
		p.Draw(canvases[i][0])
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
