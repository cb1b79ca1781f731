package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/towers"
)

// saveModel saves a small store as checkpoints of steps 42 and 100 in a new
// model directory and returns the directory.
func saveModel(t *testing.T) string {
	t.Helper()
	store := towers.NewStore(towers.StoreConfig{})
	for _, spec := range []towers.VarSpec{
		{Name: "dense/w", Dtype: tensor.Float32, Shape: tensor.Shape{2, 3}, Init: towers.Constant(1), Trainable: true},
		{Name: "dense/b", Dtype: tensor.Float64, Shape: tensor.Shape{3}, Init: towers.Constant(0.5), Trainable: true},
		{Name: "global_step", Dtype: tensor.Int64},
	} {
		if _, _, err := store.GetOrCreate(spec); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "model")
	for _, step := range []int64{42, 100} {
		if _, err := checkpoint.Save(dir, store, step, 0); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tableRows returns the rows of inspect's variable table by name: the
// cells, split where two or more spaces separate them.
func tableRows(out string) map[string][]string {
	rows := map[string][]string{}
	cell := regexp.MustCompile(` {2,}`)
	for line := range strings.Lines(out) {
		f := cell.Split(strings.TrimSpace(line), -1)
		if len(f) == 8 {
			rows[f[0]] = f[1:]
		}
	}
	return rows
}

func TestInspect(t *testing.T) {
	dir := saveModel(t)
	r, err := checkpoint.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	fileBytes := map[string]string{}
	var total int64
	for _, e := range r.Manifest().Variables {
		fileBytes[e.Name] = strconv.FormatInt(e.Bytes, 10)
		total += e.Bytes
	}
	row := func(name string, cells ...string) []string { return append(cells, fileBytes[name]) }
	// A copy of the model directory whose newest checkpoint lost its
	// manifest: inspect falls back to the one before and says so.
	damaged := filepath.Join(t.TempDir(), "damaged")
	if err := os.CopyFS(damaged, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(damaged, "ckpt-100", checkpoint.ManifestFile)); err != nil {
		t.Fatal(err)
	}
	wantRows := map[string][]string{
		"NAME":        {"DTYPE", "NPY", "SHAPE", "TRAINABLE", "ELEMENTS", "BYTES", "FILE BYTES"},
		"dense/w":     row("dense/w", "float32", "<f4", "[2 3]", "true", "6", "24"),
		"dense/b":     row("dense/b", "float64", "<f8", "[3]", "true", "3", "24"),
		"global_step": row("global_step", "int64", "<i8", "scalar", "false", "1", "8"),
	}

	tests := []struct {
		name      string
		args      []string
		wantPath  string
		wantStep  string
		wantLines []string // more lines the output must contain, trimmed
		// wantWarnings is how many warnings inspect gives on stderr, each
		// naming something in warningsName.
		wantWarnings int
		warningsName []string
	}{
		{
			name:     "model dir means the latest checkpoint",
			args:     []string{dir},
			wantPath: filepath.Join(dir, "ckpt-100"),
			wantStep: "100",
		},
		{
			name:     "checkpoint dir",
			args:     []string{filepath.Join(dir, "ckpt-42")},
			wantPath: filepath.Join(dir, "ckpt-42"),
			wantStep: "42",
		},
		{
			name:     "values",
			args:     []string{"-values", dir},
			wantPath: filepath.Join(dir, "ckpt-100"),
			wantStep: "100",
			wantLines: []string{
				"dense/w      [1 1 1 1 1 1]",
				"dense/b      [0.5 0.5 0.5]",
				"global_step  [0]",
			},
		},
		{
			name:      "values with -n after the directory",
			args:      []string{dir, "-values", "-n", "2"},
			wantPath:  filepath.Join(dir, "ckpt-100"),
			wantStep:  "100",
			wantLines: []string{"dense/w      [1 1 …] (2 of 6)"},
		},
		{
			name:         "model dir with a damaged latest checkpoint",
			args:         []string{damaged},
			wantPath:     filepath.Join(damaged, "ckpt-42"),
			wantStep:     "42",
			wantWarnings: 1,
			warningsName: []string{filepath.Join(damaged, "ckpt-100"), checkpoint.ManifestFile},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, warnings bytes.Buffer
			if err := inspect(&out, &warnings, tc.args); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantWarnings, strings.Count(warnings.String(), "warning:")); diff != "" {
				t.Errorf("warnings (-want +got):\n%s\nstderr:\n%s", diff, warnings.String())
			}
			for _, w := range tc.warningsName {
				if !strings.Contains(warnings.String(), w) {
					t.Errorf("warnings do not name %s:\n%s", w, warnings.String())
				}
			}
			s := out.String()
			wantHeader := fmt.Sprintf("checkpoint: %s\nstep:       %s\nformat:     %s\n", tc.wantPath, tc.wantStep, checkpoint.Format)
			if !strings.HasPrefix(s, wantHeader) {
				t.Errorf("output does not start with\n%s\ngot:\n%s", wantHeader, s)
			}
			if diff := cmp.Diff(wantRows, tableRows(s)); diff != "" {
				t.Errorf("table rows (-want +got):\n%s\noutput:\n%s", diff, s)
			}
			wantTotal := regexp.MustCompile(`(?m)^total \(3 variables\) +2 trainable +10 +56 +` + strconv.FormatInt(total, 10) + `$`)
			if !wantTotal.MatchString(s) {
				t.Errorf("no totals line matching %v in:\n%s", wantTotal, s)
			}
			// dense/w's 6 and dense/b's 3, not global_step's 1.
			if want := "\nparameters: 9 trainable, of 10 elements in all (optimizer slots and counters included)\n"; !strings.Contains(s, want) {
				t.Errorf("no line %q in:\n%s", want, s)
			}
			for _, l := range tc.wantLines {
				if !strings.Contains(s, "\n"+l+"\n") {
					t.Errorf("no line %q in:\n%s", l, s)
				}
			}
			if !slices.Contains(tc.args, "-values") && strings.Contains(s, "[1 1") {
				t.Errorf("values printed without -values:\n%s", s)
			}
		})
	}
}

