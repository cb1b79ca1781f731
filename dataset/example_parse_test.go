package dataset

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/sharding"
)

// denseOf is a tensor's shape and values, to compare.
type denseOf struct {
	Shape []int
	Data  any
}

func describe(b sharding.Batch) map[string]any {
	out := map[string]any{}
	for k, t := range b.Features {
		out["feature "+k] = denseOf{t.Shape().Clone(), t.Data()}
	}
	for k, t := range b.Labels {
		out["label "+k] = denseOf{t.Shape().Clone(), t.Data()}
	}
	for k, s := range b.Sparse {
		out["sparse "+k] = struct {
			Indices    [][]int
			Values     any
			DenseShape []int
		}{s.Indices, s.Values.Data(), s.DenseShape}
	}
	return out
}

// TestParseExamples: fixed-length features become dense tensors of the
// batch (defaults filling in), variable-length ones sparse features as
// TensorFlow's VarLenFeature, labels where the spec puts them; the batch
// is one sharding accepts.
func TestParseExamples(t *testing.T) {
	examples := []Example{
		{"age": {Int64s: []int64{30}}, "xy": {Floats: []float32{1, 2, 3, 4}}, "tags": {Bytes: [][]byte{[]byte("a"), []byte("b")}}, "ids": {Int64s: []int64{5}}, "y": {Floats: []float32{0.5}}, "extra": {Int64s: []int64{9}}},
		{"xy": {Floats: []float32{5, 6, 7, 8}}, "tags": {Bytes: [][]byte{}}, "y": {Floats: []float32{1.5}}},
		{"age": {Int64s: []int64{50}}, "xy": {Floats: []float32{9, 10, 11, 12}}, "ids": {Int64s: []int64{6, 7, 8}}, "y": {Floats: []float32{2.5}}},
	}
	spec := map[string]FeatureSpec{
		"age":  {Dtype: tensor.Int64, Default: Feature{Int64s: []int64{-1}}},
		"xy":   {Dtype: tensor.Float64, Shape: []int{2, 2}},
		"tags": {Dtype: tensor.String, VarLen: true},
		"ids":  {Dtype: tensor.Int64, VarLen: true},
		"y":    {Dtype: tensor.Float32, Label: true},
	}
	b, err := ParseExamples(examples, spec)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"feature age": denseOf{[]int{3}, []int64{30, -1, 50}},
		"feature xy":  denseOf{[]int{3, 2, 2}, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
		"label y":     denseOf{[]int{3}, []float32{0.5, 1.5, 2.5}},
		"sparse tags": struct {
			Indices    [][]int
			Values     any
			DenseShape []int
		}{[][]int{{0, 0}, {0, 1}}, []string{"a", "b"}, []int{3, 2}},
		"sparse ids": struct {
			Indices    [][]int
			Values     any
			DenseShape []int
		}{[][]int{{0, 0}, {2, 0}, {2, 1}, {2, 2}}, []int64{5, 6, 7, 8}, []int{3, 3}},
	}
	if diff := cmp.Diff(want, describe(b)); diff != "" {
		t.Errorf("batch (-want +got):\n%s", diff)
	}
	if rows, err := b.Rows(); err != nil || rows != 3 {
		t.Errorf("Rows = %d, %v; want 3", rows, err)
	}
	for k, s := range b.Sparse {
		if err := s.Validate(); err != nil {
			t.Errorf("sparse %q: %v", k, err)
		}
	}
	if _, _, err := b.Split(2); err != nil {
		t.Errorf("Split(2): %v", err)
	}

	// A variable-length feature no example has is one column wide.
	b, err = ParseExamples(examples[1:2], map[string]FeatureSpec{"ids": {Dtype: tensor.Int64, VarLen: true}})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Sparse["ids"].DenseShape; !cmp.Equal(got, []int{1, 1}) {
		t.Errorf("an all-empty variable-length feature: dense shape %v, want [1 1]", got)
	}
	if _, err := b.Rows(); err != nil {
		t.Errorf("Rows: %v", err)
	}
}

// TestParseExamplesErrors: an example that does not fit the spec is a
// *ParseError naming the example and the feature; a spec that cannot be
// met an error naming the feature.
func TestParseExamplesErrors(t *testing.T) {
	ex := Example{"n": {Int64s: []int64{1, 2}}, "f": {Floats: []float32{1}}}
	tests := []struct {
		name    string
		spec    map[string]FeatureSpec
		want    string
		example int // the ParseError's, -1 for a spec's error
	}{
		{"wrong kind", map[string]FeatureSpec{"n": {Dtype: tensor.Float32, Shape: []int{2}, Default: Feature{Floats: []float32{0, 0}}}}, `example 1: feature "n": holds int64 values, want float`, 1},
		{"wrong kind, variable-length", map[string]FeatureSpec{"f": {Dtype: tensor.String, VarLen: true}}, `example 1: feature "f": holds float values, want bytes`, 1},
		{"wrong length", map[string]FeatureSpec{"n": {Dtype: tensor.Int64, Shape: []int{3}, Default: Feature{Int64s: []int64{0, 0, 0}}}}, `example 1: feature "n": has 2 values, want 3 for shape [3]`, 1},
		{"missing", map[string]FeatureSpec{"m": {Dtype: tensor.Int64}}, `example 0: feature "m": missing, and the spec gives no default`, 0},
		{"unsupported dtype", map[string]FeatureSpec{"n": {Dtype: tensor.Int32}}, `feature "n": dtype int32`, -1},
		{"default of another kind", map[string]FeatureSpec{"n": {Dtype: tensor.Int64, Default: Feature{Floats: []float32{1}}}}, `feature "n": default has 1 float values, want 1 int64`, -1},
		{"default of another length", map[string]FeatureSpec{"n": {Dtype: tensor.Int64, Shape: []int{2}, Default: Feature{Int64s: []int64{1}}}}, `want 2 int64 values for shape [2]`, -1},
		{"sparse label", map[string]FeatureSpec{"n": {Dtype: tensor.Int64, VarLen: true, Label: true}}, `feature "n": a variable-length feature cannot be a label`, -1},
		{"zero dimension", map[string]FeatureSpec{"n": {Dtype: tensor.Int64, Shape: []int{0}}}, `feature "n": shape [0]`, -1},
		{"no features", map[string]FeatureSpec{}, "names no features", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseExamples([]Example{{"f": {Floats: []float32{}}}, ex}, tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one saying %q", err, tt.want)
			}
			var pe *ParseError
			if got := errors.As(err, &pe); got != (tt.example >= 0) || (got && pe.Example != tt.example) {
				t.Errorf("error %v: a ParseError %v (%+v), want one for example %d", err, got, pe, tt.example)
			}
		})
	}
	if _, err := ParseExamples(nil, map[string]FeatureSpec{"n": {Dtype: tensor.Int64}}); err == nil {
		t.Error("no examples: no error")
	}
}
