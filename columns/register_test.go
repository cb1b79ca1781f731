package columns

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/export"
)

var (
	_ dataset.Parser         = (*Transformer)(nil)
	_ dataset.RawSpecer      = (*Transformer)(nil)
	_ estimator.Preprocessor = (*Transformer)(nil)
)

func TestRegisteredWithExport(t *testing.T) {
	if !slices.Contains(export.PreprocessorKinds(), Kind) {
		t.Errorf("export knows the kinds %q, not %q", export.PreprocessorKinds(), Kind)
	}
}

func TestRawSpec(t *testing.T) {
	age := Numeric("age", Default(30))
	one := float32(1)
	tr := mustTransformer(t, Config{
		Columns: []Column{
			Bucketized(age, []float64{18}),
			Numeric("pos", Shape(2)),
			Indicator(VocabularyList("city", []string{"a"})),
			Embedding(Weighted(Identity("tag", 10), "tag_w"), 2),
			Crossed([]Crossable{RawKey("word"), RawKey("age"), RawKey("h")}, 10),
		},
		Label:  &Label{Key: "y", Vocabulary: []string{"n", "y"}},
		Weight: &ExampleWeight{Key: "w", Default: &one},
	})
	want := map[string]dataset.FeatureSpec{
		"age":   {Dtype: tensor.Float32, Shape: []int{1}, Default: dataset.Feature{Floats: []float32{30}}},
		"pos":   {Dtype: tensor.Float32, Shape: []int{2}},
		"city":  {Dtype: tensor.String, VarLen: true},
		"tag":   {Dtype: tensor.Int64, VarLen: true},
		"tag_w": {Dtype: tensor.Float32, VarLen: true},
		"word":  {Dtype: tensor.String, VarLen: true},
		"h":     {Dtype: tensor.String, VarLen: true},
		"y":     {Dtype: tensor.String, Shape: []int{1}, Label: true},
		"w":     {Dtype: tensor.Float32, Shape: []int{1}, Label: true, Default: dataset.Feature{Floats: []float32{1}}},
	}
	if diff := cmp.Diff(want, tr.RawSpec(), cmp.Comparer(func(a, b tensor.Dtype) bool { return a == b })); diff != "" {
		t.Errorf("raw spec (-want +got):\n%s", diff)
	}
}

func TestServingInput(t *testing.T) {
	city := VocabularyList("city", []string{"a", "b"}, OOVBuckets(1))
	tr := mustTransformer(t, Config{Columns: []Column{
		Numeric("x", Shape(2, 3)), Bucketized(Numeric("age"), []float64{1, 2}), Indicator(city), Embedding(Weighted(city, "w"), 2),
	}})
	want := estimator.ServingInput{
		"x":                          {Dtype: tensor.Float32, Shape: []int{2, 3}},
		"age_bucketized":             {Dtype: tensor.Int64, Shape: []int{5}, Sparse: true},
		"age_bucketized_indicator":   {Dtype: tensor.Float32, Shape: []int{3}},
		"city_indicator":             {Dtype: tensor.Float32, Shape: []int{3}},
		"city_weighted_by_w":         {Dtype: tensor.Int64, Shape: []int{5}, Sparse: true},
		"city_weighted_by_w_weights": {Dtype: tensor.Float32, Shape: []int{5}, Sparse: true},
	}
	if diff := cmp.Diff(want, tr.ServingInput(5), cmp.Comparer(func(a, b tensor.Dtype) bool { return a == b })); diff != "" {
		t.Errorf("serving input (-want +got):\n%s", diff)
	}
}
