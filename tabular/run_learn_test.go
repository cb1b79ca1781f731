package tabular

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// TestRunLearnsRealData trains on real data sets (tabular/testdata, from
// Debian packages: see bench/tabular_data.py) with two towers and checks
// the evaluation on their held-out rows far above chance: the penguins'
// sex from their species, island and measurements (binary; chance AUC
// 0.5, scikit-learn 0.92), their species (3 classes; the majority class
// is 44%), cars' miles per gallon (regression; the labels' standard
// deviation is 7.8) and the penguins' body mass (regression; standard
// deviation 800 g).
func TestRunLearnsRealData(t *testing.T) {
	if testing.Short() {
		t.Skip("trains three models")
	}
	tests := []struct {
		name, dir, label, positive string
		model                      Model
		check                      func(m map[string]float64) bool
		want                       string
	}{
		{"binary", "penguins_sex", "sex", "female", WideDeep,
			func(m map[string]float64) bool { return m["auc"] >= 0.85 && m["accuracy"] >= 0.75 }, "auc >= 0.85, accuracy >= 0.75"},
		{"multiclass", "penguins_species", "species", "", DNN,
			func(m map[string]float64) bool { return m["accuracy"] >= 0.9 }, "accuracy >= 0.9"},
		{"regression", "cars_mpg", "Miles_per_Gallon", "", Linear,
			func(m map[string]float64) bool { return m["rmse"] <= 4.5 && m["mae"] <= 3.5 }, "rmse <= 4.5, mae <= 3.5"},
		// A label in the thousands trains as fast as one near 1: the head
		// predicts in units of its standard deviation (800 g) from its
		// mean.
		{"regression in the thousands", "penguins_mass", "body_mass_g", "", WideDeep,
			func(m map[string]float64) bool { return m["rmse"] <= 400 && m["mae"] <= 320 }, "rmse <= 400, mae <= 320"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			res, err := Run(context.Background(), Options{
				Train: []string{"testdata/" + tc.dir + "/train.csv"}, Eval: []string{"testdata/" + tc.dir + "/test.csv"},
				Infer: InferOptions{Label: tc.label, Positive: tc.positive}, Model: tc.model, Steps: 300, Seed: 1,
				Run:       estimator.RunConfig{Seed: 1, LogEvery: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
				Replicate: replicate.Config{Devices: []towers.Device{towers.CPU(0), towers.CPU(1)}},
			}, &out)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Estimator.Close()
			if !strings.Contains(out.String(), "label \""+tc.label+"\"") {
				t.Errorf("the printed plan does not name the label:\n%s", out.String())
			}
			if !tc.check(res.Metrics) {
				t.Errorf("%s: %s, want %s", tc.dir, res.Summary(), tc.want)
			}
		})
	}
}

// TestRunTFRecord: TFRecord files of tf.Examples train as their CSV
// does (records without a feature where the CSV has an empty value),
// gzipped or not, as their names say.
func TestRunTFRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	dir := t.TempDir()
	for part, name := range map[string]string{"train": "train.tfrecord.gz", "test": "test.tfrecord"} {
		_, rows, err := Sample([]string{"testdata/penguins_sex/" + part + ".csv"}, 10000)
		if err != nil {
			t.Fatal(err)
		}
		w, err := dataset.CreateRecords(dir+"/"+name, dataset.AutoCompression)
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range rows {
			if err := w.WriteExample(ex); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Run(context.Background(), Options{
		Train: []string{dir + "/train.tfrecord.gz"}, Eval: []string{dir + "/test.tfrecord"},
		Infer: InferOptions{Label: "sex", Positive: "female"}, Steps: 300, Seed: 1,
		Run: estimator.RunConfig{Seed: 1, LogEvery: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Estimator.Close()
	if res.Rows != 267 {
		t.Errorf("%d training rows, want 267", res.Rows)
	}
	if res.Metrics["auc"] < 0.85 {
		t.Errorf("%s, want auc >= 0.85", res.Summary())
	}
}
