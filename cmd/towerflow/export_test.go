package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/internal/exportdir"
	"github.com/towerflow/towerflow/internal/fifotest"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/tabular"
	"github.com/towerflow/towerflow/towers"
)

// exportLinreg trains the linear example three steps and exports it,
// returning the version directory.
func exportLinreg(t *testing.T) string {
	t.Helper()
	m := replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}, Optimizer: optimizers.SGD(0.1)})
	est, err := estimator.New(m, estimator.RunConfig{ModelDir: t.TempDir(), Seed: 1, LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { est.Close() })
	features, labels := linreg.Data(40, 1)
	in, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 8, Epochs: estimator.Forever})
	if err != nil {
		t.Fatal(err)
	}
	if err := est.Train(context.Background(), in, estimator.Steps(3)); err != nil {
		t.Fatal(err)
	}
	dir, err := est.Export(context.Background(), t.TempDir(), estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1}}})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestInspectExport: given an export version directory, inspect prints its
// signatures and the variables it holds.
func TestInspectExport(t *testing.T) {
	dir := exportLinreg(t)
	var out bytes.Buffer
	if err := inspect(&out, io.Discard, []string{dir}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	wantLines := []string{
		"checkpoint: " + filepath.Join(dir, exportdir.VariablesDir, "ckpt-3"),
		"step:       3",
		"export:     " + exportdir.Format + ", global step 3",
		`signature:  "serving_default" (regress)`,
		"  input     x float64 [-1 1]",
		"  output    outputs float64 [-1 1]",
	}
	var got []string
	for line := range strings.Lines(s) {
		line = strings.TrimRight(line, "\n")
		for _, w := range wantLines {
			if line == w {
				got = append(got, line)
			}
		}
	}
	if diff := cmp.Diff(wantLines, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s\noutput:\n%s", diff, s)
	}
	rows := tableRows(s)
	for _, name := range []string{"w", "b"} {
		if _, ok := rows[name]; !ok {
			t.Errorf("no row for variable %q in:\n%s", name, s)
		}
	}
}

// TestInspectExportBaseDir: inspect on an export base directory points to
// its newest version.
func TestInspectExportBaseDir(t *testing.T) {
	version := exportLinreg(t)
	base := filepath.Dir(version)
	err := inspect(io.Discard, io.Discard, []string{base})
	checkCommandError(t, err, false, "holds export versions", version)
}

// TestInspectSignaturesNotARegularFile: a named pipe where signatures.json
// belongs is an error naming it, not a read (that would wait forever).
func TestInspectSignaturesNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, exportdir.SignaturesFile)
	fifotest.Make(t, path)
	err := inspect(io.Discard, io.Discard, []string{dir})
	checkCommandError(t, err, false, path, "not a regular file")
}

// TestInspectPreprocessedExport: an export with a column transformation
// lists its preprocessor and the raw features requests send; inspect of
// a file says it is one.
func TestInspectPreprocessedExport(t *testing.T) {
	res, err := tabular.Run(context.Background(), tabular.Options{
		Train: []string{"../../tabular/testdata/penguins_sex/train.csv"}, Eval: []string{"../../tabular/testdata/penguins_sex/test.csv"},
		Infer: tabular.InferOptions{Label: "sex", Positive: "female"}, Steps: 5, Seed: 1, Export: t.TempDir(),
		Run: estimator.RunConfig{Seed: 1, LogEvery: -1},
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Estimator.Close()
	var out bytes.Buffer
	if err := inspect(&out, io.Discard, []string{res.ExportDir}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for line := range strings.Lines(out.String()) {
		if strings.HasPrefix(line, "preprocessor:") || strings.HasPrefix(line, "  raw") || strings.HasPrefix(line, "  label") {
			got = append(got, strings.TrimRight(line, "\n"))
		}
	}
	want := []string{
		"preprocessor: towerflow/columns: requests send raw features, the inputs above are what it makes of them",
		"  raw       bill_depth_mm float32 [1]",
		"  raw       bill_length_mm float32 [1]",
		"  raw       body_mass_g float32 [1]",
		"  raw       flipper_length_mm float32 [1]",
		"  raw       island string any number",
		"  label     sex string [1]",
		"  raw       species string any number",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s\noutput:\n%s", diff, out.String())
	}
	err = inspect(io.Discard, io.Discard, []string{"../../tabular/testdata/penguins_sex/train.csv"})
	checkCommandError(t, err, false, "train.csv is a file, not a checkpoint, model or export version directory")

	// A preprocessor changed since the export: a warning, and the rest.
	changed := filepath.Join(t.TempDir(), "1")
	if err := os.CopyFS(changed, os.DirFS(res.ExportDir)); err != nil {
		t.Fatal(err)
	}
	pre := filepath.Join(changed, filepath.FromSlash(exportdir.PreprocessorFile))
	if err := os.WriteFile(pre, []byte(`{"kind":"towerflow/columns","config":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	var warn bytes.Buffer
	if err := inspect(&out, &warn, []string{changed}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(warn.String(), "towerflow inspect: warning: the export's preprocessor:") || !strings.Contains(out.String(), "parameters:") {
		t.Errorf("a changed preprocessor: stderr %q, output:\n%s\nwant a warning and the variables", warn.String(), out.String())
	}
}