func TestInspectErrors(t *testing.T) {
	dir := saveModel(t)
	missing := filepath.Join(t.TempDir(), "nope")
	empty := t.TempDir()
	tests := []struct {
		name      string
		args      []string
		wantUsage bool
		wantIn    []string
	}{
		{name: "no args", args: nil, wantUsage: true, wantIn: []string{"got 0 arguments"}},
		{name: "two dirs", args: []string{dir, dir}, wantUsage: true, wantIn: []string{"got 2 arguments"}},
		{name: "bad flag", args: []string{"-bogus", dir}, wantUsage: true, wantIn: []string{"-bogus"}},
		{name: "bad -n", args: []string{"-n", "0", dir}, wantUsage: true, wantIn: []string{"-n 0"}},
		{name: "missing dir", args: []string{missing}, wantIn: []string{missing}},
		{name: "no checkpoint", args: []string{empty}, wantIn: []string{empty, "no checkpoint"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkCommandError(t, inspect(&bytes.Buffer{}, io.Discard, tc.args), tc.wantUsage, tc.wantIn...)
		})
	}
}

// checkCommandError checks that err is a command's error mentioning want,
// and a usage error exactly when wantUsage.
func checkCommandError(t *testing.T, err error, wantUsage bool, want ...string) {
	t.Helper()
	wanterr.Mentions(t, err, want...)
	if _, isUsage := err.(*usageError); isUsage != wantUsage {
		t.Errorf("usage error %v, want %v: %v", isUsage, wantUsage, err)
	}
}

