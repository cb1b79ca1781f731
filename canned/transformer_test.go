package canned_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/canned"
	"github.com/towerflow/towerflow/columns"
	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/optimizers"
)

var catNames = []string{"north", "east", "south", "west", "center"}

// writeCSV writes d's rows as CSV with a header, the category by name and
// the label as "no" or "yes", and returns the file's path.
func writeCSV(t *testing.T, d tabular) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("x1,x2,cat,label\n")
	for i := range d.x1 {
		label := "no"
		if d.label[i] == 1 {
			label = "yes"
		}
		fmt.Fprintf(&b, "%v,%v,%s,%s\n", d.x1[i], d.x2[i], catNames[d.cat[i]], label)
	}
	path := filepath.Join(t.TempDir(), "rows.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var csvSchema = dataset.Schema{
	{Name: "x1", Kind: dataset.KindFloat}, {Name: "x2", Kind: dataset.KindFloat},
	{Name: "cat", Kind: dataset.KindBytes}, {Name: "label", Kind: dataset.KindBytes},
}

// TestTransformerEndToEnd trains a wide-and-deep classifier from CSV
// files of raw records (string categories and labels) through its
// Transformer, exports it, and serves raw records from the export: the
// answers are Predict's on the same rows.
func TestTransformerEndToEnd(t *testing.T) {
	ctx := context.Background()
	head := canned.BinaryHead{LabelVocabulary: []string{"no", "yes"}}
	cat := columns.VocabularyList("cat", catNames)
	tr, err := columns.NewTransformer(canned.TransformerConfig(head, x1, x2, cat))
	if err != nil {
		t.Fatal(err)
	}
	est, err := canned.NewDNNLinearCombinedClassifier(canned.DNNLinearCombinedConfig{
		Head: head, Transformer: tr,
		LinearFeatureColumns: []columns.Column{cat, x1, x2}, LinearOptimizer: optimizers.FTRL(0.2),
		DNNFeatureColumns: []columns.Column{x1, x2}, DNNHiddenUnits: []int{8}, DNNOptimizer: optimizers.Adagrad(0.05),
		Replicate: oneTower(2)}, runConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	// Training shuffles; evaluation and prediction read in order.
	pipeline := func(path string, epochs, batch int) estimator.InputFn {
		shuffle := 0
		if epochs == estimator.Forever {
			shuffle = 200
		}
		in, err := est.Input(dataset.Pipeline{Files: []string{path}, CSV: &dataset.CSVOptions{Schema: csvSchema}, BatchSize: batch, Epochs: epochs, ShuffleBuffer: shuffle, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	train, eval := writeCSV(t, generate(2000, 41, 3, binaryLabel)), writeCSV(t, generate(1000, 42, 3, binaryLabel))
	if err := est.Train(ctx, pipeline(train, estimator.Forever, 50), estimator.MaxSteps(600)); err != nil {
		t.Fatal(err)
	}
	m, err := est.Evaluate(ctx, pipeline(eval, 1, 500))
	if err != nil {
		t.Fatal(err)
	}
	if m["auc"] < 0.95 || m["accuracy"] < 0.85 {
		t.Errorf("auc %v, accuracy %v: want at least 0.95 and 0.85 (metrics %v)", m["auc"], m["accuracy"], m)
	}

	dir, err := est.Export(ctx, t.TempDir(), tr.ServingInput(1))
	if err != nil {
		t.Fatal(err)
	}
	p, err := export.Load(dir, est.Model())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if kind, ok := p.Preprocessor(); !ok || kind != columns.Kind {
		t.Errorf("export's preprocessor %q, %v: want %q", kind, ok, columns.Kind)
	}
	// Rows without labels, an unknown category among them (its
	// out-of-vocabulary id is dropped: no weight of the category).
	rows := generate(6, 43, 3, binaryLabel)
	rowsPath := writeCSV(t, rows)
	var examples []dataset.Example
	for i := range rows.x1 {
		c := catNames[rows.cat[i]]
		if i == 5 {
			c = "nowhere"
		}
		examples = append(examples, dataset.Example{
			"x1":  {Floats: []float32{rows.x1[i]}},
			"x2":  {Floats: []float32{rows.x2[i]}},
			"cat": {Bytes: [][]byte{[]byte(c)}},
		})
	}
	got, err := p.PredictExamples(ctx, canned.PredictSignature, examples[:5])
	if err != nil {
		t.Fatal(err)
	}
	want, _, _ := predictions(t, est.Estimator, nil, pipeline(rowsPath, 1, 5))
	for _, k := range []string{"probabilities", "class_ids", "logits"} {
		if diff := cmp.Diff(want[k][:len(asFloats(t, got[k]))], asFloats(t, got[k]), cmpopts.EquateApprox(0, 1e-6)); diff != "" {
			t.Errorf("served %s differ from Predict's (-Predict +served):\n%s", k, diff)
		}
	}
	if _, err := p.PredictExamples(ctx, canned.PredictSignature, examples); err != nil {
		t.Errorf("an unknown category: %v", err)
	}

	// Another program serves the export: the same columns declared again,
	// the Transformer the export records, no model directory.
	pre, kind, err := export.LoadPreprocessor(dir)
	if err != nil {
		t.Fatal(err)
	}
	loaded, ok := pre.(*columns.Transformer)
	if !ok || kind != columns.Kind {
		t.Fatalf("LoadPreprocessor: a %T of kind %q, want a *columns.Transformer of kind %q", pre, kind, columns.Kind)
	}
	again, err := canned.NewDNNLinearCombinedClassifier(canned.DNNLinearCombinedConfig{
		Head: head, Transformer: loaded,
		LinearFeatureColumns: []columns.Column{cat, x1, x2}, DNNFeatureColumns: []columns.Column{x1, x2}, DNNHiddenUnits: []int{8},
		Replicate: oneTower(2)}, estimator.RunConfig{LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	p2, err := export.Load(dir, again.Model())
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	got2, err := p2.PredictExamples(ctx, canned.PredictSignature, examples[:5])
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"probabilities", "class_ids", "logits"} {
		if diff := cmp.Diff(asFloats(t, got[k]), asFloats(t, got2[k])); diff != "" {
			t.Errorf("%s served by another program (-first +other):\n%s", k, diff)
		}
	}
}

func TestTransformerMismatch(t *testing.T) {
	if cfg := canned.TransformerConfig((*canned.MultiClassHead)(nil), x1); cfg.Label != nil || len(cfg.Columns) != 1 {
		t.Errorf("TransformerConfig of a nil head pointer: %+v, want the column and no label", cfg)
	}
	tr, err := columns.NewTransformer(canned.TransformerConfig(canned.BinaryHead{LabelKey: "y"}, x1))
	if err != nil {
		t.Fatal(err)
	}
	_, err = canned.NewLinearClassifier(canned.LinearConfig{Transformer: tr}, runConfig())
	wanterr.Mentions(t, err, `the Transformer parses the label "y", the head reads "label"`)
	tr, err = columns.NewTransformer(canned.TransformerConfig(canned.BinaryHead{LabelVocabulary: []string{"a", "b"}}, x1))
	if err != nil {
		t.Fatal(err)
	}
	_, err = canned.NewLinearClassifier(canned.LinearConfig{Transformer: tr, Head: canned.BinaryHead{LabelVocabulary: []string{"b", "a"}}}, runConfig())
	wanterr.Mentions(t, err, "label vocabulary", "is not the head's")
	tr2, err := columns.NewTransformer(columns.Config{Columns: []columns.Column{x1}, Label: &columns.Label{Key: "label"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = canned.NewLinearRegressor(canned.LinearConfig{Transformer: tr2, Head: canned.RegressionHead{LabelDimension: 2}}, runConfig())
	wanterr.Mentions(t, err, "the Transformer parses 1 label values a record, the head reads 2")
	_, err = canned.NewLinearRegressor(canned.LinearConfig{Transformer: tr2, Head: canned.RegressionHead{WeightColumn: "w"}}, runConfig())
	wanterr.Mentions(t, err, `the head reads example weights "w", which the Transformer parses neither as weights nor as a feature`)
	if est, err := canned.NewLinearRegressor(canned.LinearConfig{Transformer: tr2, Head: canned.RegressionHead{WeightColumn: "x1"}}, runConfig()); err != nil {
		t.Errorf("weights of a feature the Transformer makes: %v", err)
	} else {
		est.Close()
	}
	ab := canned.BinaryHead{LabelVocabulary: []string{"a", "b"}}
	_, err = canned.NewLinearClassifier(canned.LinearConfig{Transformer: tr, FeatureColumns: []columns.Column{x2}, Head: ab}, runConfig())
	wanterr.Mentions(t, err, `FeatureColumns[0] "x2"`, `the Transformer makes no feature "x2"`)
	_, err = canned.NewLinearClassifier(canned.LinearConfig{Transformer: tr, FeatureColumns: []columns.Column{columns.HashBucket("x1", 10)}, Head: ab}, runConfig())
	wanterr.Mentions(t, err, `FeatureColumns[0] "x1"`, "is not the Transformer's column of that name: their settings differ")

	// A column of the Transformer's name and other settings is an error;
	// an embedding the Transformer lacks is the model's own when the
	// Transformer makes its categorical column's feature.
	h := columns.HashBucket("h", 10)
	tr, err = columns.NewTransformer(canned.TransformerConfig(ab, x1, h))
	if err != nil {
		t.Fatal(err)
	}
	dnn := func(cols ...columns.Column) error {
		est, err := canned.NewDNNClassifier(canned.DNNConfig{Transformer: tr, Head: ab, HiddenUnits: []int{2}, FeatureColumns: cols}, runConfig())
		if err == nil {
			est.Close()
		}
		return err
	}
	if err := dnn(x1, columns.Embedding(h, 3)); err != nil {
		t.Errorf("an embedding of the Transformer's categorical column: %v", err)
	}
	wanterr.Mentions(t, dnn(columns.Embedding(columns.HashBucket("h", 20), 3)), `FeatureColumns[0] "h_embedding"`, `categorical column "h" is not the Transformer's column of that name`)
	wanterr.Mentions(t, dnn(columns.Embedding(columns.HashBucket("g", 20), 3)), `the Transformer makes no feature "g" of its categorical column`)

	est, err := canned.NewLinearClassifier(canned.LinearConfig{FeatureColumns: []columns.Column{x1}}, runConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	_, err = est.Input(dataset.Pipeline{Files: []string{"x.csv"}, BatchSize: 1})
	wanterr.Mentions(t, err, "no Transformer")
	est, err = canned.NewLinearClassifier(canned.LinearConfig{Transformer: tr, Head: canned.BinaryHead{LabelVocabulary: []string{"a", "b"}}}, runConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	_, err = est.Input(dataset.Pipeline{Files: []string{"x.csv"}, BatchSize: 1, Spec: map[string]dataset.FeatureSpec{}})
	wanterr.Mentions(t, err, "has a Spec")
}

// TestColumnsDefinedBeforeFit: the columns a program defines before
// columns.Fit (which fits copies of them) configure the estimator as the
// Transformer's fitted columns do, a categorical column that the
// Transformer has only inside an embedding included.
func TestColumnsDefinedBeforeFit(t *testing.T) {
	ctx := context.Background()
	head := canned.BinaryHead{LabelVocabulary: []string{"no", "yes"}}
	x1s := columns.Numeric("x1", columns.Standardize())
	cat := columns.VocabularyFromData("cat")
	train := writeCSV(t, generate(2000, 41, 3, binaryLabel))
	src, err := dataset.NewCSVReader([]string{train}, dataset.CSVOptions{Schema: csvSchema})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tr, err := columns.Fit(ctx, src, canned.TransformerConfig(head, x1s, x2, columns.Embedding(cat, 2)))
	if err != nil {
		t.Fatal(err)
	}
	est, err := canned.NewDNNLinearCombinedClassifier(canned.DNNLinearCombinedConfig{
		Head: head, Transformer: tr,
		LinearFeatureColumns: []columns.Column{cat, x1s, x2}, LinearOptimizer: optimizers.FTRL(0.2),
		DNNFeatureColumns: []columns.Column{x1s, x2, columns.Embedding(cat, 2)}, DNNHiddenUnits: []int{8}, DNNOptimizer: optimizers.Adagrad(0.05),
		Replicate: oneTower(1)}, runConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	in, err := est.Input(dataset.Pipeline{Files: []string{train}, CSV: &dataset.CSVOptions{Schema: csvSchema}, BatchSize: 50, Epochs: estimator.Forever, ShuffleBuffer: 200, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := est.Train(ctx, in, estimator.MaxSteps(300)); err != nil {
		t.Fatal(err)
	}
	eval, err := est.Input(dataset.Pipeline{Files: []string{writeCSV(t, generate(1000, 42, 3, binaryLabel))}, CSV: &dataset.CSVOptions{Schema: csvSchema}, BatchSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	m, err := est.Evaluate(ctx, eval)
	if err != nil {
		t.Fatal(err)
	}
	if m["auc"] < 0.9 {
		t.Errorf("auc %v, want at least 0.9 (metrics %v)", m["auc"], m)
	}
}
