package tabular

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/canned"
	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/export"
)

// TestRunExportAnswersRawRecords: Run's export holds the fitted columns,
// so that the loaded export, given raw records (strings and numbers, a
// missing number and an empty string included), answers as the
// Estimator's Predict does on the same rows read from the CSV file.
func TestRunExportAnswersRawRecords(t *testing.T) {
	ctx := context.Background()
	base := filepath.Join(t.TempDir(), "export")
	eval := []string{"testdata/penguins_species/test.csv"}
	res, err := Run(ctx, Options{
		Train: []string{"testdata/penguins_species/train.csv"}, Eval: eval,
		Infer: InferOptions{Label: "species"}, Steps: 20, Export: base,
		Run: estimator.RunConfig{Seed: 1, LogEvery: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Estimator.Close()
	if res.ExportDir == "" || filepath.Dir(res.ExportDir) != base {
		t.Fatalf("export directory %q, want a version under %s", res.ExportDir, base)
	}
	_, raw, err := Sample(eval, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// A client leaves out what the CSV row has empty (a number or a
	// string): an empty string and a missing string are the same input.
	missing := 0
	for _, ex := range raw {
		if _, ok := ex["body_mass_g"]; !ok {
			missing++
		}
		delete(ex, "species")
	}
	if missing == 0 {
		t.Fatal("no test row lacks a number: the test needs one")
	}
	p, err := export.Load(res.ExportDir, res.Estimator.Model())
	if err != nil {
		t.Fatal(err)
	}
	served, err := p.PredictExamples(ctx, canned.PredictSignature, raw)
	if err != nil {
		t.Fatal(err)
	}
	schema, _, err := Sample([]string{"testdata/penguins_species/train.csv"}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	in, err := res.Estimator.Input(dataset.Pipeline{Files: eval, CSV: &dataset.CSVOptions{Schema: res.Plan.CSVSchema(schema)}, BatchSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	var want []float32
	for pred, err := range res.Estimator.Predict(ctx, in) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, pred[canned.ProbabilitiesKey].Data().([]float32)...)
	}
	got := served[canned.ProbabilitiesKey].Data().([]float32)
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
		t.Errorf("served probabilities (-Predict +served):\n%s", diff)
	}
}
