package main

import (
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

const plotSynopsis = "[-o out.png] [-metrics loss,accuracy] [-width px] [-height px] [-log auto|on|off] <model dir>"

// Defaults of the plot command's image size.
const (
	defaultWidth       = 960 // pixels
	defaultPanelHeight = 320 // pixels per panel
	plotDPI            = 96
)

// plotHistory is the plot command: it draws a model directory's training
// and evaluation history as a PNG.
func plotHistory(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	out := fs.String("o", "", "output PNG `file` (default <model dir>/history.png)")
	metricsFlag := fs.String("metrics", "", "comma-separated `names` of the metrics to draw; \"loss\" is the training and evaluation loss (default: loss and every evaluation metric but global_step)")
	width := fs.Int("width", defaultWidth, "image width in `pixels`")
	height := fs.Int("height", 0, fmt.Sprintf("image height in `pixels` (default %d per panel)", defaultPanelHeight))
	logY := fs.String("log", "auto", "log scale for the loss axis: `auto` (when the losses span more than three decades), on or off")
	pos, err := parseFlags(fs, plotSynopsis, stdout, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("plot wants one model directory, got %d arguments", len(pos))
	}
	if *width <= 0 || *height < 0 {
		return usagef("bad image size %dx%d", *width, *height)
	}
	if !slices.Contains([]string{"auto", "on", "off"}, *logY) {
		return usagef("-log %q: want auto, on or off", *logY)
	}
	var metrics []string
	for m := range strings.SplitSeq(*metricsFlag, ",") {
		if m = strings.TrimSpace(m); m != "" && !slices.Contains(metrics, m) {
			metrics = append(metrics, m)
		}
	}
	dir := pos[0]
	if *out == "" {
		*out = filepath.Join(dir, "history.png")
	}

	warn := func(err error) { fmt.Fprintf(stderr, "towerflow plot: warning: %v\n", err) }
	train, eval, err := readHistories(dir, warn)
	if err != nil {
		return err
	}
	panels, err := buildPanels(train, eval, metrics)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if err := setLogScale(panels, *logY); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	h := *height
	if h == 0 {
		h = defaultPanelHeight * len(panels)
	}
	img, err := renderPanels(panels, "training history: "+filepath.Base(filepath.Clean(dir)), *width, h)
	if err != nil {
		return fmt.Errorf("%s: %w", *out, err)
	}
	if err := writePNG(*out, img); err != nil {
		return err
	}
	names := make([]string, len(panels))
	for i, p := range panels {
		names[i] = p.title
	}
	fmt.Fprintf(stdout, "wrote %s (%dx%d): %s\n", *out, *width, h, strings.Join(names, "; "))
	return nil
}

// readHistories reads the model directory's history files; one may be
// missing, not both. A torn last line of either is skipped and reported to
// warn.
func readHistories(dir string, warn func(error)) ([]trainRecord, []evalRecord, error) {
	trainPath := filepath.Join(dir, TrainHistoryFile)
	evalPath := filepath.Join(dir, EvalHistoryFile)
	train, terr := readTrainHistory(trainPath, warn)
	if terr != nil && !isNotExist(terr) {
		return nil, nil, terr
	}
	eval, eerr := readEvalHistory(evalPath, warn)
	if eerr != nil && !isNotExist(eerr) {
		return nil, nil, eerr
	}
	if terr != nil && eerr != nil {
		return nil, nil, fmt.Errorf("%s: no history: neither %s nor %s exists", dir, TrainHistoryFile, EvalHistoryFile)
	}
	if len(train) == 0 && len(eval) == 0 {
		return nil, nil, fmt.Errorf("%s: no history: %s and %s hold no records", dir, TrainHistoryFile, EvalHistoryFile)
	}
	return train, eval, nil
}

// series is one line of a panel.
type series struct {
	name   string
	xy     plotter.XYs
	color  int  // index into plotutil's colors
	points bool // mark each point (sparse evaluation data)
}

// panel is one plot of the stack.
type panel struct {
	title, ylabel string
	series        []series
	logY          bool // a log scale for the values
	unit          bool // the values are metrics in [0, 1]
}

// buildPanels groups the histories into panels: the loss (training and
// evaluation) first, then the evaluation metrics whose values all lie in
// [0, 1] together (accuracy, AUC, precision, ...), then every other metric
// alone, so that no line is flattened by another's scale. metrics selects
// what to draw (nil: everything but global_step).
func buildPanels(train []trainRecord, eval []evalRecord, metrics []string) ([]panel, error) {
	evalNames := map[string]bool{}
	runs := map[string]bool{} // the evaluations by name ("" for the unnamed)
	for _, r := range eval {
		runs[r.Name] = true
		for k := range r.Metrics {
			evalNames[k] = true
		}
	}
	available := []string{}
	if len(train) > 0 || evalNames["loss"] {
		available = append(available, "loss")
	}
	for _, k := range sortedKeys(evalNames) {
		if k != "loss" {
			available = append(available, k)
		}
	}
	if metrics == nil {
		metrics = slices.DeleteFunc(slices.Clone(available), func(s string) bool { return s == "global_step" })
	}
	for _, m := range metrics {
		if !slices.Contains(available, m) {
			return nil, fmt.Errorf("no metric %q in the history (it has: %s)", m, strings.Join(available, ", "))
		}
	}
	if len(metrics) == 0 {
		return nil, fmt.Errorf("nothing to plot (the history has: %s)", strings.Join(available, ", "))
	}

	color := 0
	// evalSeries are a metric's series, one per evaluation name that has
	// it: "eval loss", "eval_test loss", as the event directories are named.
	evalSeries := func(metric string) []series {
		var out []series
		for _, name := range sortedKeys(runs) {
			var xy plotter.XYs
			for _, r := range eval {
				if v, ok := r.Metrics[metric]; ok && r.Name == name {
					xy = append(xy, plotter.XY{X: float64(r.Step), Y: v})
				}
			}
			if len(xy) == 0 {
				continue
			}
			label := "eval"
			if name != "" {
				label += "_" + name
			}
			out = append(out, series{name: label + " " + metric, xy: xy, color: color, points: true})
			color++
		}
		return out
	}
	var panels []panel
	if slices.Contains(metrics, "loss") {
		p := panel{title: "loss", ylabel: "loss"}
		if len(train) > 0 {
			xy := make(plotter.XYs, len(train))
			for i, r := range train {
				xy[i] = plotter.XY{X: float64(r.Step), Y: r.Loss}
			}
			p.series = append(p.series, series{name: "train loss", xy: xy, color: color, points: len(xy) == 1})
		}
		color++
		p.series = append(p.series, evalSeries("loss")...)
		panels = append(panels, p)
	}
	unit := panel{title: "eval metrics in [0, 1]", ylabel: "value", unit: true}
	var others []panel
	for _, m := range metrics {
		if m == "loss" {
			continue
		}
		ss := evalSeries(m)
		if slices.IndexFunc(ss, func(s series) bool { return !inUnit(s.xy) }) < 0 {
			unit.series = append(unit.series, ss...)
		} else {
			others = append(others, panel{title: "eval " + m, ylabel: m, series: ss})
		}
	}
	if len(unit.series) == 1 {
		unit.title, unit.ylabel = unit.series[0].name, strings.TrimPrefix(unit.series[0].name, "eval ")
	}
	if len(unit.series) > 0 {
		panels = append(panels, unit)
	}
	return append(panels, others...), nil
}

func inUnit(xy plotter.XYs) bool {
	for _, p := range xy {
		if !(p.Y >= 0 && p.Y <= 1) {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// renderPanels draws the panels stacked, aligned and sharing the step
// range, into a white width×height image.
func renderPanels(panels []panel, title string, width, height int) (image.Image, error) {
	c, plots, canvases, err := layoutPanels(panels, title, width, height)
	if err != nil {
		return nil, err
	}
	for i, p := range plots {
		p.Draw(canvases[i])
	}
	return c.Image(), nil
}

// layoutPanels makes the panels' plots on a width×height image and the
// canvas each is drawn on, with their legends placed off the data.
func layoutPanels(panels []panel, title string, width, height int) (*vgimg.Canvas, []*plot.Plot, []draw.Canvas, error) {
	xmin, xmax := math.Inf(1), math.Inf(-1)
	for _, p := range panels {
		for _, s := range p.series {
			for _, pt := range s.xy {
				xmin, xmax = min(xmin, pt.X), max(xmax, pt.X)
			}
		}
	}
	if xmin == xmax {
		xmin, xmax = xmin-1, xmax+1
	}
	plots := make([][]*plot.Plot, len(panels))
	for i, pn := range panels {
		p, err := newPanelPlot(pn, xmin, xmax)
		if err != nil {
			return nil, nil, nil, err
		}
		if i == 0 {
			p.Title.Text = title
		}
		if i == len(panels)-1 {
			p.X.Label.Text = "step"
		}
		plots[i] = []*plot.Plot{p}
	}

	c := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, width, height))), vgimg.UseDPI(plotDPI))
	tiles := draw.Tiles{
		Rows: len(panels), Cols: 1,
		PadY:   4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter,
		PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter,
	}
	aligned := plot.Align(plots, tiles, draw.New(c))
	out := make([]*plot.Plot, len(panels))
	canvases := make([]draw.Canvas, len(panels))
	for i := range plots {
		out[i], canvases[i] = plots[i][0], aligned[i][0]
		placeLegend(out[i], canvases[i], panels[i])
	}
	return c, out, canvases, nil
}

