package main

import (
	"image"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/towerflow/towerflow/internal/wanterr"
)

// lossPanel is a loss panel of one training series with values f(step) at
// steps 1..n.
func lossPanel(n int, f func(s float64) float64) panel {
	xy := make(plotter.XYs, n)
	for i := range xy {
		xy[i] = plotter.XY{X: float64(i + 1), Y: f(float64(i + 1))}
	}
	return panel{title: "loss", ylabel: "loss", series: []series{{name: "train loss", xy: xy}}}
}

func TestSetLogScale(t *testing.T) {
	fiveDecades := lossPanel(100, func(s float64) float64 { return 1e3 * math.Pow(1e-5, s/100) })
	twoDecades := lossPanel(100, func(s float64) float64 { return 1e2 * math.Pow(1e-2, s/100) })
	withZero := lossPanel(100, func(s float64) float64 { return 100 - s })
	metric := panel{title: "eval mae", series: fiveDecades.series}
	tests := []struct {
		name    string
		panels  []panel
		mode    string
		want    []bool // logY per panel
		wantErr string
	}{
		{name: "auto, five decades", panels: []panel{fiveDecades}, mode: "auto", want: []bool{true}},
		{name: "auto, two decades", panels: []panel{twoDecades}, mode: "auto", want: []bool{false}},
		{name: "auto, a zero loss", panels: []panel{withZero}, mode: "auto", want: []bool{false}},
		{name: "on, two decades", panels: []panel{twoDecades}, mode: "on", want: []bool{true}},
		{name: "off, five decades", panels: []panel{fiveDecades}, mode: "off", want: []bool{false}},
		{name: "only the loss panel", panels: []panel{fiveDecades, metric}, mode: "on", want: []bool{true, false}},
		{name: "on, a zero loss", panels: []panel{withZero}, mode: "on", wantErr: "log scale needs positive values"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			panels := append([]panel(nil), tc.panels...)
			err := setLogScale(panels, tc.mode)
			if tc.wantErr != "" {
				wanterr.Mentions(t, err, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := make([]bool, len(panels))
			for i, p := range panels {
				got[i] = p.logY
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("log scales (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLegendOffData draws panels with and without their legend and checks
// that within the box of the pixels the legend inks (where the two differ)
// the drawing without it has no data: no coloured pixel (axes, text and
// grid are black or grey; the series are drawn in colour).
func TestLegendOffData(t *testing.T) {
	zigzag := func(s float64) float64 { // fills the whole range, corner to corner
		if int(s)%2 == 0 {
			return 1
		}
		return 2
	}
	eval := series{name: "eval loss", color: 1, points: true}
	for s := 10.0; s <= 100; s += 10 {
		eval.xy = append(eval.xy, plotter.XY{X: s, Y: 3 - s/50})
	}
	withEval := lossPanel(100, func(s float64) float64 { return 3 - s/50 })
	withEval.series = append(withEval.series, eval)
	rising := lossPanel(100, func(s float64) float64 { return s })
	logged := lossPanel(100, func(s float64) float64 { return 1e3 * math.Pow(1e-5, s/100) })
	logged.logY = true
	tests := []struct {
		name  string
		panel panel
	}{
		{"falling", lossPanel(100, func(s float64) float64 { return 3 - s/50 })},
		{"rising", rising},
		{"falling, with evaluations", withEval},
		{"everywhere", lossPanel(100, zigzag)},
		{"log scale", logged},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const w, h = 480, 320
			_, plots, canvases, err := layoutPanels([]panel{tc.panel}, "", w, h)
			if err != nil {
				t.Fatal(err)
			}
			p, rect := plots[0], canvases[0].Rectangle
			render := func(p *plot.Plot) *image.RGBA {
				c := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, w, h))), vgimg.UseDPI(plotDPI))
				p.Draw(draw.Canvas{Canvas: c, Rectangle: rect})
				return c.Image().(*image.RGBA)
			}
			whole := render(p)
			noLegend := *p
			noLegend.Legend = plot.NewLegend()
			bare := render(&noLegend)

			legend := image.Rectangle{}
			for y := range h {
				for x := range w {
					if whole.RGBAAt(x, y) != bare.RGBAAt(x, y) {
						legend = legend.Union(image.Rect(x, y, x+1, y+1))
					}
				}
			}
			if legend.Empty() {
				t.Fatal("the legend drew nothing")
			}
			data := 0
			for y := legend.Min.Y; y < legend.Max.Y; y++ {
				for x := legend.Min.X; x < legend.Max.X; x++ {
					if c := bare.RGBAAt(x, y); max(c.R, c.G, c.B)-min(c.R, c.G, c.B) > 16 {
						data++
					}
				}
			}
			if data > 0 {
				t.Errorf("%d pixels of data lie under the legend's box %v", data, legend)
			}
		})
	}
}

func TestDecadeTicks(t *testing.T) {
	tests := []struct {
		name   string
		lo, hi float64
		labels []string // the labelled ticks, in order
		ticks  int      // every tick
	}{
		{"three decades", 0.005, 20, []string{"0.01", "0.1", "1", "10"}, 4},
		{"thirty decades", 1e-26, 10, []string{"1e-24", "1e-20", "1e-16", "1e-12", "1e-08", "0.0001", "1"}, 28},
		{"within a decade: linear ticks", 2, 8, []string{"2", "4", "6", "8"}, 0},
		{"not positive", 0, 8, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ticks := decadeTicks{}.Ticks(tc.lo, tc.hi)
			var labels []string
			for _, tk := range ticks {
				if tk.Label != "" {
					labels = append(labels, tk.Label)
				}
			}
			if diff := cmp.Diff(tc.labels, labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if tc.ticks > 0 && len(ticks) != tc.ticks {
				t.Errorf("%d ticks, want %d", len(ticks), tc.ticks)
			}
			if len(labels) > maxDecadeLabels {
				t.Errorf("%d labels, more than %d", len(labels), maxDecadeLabels)
			}
		})
	}
}

// A linear value axis spans at least its least span, so that a small
// change is drawn as one and not as a cliff, and the axis label gives the
// values' range.
func TestValueAxis(t *testing.T) {
	unit := func(ys ...float64) panel {
		s := series{name: "eval accuracy"}
		for i, y := range ys {
			s.xy = append(s.xy, plotter.XY{X: float64(i), Y: y})
		}
		return panel{title: "eval accuracy", ylabel: "accuracy", unit: true, series: []series{s}}
	}
	other := unit(3, 3.001)
	other.unit, other.ylabel = false, "mae"
	logged := lossPanel(100, func(s float64) float64 { return 1e3 * math.Pow(1e-5, s/100) })
	logged.logY = true
	tests := []struct {
		name          string
		panel         panel
		lo, hi        float64 // the axis, before 5% of its span is added each side
		label         string
		defaultLimits bool // the values all one: gonum's range
	}{
		{"a small accuracy change", unit(0.958, 0.96), 0.9, 1, "accuracy (0.958 to 0.96)", false},
		{"a small change near 0", unit(0.01, 0.02), 0, 0.1, "accuracy (0.01 to 0.02)", false},
		{"a small change near 1", unit(0.995, 0.999), 0.9, 1, "accuracy (0.995 to 0.999)", false},
		{"a wide change", unit(0.2, 0.9), 0.2, 0.9, "accuracy (0.2 to 0.9)", false},
		{"a small change of another metric", other, 3.0005 - 0.03001, 3.0005 + 0.03001, "mae (3 to 3.001)", false},
		{"a log scale", logged, 1e3 * math.Pow(1e-5, 1), 1e3 * math.Pow(1e-5, 0.01), "loss (0.01 to 891.3)", false},
		{"one value", unit(0.5, 0.5), 0, 0, "accuracy (0.5)", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPanelPlot(tc.panel, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if p.Y.Label.Text != tc.label {
				t.Errorf("axis label %q, want %q", p.Y.Label.Text, tc.label)
			}
			lo, hi, ok := valueAxis(tc.panel)
			if ok == tc.defaultLimits {
				t.Fatalf("valueAxis ok %v", ok)
			}
			if !ok {
				return
			}
			fwd, inv := axisUnits(tc.panel.logY)
			m := (fwd(tc.hi) - fwd(tc.lo)) / 20
			want := []float64{inv(fwd(tc.lo) - m), inv(fwd(tc.hi) + m)}
			if diff := cmp.Diff(want, []float64{lo, hi}, cmpopts.EquateApprox(1e-9, 0)); diff != "" {
				t.Errorf("axis range (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, []float64{p.Y.Min, p.Y.Max}, cmpopts.EquateApprox(1e-9, 0)); diff != "" {
				t.Errorf("the plot's axis range (-want +got):\n%s", diff)
			}
		})
	}
}

// A training loss of one point is drawn visibly, even where an
// evaluation's point lies on it.
func TestLonePointVisible(t *testing.T) {
	ps, err := buildPanels([]trainRecord{{Step: 100, Loss: 1}},
		[]evalRecord{{Step: 100, Metrics: map[string]float64{"loss": 1}}, {Step: 200, Metrics: map[string]float64{"loss": 0.9}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const w, h = 480, 320
	_, plots, canvases, err := layoutPanels(ps, "", w, h)
	if err != nil {
		t.Fatal(err)
	}
	p := *plots[0]
	p.Legend = plot.NewLegend() // only the data
	c := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, w, h))), vgimg.UseDPI(plotDPI))
	p.Draw(draw.Canvas{Canvas: c, Rectangle: canvases[0].Rectangle})
	img := c.Image().(*image.RGBA)
	tr, tg, tb, _ := plotutil.Color(0).RGBA() // the training loss's colour
	n := 0
	for y := range h {
		for x := range w {
			r, g, b, _ := img.At(x, y).RGBA()
			if r == tr && g == tg && b == tb {
				n++
			}
		}
	}
	if n < 20 {
		t.Errorf("%d pixels of the training loss's colour, want a visible mark", n)
	}
}
