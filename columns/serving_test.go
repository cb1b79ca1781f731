package columns

import (
	"context"
	"errors"
	"iter"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/model"
)

// TestServingAnswersAsPredict exports a model with its Transformer and
// serves raw records (an unknown category, missing numbers, a record
// with no features at all among them): the export's preprocessor, loaded
// from the export by this package's registered loader, gives the answers
// Predict gives on the records parsed here; bad records are refused as
// bad input.
func TestServingAnswersAsPredict(t *testing.T) {
	est, mdl, tr, exs, _ := trained(t)
	ctx := context.Background()
	dir, err := est.Export(ctx, t.TempDir(), tr.ServingInput(8), estimator.Preprocess(tr))
	if err != nil {
		t.Fatal(err)
	}
	p, err := export.Load(dir, mdl)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if kind, ok := p.Preprocessor(); !ok || kind != Kind {
		t.Fatalf("export's preprocessor %q, %v; want %q", kind, ok, Kind)
	}
	raw := append(append([]dataset.Example(nil), exs...),
		dataset.Example{"city": by("atlantis"), "z": by("w"), "p": in(3)},
		dataset.Example{})
	batch := func(context.Context) iter.Seq2[estimator.Batch, error] {
		return func(yield func(estimator.Batch, error) bool) { yield(tr.Parse(raw)) }
	}
	var want estimator.BatchOutput
	for o, err := range est.PredictBatches(ctx, batch) {
		if err != nil {
			t.Fatal(err)
		}
		want = o
	}
	got, err := p.PredictExamples(ctx, model.DefaultServingSignature, raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"input", "logits"} {
		if diff := cmp.Diff(want.Predictions[k].Data(), got[k].Data(), cmpopts.EquateApprox(0, 1e-6)); diff != "" {
			t.Errorf("served %s (-Predict +served):\n%s", k, diff)
		}
	}

	_, err = p.PredictExamples(ctx, model.DefaultServingSignature, []dataset.Example{{}, {"tag": by("one")}})
	var pe *dataset.ParseError
	if !errors.Is(err, export.ErrBadInput) || !errors.As(err, &pe) || pe.Example != 1 || pe.Feature != "tag" {
		t.Errorf("a string in an identity column: error %v, want a bad input naming example 1's feature \"tag\"", err)
	}

	// A record whose cross would make 3 × 3 ids, more than the
	// signature's 8, though each of its features is within it, is refused
	// as bad input naming the cross, before the ids are made (the
	// signature's width alone would refuse them only after, with no
	// *dataset.ParseError).
	_, err = p.PredictExamples(ctx, model.DefaultServingSignature, []dataset.Example{{}, {"city": by("a", "b", "c"), "z": by("u", "v", "w")}})
	if !errors.Is(err, export.ErrBadInput) || !errors.As(err, &pe) || pe.Example != 1 || pe.Feature != "city_X_z" || !strings.Contains(err.Error(), "at most 8 an example") {
		t.Errorf("a cross over the signature's width: error %v, want a bad input naming example 1's feature \"city_X_z\" and its width of 8", err)
	}
}
