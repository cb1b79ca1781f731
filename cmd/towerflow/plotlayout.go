package main

import (
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// logDecades is how many decades the losses must span for -log auto to
// draw the loss panel on a log scale.
const logDecades = 3

// setLogScale sets the loss panel's scale for the -log flag: "on", "off",
// or "auto": a log scale when every loss is positive and they span more
// than logDecades decades. "on" with a loss that is not positive is an
// error naming it.
func setLogScale(panels []panel, mode string) error {
	for i := range panels {
		pn := &panels[i]
		if pn.title != "loss" || mode == "off" {
			continue
		}
		lo, hi := yRange(pn.series)
		if lo <= 0 {
			if mode == "on" {
				return fmt.Errorf("-log on: the loss panel has a value %g, and a log scale needs positive values", lo)
			}
			continue
		}
		pn.logY = mode == "on" || math.Log10(hi/lo) > logDecades
	}
	return nil
}

// axisUnits returns the map from values to the units an axis is linear
// in, and back: the identity, or log10 for a log scale.
func axisUnits(logY bool) (fwd, inv func(float64) float64) {
	if logY {
		return math.Log10, func(u float64) float64 { return math.Pow(10, u) }
	}
	id := func(v float64) float64 { return v }
	return id, id
}

// placeLegend puts p's legend where it covers no data when drawn on c:
// the first corner free of the panel's lines and points (top right, top
// left, bottom right, bottom left), or else top right over headroom added
// above the data.
func placeLegend(p *plot.Plot, c draw.Canvas, pn panel) {
	dc := p.DataCanvas(c)
	for _, corner := range []struct{ top, left bool }{{true, false}, {true, true}, {false, false}, {false, true}} {
		p.Legend.Top, p.Legend.Left = corner.top, corner.left
		p.Legend.XOffs = -vg.Millimeter // off the frame
		if corner.left {
			p.Legend.XOffs = vg.Millimeter
		}
		if !coversData(p, dc, pn.series) {
			return
		}
	}
	p.Legend.Top, p.Legend.Left, p.Legend.XOffs = true, false, -vg.Millimeter
	box := legendBox(p, dc)
	h := float64(dc.Max.Y - dc.Min.Y)
	free := 1 - float64(box.Max.Y-box.Min.Y+2*vg.Millimeter)/h // the share of the height below the legend
	lo, hi := yRange(pn.series)
	if free < 0.3 || !(hi >= lo) {
		return // no room: a legend taller than the plot
	}
	fwd, inv := axisUnits(pn.logY)
	// Stretch the axis so that hi lies at the share free of its height.
	p.Y.Max = inv(fwd(p.Y.Min) + (fwd(hi)-fwd(p.Y.Min))/free)
}

// legendBox is the rectangle p's legend takes on the data canvas dc, where
// Plot.Draw puts it (gonum's Legend.Rectangle gives its size).
func legendBox(p *plot.Plot, dc draw.Canvas) vg.Rectangle {
	size := p.Legend.Rectangle(dc).Size()
	var r vg.Rectangle
	if p.Legend.Left {
		r.Min.X = dc.Min.X + p.Legend.XOffs
		r.Max.X = r.Min.X + size.X
	} else {
		r.Max.X = dc.Max.X + p.Legend.XOffs
		r.Min.X = r.Max.X - size.X
	}
	if p.Legend.Top {
		r.Max.Y = dc.Max.Y + p.Legend.YOffs
		r.Min.Y = r.Max.Y - size.Y
	} else {
		r.Min.Y = dc.Min.Y + p.Legend.YOffs
		r.Max.Y = r.Min.Y + size.Y
	}
	return r
}

// coversData reports whether p's legend, placed as it is, covers a point
// of the series or a stretch of a line between two.
func coversData(p *plot.Plot, dc draw.Canvas, ss []series) bool {
	box := legendBox(p, dc)
	pad := vg.Millimeter
	box.Min.X, box.Min.Y, box.Max.X, box.Max.Y = box.Min.X-pad, box.Min.Y-pad, box.Max.X+pad, box.Max.Y+pad
	tx, ty := p.Transforms(&dc)
	in := func(pt vg.Point) bool {
		return pt.X >= box.Min.X && pt.X <= box.Max.X && pt.Y >= box.Min.Y && pt.Y <= box.Max.Y
	}
	// Lines are straight on the canvas, whatever the axis scale: sample
	// each segment there.
	const steps = 16
	for _, s := range ss {
		var prev vg.Point
		for i, xy := range s.xy {
			pt := vg.Point{X: tx(xy.X), Y: ty(xy.Y)}
			if in(pt) {
				return true
			}
			for k := 1; i > 0 && k < steps; k++ {
				f := vg.Length(k) / steps
				if in(vg.Point{X: prev.X + f*(pt.X-prev.X), Y: prev.Y + f*(pt.Y-prev.Y)}) {
					return true
				}
			}
			prev = pt
		}
	}
	return false
}

// maxDecadeLabels is the most decades decadeTicks labels.
const maxDecadeLabels = 8

// decadeTicks marks the powers of ten of a log axis, labelling every one
// when there are few and every k-th when there are many, so that at most
// maxDecadeLabels labels stand, written short ("1e-05", "0.01", "100");
// within about a decade, it marks the axis as a linear one.
type decadeTicks struct{}

func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0 && hi >= lo) {
		return nil
	}
	first, last := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	k := (last - first + maxDecadeLabels) / maxDecadeLabels // ceil((decades+1) / max)
	var ticks []plot.Tick
	for e := first; e <= last; e++ {
		v, _ := strconv.ParseFloat("1e"+strconv.Itoa(e), 64) // the double nearest 10^e
		if v < lo || v > hi {
			continue
		}
		t := plot.Tick{Value: v}
		if e%k == 0 {
			t.Label = strconv.FormatFloat(v, 'g', -1, 64)
		}
		ticks = append(ticks, t)
	}
	if len(ticks) < 2 { // within a decade or so: ticks as on a linear axis
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	return ticks
}

// Least spans of a linear value axis, so that a small change is drawn as
// one: unitSpan for metrics in [0, 1], relSpan of the largest magnitude
// for other values.
const (
	unitSpan = 0.1
	relSpan  = 0.02
)

// valueAxis is the range of pn's value axis: the values' range, widened
// on a linear axis to its least span (unitSpan or relSpan, kept inside
// [0, 1] for metrics in it) about the values' middle, with 5% of it free
// above and below (of its logarithm on a log scale). ok is false when the
// values are all one, for gonum's default range about it.
func valueAxis(pn panel) (lo, hi float64, ok bool) {
	lo, hi = yRange(pn.series)
	if !(hi > lo) {
		return 0, 0, false
	}
	if !pn.logY {
		least := relSpan * max(math.Abs(lo), math.Abs(hi))
		if pn.unit {
			least = unitSpan
		}
		if hi-lo < least {
			mid := (lo + hi) / 2
			lo, hi = mid-least/2, mid+least/2
			if pn.unit && lo < 0 {
				lo, hi = 0, least
			} else if pn.unit && hi > 1 {
				lo, hi = 1-least, 1
			}
		}
	}
	fwd, inv := axisUnits(pn.logY)
	m := (fwd(hi) - fwd(lo)) / 20
	return inv(fwd(lo) - m), inv(fwd(hi) + m), true
}

// rangeText writes the values' range for an axis label: "0.958 to 0.96",
// or the one value.
func rangeText(lo, hi float64) string {
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
	if g(lo) == g(hi) {
		return g(lo)
	}
	return g(lo) + " to " + g(hi)
}