// newPanelPlot makes the plot of one panel.
func newPanelPlot(pn panel, xmin, xmax float64) (*plot.Plot, error) {
	p := plot.New()
	p.Y.Label.Text = pn.ylabel
	p.X.Min, p.X.Max = xmin, xmax
	p.X.Tick.Marker = stepTicks{}
	p.Add(plotter.NewGrid())
	var lone, rest []plot.Plotter // a lone point's mark goes under the rest
	for _, s := range pn.series {
		l, err := plotter.NewLine(s.xy)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		l.LineStyle.Color = plotutil.Color(s.color)
		l.LineStyle.Width = vg.Points(1.5)
		rest = append(rest, l)
		thumbs := []plot.Thumbnailer{l}
		if s.points {
			sc, err := plotter.NewScatter(s.xy)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
			sc.GlyphStyle.Color = plotutil.Color(s.color)
			sc.GlyphStyle.Shape = draw.CircleGlyph{}
			sc.GlyphStyle.Radius = vg.Points(2.5)
			if len(s.xy) == 1 {
				// Larger, so that it shows around another series' point
				// lying on it.
				sc.GlyphStyle.Radius = vg.Points(5)
				lone = append(lone, sc)
			} else {
				rest = append(rest, sc)
			}
			thumbs = append(thumbs, sc)
		}
		p.Legend.Add(s.name, thumbs...)
	}
	p.Add(lone...)
	p.Add(rest...)
	if pn.logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = decadeTicks{}
	}
	if lo, hi, ok := valueAxis(pn); ok {
		p.Y.Min, p.Y.Max = lo, hi
	}
	if lo, hi := yRange(pn.series); hi >= lo {
		p.Y.Label.Text += " (" + rangeText(lo, hi) + ")"
	}
	return p, nil
}

// yRange returns the least and greatest value of the series.
func yRange(ss []series) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, pt := range s.xy {
			lo, hi = min(lo, pt.Y), max(hi, pt.Y)
		}
	}
	return lo, hi
}

// stepTicks is the default ticker with integral steps written in full
// ("150000", not "1.5e+05").
type stepTicks struct{}

func (stepTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i, t := range ticks {
		if t.Label != "" && t.Value == math.Trunc(t.Value) && math.Abs(t.Value) < 1e15 {
			ticks[i].Label = strconv.FormatInt(int64(t.Value), 10)
		}
	}
	return ticks
}

// writePNG encodes img to path.
func writePNG(path string, img image.Image) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	if err := png.Encode(f, img); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
