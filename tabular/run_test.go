package tabular

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/wanterr"
)

func TestRunErrors(t *testing.T) {
	dir := t.TempDir()
	noIsland := filepath.Join(dir, "no_island.csv")
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(noIsland, []byte("species,bill_length_mm,bill_depth_mm,flipper_length_mm,body_mass_g,sex\nAdelie,39.1,18.7,181,3750,male\n"), 0o644))
	unknownLabel := filepath.Join(dir, "unknown_label.csv")
	must(os.WriteFile(unknownLabel, []byte("species,island,bill_length_mm,bill_depth_mm,flipper_length_mm,body_mass_g,sex\nAdelie,Dream,39.1,18.7,181,3750,unknown\n"), 0o644))
	empty := filepath.Join(dir, "empty.csv")
	must(os.WriteFile(empty, []byte("species,island,bill_length_mm,bill_depth_mm,flipper_length_mm,body_mass_g,sex\n"), 0o644))
	train := []string{"testdata/penguins_sex/train.csv"}
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"no files", Options{Infer: InferOptions{Label: "sex"}}, "want training and evaluation files"},
		{"CSV and TFRecord", Options{Train: []string{"testdata/penguins_sex/train.csv"}, Eval: []string{"eval.tfrecord"}, Infer: InferOptions{Label: "sex"}},
			"one CSV, the other TFRecord"},
		{"model", Options{Train: []string{"testdata/penguins_sex/train.csv"}, Eval: []string{"testdata/penguins_sex/test.csv"}, Infer: InferOptions{Label: "sex"}, Model: "forest"},
			`model "forest": want linear, dnn or wide_deep`},
		{"label", Options{Train: []string{"testdata/penguins_sex/train.csv"}, Eval: []string{"testdata/penguins_sex/test.csv"}, Infer: InferOptions{Label: "gender"}},
			`label "gender" is not a column of the data (columns: species, island, bill_length_mm`},
		{"missing file", Options{Train: []string{"testdata/none.csv"}, Eval: []string{"testdata/penguins_sex/test.csv"}, Infer: InferOptions{Label: "sex"}},
			"none.csv"},
		{"compressed CSV", Options{Train: train, Eval: []string{"test.csv.gz"}, Infer: InferOptions{Label: "sex"}},
			"test.csv.gz: compressed CSV files are not read (TFRecord files are): decompress it"},
		// Evaluation files that do not fit are errors before any training
		// (the model directory stays without a checkpoint).
		{"evaluation columns", Options{Train: train, Eval: []string{noIsland}, Infer: InferOptions{Label: "sex"}},
			"evaluation files " + noIsland},
		{"evaluation label", Options{Train: train, Eval: []string{unknownLabel}, Infer: InferOptions{Label: "sex"}},
			`label "unknown" is not in the label vocabulary`},
		{"evaluation records", Options{Train: train, Eval: []string{empty}, Infer: InferOptions{Label: "sex"}},
			"evaluation files " + empty + ": no records"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			modelDir := t.TempDir()
			tc.o.Run = estimator.RunConfig{ModelDir: modelDir, LogEvery: -1}
			_, err := Run(context.Background(), tc.o, io.Discard)
			wanterr.Mentions(t, err, tc.want)
			if entries, _ := os.ReadDir(modelDir); len(entries) > 0 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("the model directory holds %v, want nothing", names)
			}
		})
	}
}