// writeHistory writes a model directory's history files from records; a
// nil slice leaves the file out, strings are written as they are.
func writeHistory(t *testing.T, dir string, train, eval []any) {
	t.Helper()
	for name, recs := range map[string][]any{TrainHistoryFile: train, EvalHistoryFile: eval} {
		if recs == nil {
			continue
		}
		var b bytes.Buffer
		for _, r := range recs {
			if s, ok := r.(string); ok {
				b.WriteString(s + "\n")
				continue
			}
			line, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(append(line, '\n'))
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

var t0 = time.Date(2026, 11, 21, 23, 0, 0, 0, time.UTC)

// trainingRun returns the history of a plausible run: a noisy decaying
// training loss every 10 steps and an evaluation every 100.
func trainingRun(steps int) (train, eval []any) {
	for s := 10; s <= steps; s += 10 {
		loss := 2*math.Exp(-float64(s)/300) + 0.1 + 0.05*math.Sin(float64(s)/7)
		train = append(train, map[string]any{"step": s, "loss": loss, "time": t0.Add(time.Duration(s) * time.Second)})
		if s%100 == 0 {
			eval = append(eval, map[string]any{"step": s, "time": t0.Add(time.Duration(s) * time.Second), "metrics": map[string]float64{
				"loss":        2*math.Exp(-float64(s)/300) + 0.15,
				"accuracy":    1 - 0.9*math.Exp(-float64(s)/250),
				"auc":         1 - 0.5*math.Exp(-float64(s)/200),
				"mae":         40 * math.Exp(-float64(s)/400),
				"global_step": float64(s),
			}})
		}
	}
	return train, eval
}

func TestPlot(t *testing.T) {
	train, eval := trainingRun(1000)
	tests := []struct {
		name         string
		train, eval  []any
		flags        []string
		wantW, wantH int
		wantPanels   string // the panel list plot prints
	}{
		{
			name: "both histories", train: train, eval: eval,
			flags: []string{"-width", "640", "-height", "480"}, wantW: 640, wantH: 480,
			wantPanels: "loss; eval metrics in [0, 1]; eval mae",
		},
		{
			name: "chosen metrics, default height", train: train, eval: eval,
			flags: []string{"-metrics", "loss,accuracy", "-width", "500"}, wantW: 500, wantH: 2 * defaultPanelHeight,
			wantPanels: "loss; eval accuracy",
		},
		{
			name: "train history only", train: train,
			flags: []string{"-width", "300", "-height", "200"}, wantW: 300, wantH: 200,
			wantPanels: "loss",
		},
		{
			name: "eval history only, global_step asked for", eval: eval,
			flags: []string{"-metrics", "global_step", "-width", "320", "-height", "240"}, wantW: 320, wantH: 240,
			wantPanels: "eval global_step",
		},
		{
			name:  "single records",
			train: []any{map[string]any{"step": 5, "loss": 1.5}},
			eval:  []any{map[string]any{"step": 5, "metrics": map[string]float64{"accuracy": 0.5}}},
			flags: []string{"-width", "400", "-height", "300"}, wantW: 400, wantH: 300,
			wantPanels: "loss; eval accuracy",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeHistory(t, dir, tc.train, tc.eval)
			out := filepath.Join(t.TempDir(), "history.png")
			var stdout bytes.Buffer
			args := append([]string{"-o", out}, tc.flags...)
			if err := plotHistory(&stdout, io.Discard, append(args, dir)); err != nil {
				t.Fatal(err)
			}
			wantOut := fmt.Sprintf("wrote %s (%dx%d): %s\n", out, tc.wantW, tc.wantH, tc.wantPanels)
			if diff := cmp.Diff(wantOut, stdout.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			f, err := os.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			img, err := png.Decode(f)
			if err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			b := img.Bounds()
			if diff := cmp.Diff([2]int{tc.wantW, tc.wantH}, [2]int{b.Dx(), b.Dy()}); diff != "" {
				t.Errorf("image size (-want +got):\n%s", diff)
			}
			// Lines, text and axes: well over 1% of the pixels are not white.
			ink := 0
			for y := b.Min.Y; y < b.Max.Y; y++ {
				for x := b.Min.X; x < b.Max.X; x++ {
					if r, g, bl, _ := img.At(x, y).RGBA(); r < 0xf000 || g < 0xf000 || bl < 0xf000 {
						ink++
					}
				}
			}
			if ink < b.Dx()*b.Dy()/100 {
				t.Errorf("only %d of %d pixels are not white", ink, b.Dx()*b.Dy())
			}
		})
	}
}

func TestPlotDefaultOutput(t *testing.T) {
	dir := t.TempDir()
	train, eval := trainingRun(300)
	writeHistory(t, dir, train, eval)
	if err := plotHistory(&bytes.Buffer{}, io.Discard, []string{dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "history.png")); err != nil {
		t.Error(err)
	}
}

func TestPlotErrors(t *testing.T) {
	good := []any{map[string]any{"step": 10, "loss": 1.0}, map[string]any{"step": 20, "loss": 0.5}}
	goodEval := []any{map[string]any{"step": 20, "metrics": map[string]float64{"loss": 0.6, "accuracy": 0.8}}}
	tests := []struct {
		name        string
		train, eval []any
		args        []string
		wantUsage   bool
		wantIn      []string // "DIR" stands for the model directory
	}{
		{name: "bad -log", train: good, args: []string{"-log", "maybe"}, wantUsage: true, wantIn: []string{`-log "maybe"`, "auto, on or off"}},
		{
			name: "-log on with a zero loss", train: []any{good[0], map[string]any{"step": 20, "loss": 0.0}}, args: []string{"-log", "on"},
			wantIn: []string{"DIR", "log scale needs positive values"},
		},
		{
			name: "malformed train line", train: append(append([]any{}, good...), `{"step": 30, "loss": 0.4`),
			wantIn: []string{filepath.Join("DIR", TrainHistoryFile) + ":3:", "unexpected EOF"},
		},
		{
			name: "not JSON", train: []any{good[0], "", "step=30 loss=0.4"}, eval: goodEval,
			wantIn: []string{filepath.Join("DIR", TrainHistoryFile) + ":3:", "not a JSON object"},
		},
		{
			name: "two objects on a line", train: []any{`{"step": 1, "loss": 1} {"step": 2, "loss": 1}`},
			wantIn: []string{TrainHistoryFile + ":1:", "data after the JSON object"},
		},
		{
			name: "train line without loss", train: []any{good[0], map[string]any{"step": 20}},
			wantIn: []string{TrainHistoryFile + ":2:", `no "loss"`},
		},
		{
			name: "eval line without step", train: good, eval: []any{goodEval[0], map[string]any{"metrics": map[string]float64{}}},
			wantIn: []string{filepath.Join("DIR", EvalHistoryFile) + ":2:", `no "step"`},
		},
		{
			name: "eval metric not a number", eval: []any{goodEval[0], `{"step": 30, "metrics": {"accuracy": "high"}}`},
			wantIn: []string{EvalHistoryFile + ":2:", `metric "accuracy" is "high", not a number`},
		},
		{
			name: "bad time", train: []any{`{"step": 1, "loss": 1, "time": "yesterday"}`},
			wantIn: []string{TrainHistoryFile + ":1:", "yesterday"},
		},
		{
			name:   "no history files",
			wantIn: []string{"DIR", "no history", TrainHistoryFile, EvalHistoryFile},
		},
		{
			name: "empty history files", train: []any{}, eval: []any{""},
			wantIn: []string{"DIR", "hold no records"},
		},
		{
			name: "unknown metric", train: good, eval: goodEval, args: []string{"-metrics", "loss,recall"},
			wantIn: []string{`no metric "recall"`, "loss, accuracy"},
		},
		{name: "no dir", args: []string{}, wantUsage: true, wantIn: []string{"got 0 arguments"}},
		{name: "bad size", train: good, args: []string{"-width", "0"}, wantUsage: true, wantIn: []string{"0x0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeHistory(t, dir, tc.train, tc.eval)
			args := append([]string{"-o", filepath.Join(t.TempDir(), "out.png")}, tc.args...)
			if tc.args == nil || len(tc.args) > 0 {
				args = append(args, dir)
			}
			want := make([]string, len(tc.wantIn))
			for i, w := range tc.wantIn {
				want[i] = strings.ReplaceAll(w, "DIR", dir)
			}
			checkCommandError(t, plotHistory(&bytes.Buffer{}, io.Discard, args), tc.wantUsage, want...)
		})
	}
}

func TestReadTrainHistoryResumedRun(t *testing.T) {
	dir := t.TempDir()
	// A run logged steps 10-30, crashed, and resumed from a checkpoint at
	// step 20: the later records of steps 20 and 30 win.
	writeHistory(t, dir, []any{
		`{"step": 10, "loss": 1.0}`,
		`{"step": 20, "loss": 0.9}`,
		`{"step": 30, "loss": 0.8}`,
		``,
		`{"step": 20, "loss": 0.7}`,
		`{"step": 30, "loss": 0.6, "extra": "ignored"}`,
	}, nil)
	got, err := readTrainHistory(filepath.Join(dir, TrainHistoryFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []trainRecord{{Step: 10, Loss: 1.0}, {Step: 20, Loss: 0.7}, {Step: 30, Loss: 0.6}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

func TestBuildPanels(t *testing.T) {
	train := []trainRecord{{Step: 1, Loss: 2}, {Step: 2, Loss: 1}}
	eval := []evalRecord{
		{Step: 2, Metrics: map[string]float64{"loss": 1.1, "accuracy": 0.7, "auc": 0.8, "mae": 3, "global_step": 2}},
		{Step: 4, Metrics: map[string]float64{"loss": 0.9, "accuracy": 0.9, "auc": 0.85, "mae": 2, "global_step": 4}},
	}
	type shown struct {
		Title, YLabel string
		Series        []string
	}
	summary := func(ps []panel) []shown {
		var out []shown
		for _, p := range ps {
			s := shown{Title: p.title, YLabel: p.ylabel}
			for _, ser := range p.series {
				s.Series = append(s.Series, fmt.Sprintf("%s %v", ser.name, ser.xy))
			}
			out = append(out, s)
		}
		return out
	}
	named := []evalRecord{
		{Step: 2, Metrics: map[string]float64{"loss": 1.1, "accuracy": 0.7}},
		{Step: 2, Name: "test", Metrics: map[string]float64{"loss": 1.3, "accuracy": 0.6}},
		{Step: 4, Name: "test", Metrics: map[string]float64{"loss": 1.2, "accuracy": 0.65}},
	}
	tests := []struct {
		name    string
		eval    []evalRecord // nil: eval
		metrics []string
		want    []shown
	}{
		{
			name: "named evaluations apart",
			eval: named,
			want: []shown{
				{"loss", "loss", []string{"train loss [{1 2} {2 1}]", "eval loss [{2 1.1}]", "eval_test loss [{2 1.3} {4 1.2}]"}},
				{"eval metrics in [0, 1]", "value", []string{"eval accuracy [{2 0.7}]", "eval_test accuracy [{2 0.6} {4 0.65}]"}},
			},
		},
		{
			name: "default: loss, [0, 1] metrics together, others alone, no global_step",
			want: []shown{
				{"loss", "loss", []string{"train loss [{1 2} {2 1}]", "eval loss [{2 1.1} {4 0.9}]"}},
				{"eval metrics in [0, 1]", "value", []string{"eval accuracy [{2 0.7} {4 0.9}]", "eval auc [{2 0.8} {4 0.85}]"}},
				{"eval mae", "mae", []string{"eval mae [{2 3} {4 2}]"}},
			},
		},
		{
			name:    "chosen, one [0, 1] metric",
			metrics: []string{"mae", "auc"},
			want: []shown{
				{"eval auc", "auc", []string{"eval auc [{2 0.8} {4 0.85}]"}},
				{"eval mae", "mae", []string{"eval mae [{2 3} {4 2}]"}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.eval
			if ev == nil {
				ev = eval
			}
			ps, err := buildPanels(train, ev, tc.metrics)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, summary(ps)); diff != "" {
				t.Errorf("panels (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadEvalHistoryNamed: evaluations of different names at one step are
// all kept; of one name, the last written.
func TestReadEvalHistoryNamed(t *testing.T) {
	dir := t.TempDir()
	writeHistory(t, dir, nil, []any{
		map[string]any{"step": 2, "metrics": map[string]float64{"loss": 1}},
		map[string]any{"step": 2, "name": "test", "metrics": map[string]float64{"loss": 2}},
		map[string]any{"step": 2, "name": "test", "metrics": map[string]float64{"loss": 3}},
	})
	got, err := readEvalHistory(filepath.Join(dir, EvalHistoryFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []evalRecord{
		{Step: 2, Metrics: map[string]float64{"loss": 1}},
		{Step: 2, Name: "test", Metrics: map[string]float64{"loss": 3}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // substring
		wantStderr string // substring
	}{
		{name: "no args", args: nil, wantCode: 2, wantStderr: "usage: towerflow"},
		{name: "help", args: []string{"help"}, wantCode: 0, wantStdout: "usage: towerflow"},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: 2, wantStderr: "unknown command \"frobnicate\"\n\nusage: towerflow"},
		{name: "command help", args: []string{"plot", "-h"}, wantCode: 0, wantStdout: "-metrics names"},
		{name: "usage error", args: []string{"inspect"}, wantCode: 2, wantStderr: "usage: towerflow"},
		{name: "error", args: []string{"inspect", filepath.Join(t.TempDir(), "none")}, wantCode: 1, wantStderr: "towerflow inspect: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			if tc.wantStdout != "" && !strings.Contains(stdout.String(), tc.wantStdout) {
				t.Errorf("stdout does not contain %q:\n%s", tc.wantStdout, stdout.String())
			}
			if tc.wantStderr != "" && !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr does not contain %q:\n%s", tc.wantStderr, stderr.String())
			}
			if tc.wantStdout == "" && stdout.Len() > 0 {
				t.Errorf("unexpected stdout:\n%s", stdout.String())
			}
		})
	}
}
