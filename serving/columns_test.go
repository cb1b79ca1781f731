package serving

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	fc "github.com/towerflow/towerflow/columns"
	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// censusCSV is a few rows of a city, an age, a job and a label.
const censusCSV = `city,age,job,label
paris,23,cook,0.5
oslo,41,pilot,1.5
lima,67,nurse,2
paris,35,clerk,1
oslo,19,cook,0
lima,52,pilot,2.5
`

// TestServeColumnsTransformer trains a model over feature columns (a
// vocabulary with an out-of-vocabulary bucket, embedded and linear; a
// number, bucketized; a hashed job) through a Pipeline whose Parser is
// the fc.Transformer, exports it with the Transformer, and serves
// it: predict and regress with raw values (an unknown city, an unseen
// job and an integer age among them) answer exactly as Estimator.Predict
// on the same rows through the pipeline.
func TestServeColumnsTransformer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	train := filepath.Join(dir, "train.csv")
	if err := os.WriteFile(train, []byte(censusCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	// The served rows, as a CSV file for Predict and as requests.
	served := filepath.Join(dir, "served.csv")
	if err := os.WriteFile(served, []byte("city,age,job,label\natlantis,52,astronaut,0\noslo,30.5,cook,0\nlima,19,clerk,0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const instances = `{"instances": [{"city": "atlantis", "age": 52, "job": "astronaut"}, {"city": ["oslo"], "age": 30.5, "job": {"b64": "Y29vaw=="}}, {"city": "lima", "age": [19], "job": "clerk"}]}`
	const examples = `[{"city": "atlantis", "age": 52, "job": "astronaut"}, {"city": ["oslo"], "age": 30.5, "job": {"b64": "Y29vaw=="}}, {"city": "lima", "age": [19], "job": "clerk"}]`

	city := fc.VocabularyList("city", []string{"paris", "oslo", "lima"}, fc.OOVBuckets(1))
	age := fc.Numeric("age", fc.Default(30))
	ageBuckets := fc.Bucketized(age, []float64{25, 45})
	job := fc.HashBucket("job", 8)
	dense := []fc.Column{fc.Indicator(ageBuckets), fc.Embedding(city, 2)}
	linear := []fc.Column{city, ageBuckets, job}
	tr, err := fc.NewTransformer(fc.Config{Columns: append(append([]fc.Column{}, dense...), linear...), Label: &fc.Label{Key: "label"}})
	if err != nil {
		t.Fatal(err)
	}
	fn := func(s *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
		in, err := fc.InputLayer(s, f, dense...)
		if err != nil {
			return nil, err
		}
		logits, err := fc.LinearLogits(s, f, 1, linear...)
		if err != nil {
			return nil, err
		}
		w := s.MustVariable("w", tensor.Float32, tensor.Shape{in.Shape()[1], 1}, towers.Zeros())
		p := G.Must(G.Add(logits, G.Must(G.Mul(in, w))))
		spec := &model.Spec{
			Predictions: map[string]*G.Node{"p": p},
			ExportOutputs: map[string]model.ExportOutput{
				model.DefaultServingSignature: model.PredictOutput{Outputs: map[string]*G.Node{"p": p}},
				"regress":                     model.RegressionOutput{Value: p},
			},
		}
		if mode != model.Predict {
			spec.Loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(p, l["label"]))))))
		}
		return spec, nil
	}
	mdl := replicate.ModelFn(fn, replicate.Config{Devices: []towers.Device{towers.CPU(0), towers.CPU(1)}, Optimizer: optimizers.SGD(0.05), Reduction: replicate.BatchMean})
	est, err := estimator.New(mdl, estimator.RunConfig{Seed: 1, LogEvery: -1, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	schema := dataset.Schema{{Name: "city", Kind: dataset.KindBytes}, {Name: "age", Kind: dataset.KindFloat}, {Name: "job", Kind: dataset.KindBytes}, {Name: "label", Kind: dataset.KindFloat}}
	pipeline := func(file string, training bool) estimator.InputFn {
		p := dataset.Pipeline{Files: []string{file}, CSV: &dataset.CSVOptions{Schema: schema, Columns: []string{"city", "age", "job"}}, Parser: tr, BatchSize: 2, Workers: 2}
		if training {
			p.CSV.Columns, p.Epochs, p.ShuffleBuffer, p.Seed = nil, estimator.Forever, 4, 1
		}
		in, err := p.Input()
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	if err := est.Train(ctx, pipeline(train, true), estimator.Steps(6)); err != nil {
		t.Fatal(err)
	}
	var want []float32
	for p, err := range est.Predict(ctx, pipeline(served, false)) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, p["p"].Data().([]float32)...)
	}
	if len(want) != 3 {
		t.Fatalf("Predict gave %d predictions for 3 rows", len(want))
	}
	base := t.TempDir()
	if _, err := est.Export(ctx, base, tr.ServingInput(4), estimator.Preprocess(tr)); err != nil {
		t.Fatal(err)
	}
	_, hs := newTestServer(t, []ModelConfig{{Name: "census", BaseDir: base, Model: mdl}}, Config{})
	var pred struct{ Predictions [][]float32 }
	postOK(t, hs, "census", "predict", instances, &pred)
	var got []float32
	for _, r := range pred.Predictions {
		got = append(got, r...)
	}
	// The served JSON is written from float32 to the shortest decimal
	// that reads back as the same float32.
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("predict (-Estimator.Predict +served):\n%s", diff)
	}
	var reg struct{ Results []float32 }
	postOK(t, hs, "census", "regress", `{"signature_name": "regress", "examples": `+examples+`}`, &reg)
	if diff := cmp.Diff(want, reg.Results); diff != "" {
		t.Errorf("regress (-Estimator.Predict +served):\n%s", diff)
	}
	res := do(t, hs, "GET", "/v1/models/census/metadata", "")
	for _, feature := range []string{`"city":{"dtype":"DT_STRING"`, `"age":{"dtype":"DT_FLOAT"`, `"job":{"dtype":"DT_STRING"`} {
		if !json.Valid([]byte(res.body)) || !strings.Contains(res.body, feature) {
			t.Errorf("metadata does not describe %s: %s", feature, res.body)
		}
	}
	if strings.Contains(res.body, `"label"`) {
		t.Errorf("metadata describes the label as an input: %s", res.body)
	}
}
