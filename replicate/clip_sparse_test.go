package replicate_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// densify is s's dense value.
func densify(t *testing.T, s towers.IndexedSlices) any {
	t.Helper()
	n := s.RowSize() * s.DenseShape[0]
	var d any = make([]float64, n)
	if _, ok := s.Values.([]float32); ok {
		d = make([]float32, n)
	}
	if err := s.AddTo(d); err != nil {
		t.Fatal(err)
	}
	return d
}

// densifyAll is grads with every IndexedSlices densified.
func densifyAll(t *testing.T, grads []any) []any {
	out := make([]any, len(grads))
	for i, g := range grads {
		out[i] = g
		if s, ok := g.(towers.IndexedSlices); ok {
			out[i] = densify(t, s)
		} else {
			out[i] = numeric.Copy(g)
		}
	}
	return out
}

// sparseCases are gradients with sparse ones among them: repeated indices
// (whose rows cancel or add up), none, float32 and float64, beside dense.
var sparseCases = []struct {
	name  string
	grads func() []any
}{
	{"duplicates cancel", func() []any {
		return []any{towers.IndexedSlices{Indices: []int{2, 0, 2}, Values: []float64{3, 4, 1, 1, -3, -4}, DenseShape: []int{4, 2}}}
	}},
	{"duplicates add", func() []any {
		return []any{towers.IndexedSlices{Indices: []int{1, 1, 3, 1}, Values: []float32{1, 2, 3, 4, 5, 6, 7, 8}, DenseShape: []int{5, 2}}}
	}},
	{"sparse and dense", func() []any {
		return []any{
			[]float64{0.5, -2, 7},
			towers.IndexedSlices{Indices: []int{0, 3, 0}, Values: []float64{1, -1, 2, 2, 0.25, 9}, DenseShape: []int{4, 2}},
			towers.IndexedSlices{DenseShape: []int{6, 3}}, // no rows
		}
	}},
	{"rank 1", func() []any {
		return []any{towers.IndexedSlices{Indices: []int{4, 4, 0, 4}, Values: []float64{1.5, 2.5, -8, 3}, DenseShape: []int{5}}}
	}},
}

// TestGlobalNormOfIndexedSlicesIsTheDensifiedNorm: a sparse gradient's
// norm is its densified value's — repeated indices summed first, not each
// row counted on its own — and the gradients given are not changed.
func TestGlobalNormOfIndexedSlicesIsTheDensifiedNorm(t *testing.T) {
	for _, tc := range sparseCases {
		t.Run(tc.name, func(t *testing.T) {
			grads := tc.grads()
			want, err := replicate.GlobalNorm(densifyAll(t, grads))
			if err != nil {
				t.Fatal(err)
			}
			got, err := replicate.GlobalNorm(grads)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("global norm %v, densified %v", got, want)
			}
			if diff := cmp.Diff(tc.grads(), grads); diff != "" {
				t.Errorf("GlobalNorm changed its gradients (-before +after):\n%s", diff)
			}
		})
	}
}

// TestClipIndexedSlicesEqualsDense: clipping sparse gradients (by norm, by
// value, both) gives their densified values clipped, exactly, and leaves
// the sparse values given alone (dense ones are clipped in place).
func TestClipIndexedSlicesEqualsDense(t *testing.T) {
	for _, tc := range sparseCases {
		for _, clip := range []model.Clip{{GlobalNorm: 1}, {Value: 1.75}, {GlobalNorm: 4, Value: 1}} {
			t.Run(tc.name, func(t *testing.T) {
				dense := densifyAll(t, tc.grads())
				wantNorm, err := replicate.ClipGradients(dense, clip)
				if err != nil {
					t.Fatal(err)
				}
				grads := tc.grads()
				given := slices.Clone(grads)
				norm, err := replicate.ClipGradients(grads, clip)
				if err != nil {
					t.Fatal(err)
				}
				if norm != wantNorm {
					t.Errorf("%+v: norm %v, densified %v", clip, norm, wantNorm)
				}
				if diff := cmp.Diff(dense, densifyAll(t, grads)); diff != "" {
					t.Errorf("%+v: clipped sparse gradients differ from the densified ones clipped (-dense +sparse):\n%s", clip, diff)
				}
				if diff := cmp.Diff(sparseOnly(tc.grads()), sparseOnly(given)); diff != "" {
					t.Errorf("%+v: clipping changed the sparse values given (-before +after):\n%s", clip, diff)
				}
			})
		}
	}
}

// sparseOnly is the IndexedSlices of grads (dense ones are clipped in
// place).
func sparseOnly(grads []any) []towers.IndexedSlices {
	var out []towers.IndexedSlices
	for _, g := range grads {
		if s, ok := g.(towers.IndexedSlices); ok {
			out = append(out, s)
		}
	}
	return out
}

// TestClipByValueAndNorm: hand-computed clippings of dense gradients.
func TestClipByValueAndNorm(t *testing.T) {
	cases := []struct {
		name     string
		clip     model.Clip
		grads    []any
		want     []any
		wantNorm float64
	}{
		{"value", model.Clip{Value: 1.5}, []any{[]float64{-3, 0.5, 2}, []float32{1.5, -1.25, -7}},
			[]any{[]float64{-1.5, 0.5, 1.5}, []float32{1.5, -1.25, -1.5}}, 0},
		{"norm", model.Clip{GlobalNorm: 2.5}, []any{[]float64{3, 0}, []float64{0, 4}},
			[]any{[]float64{1.5, 0}, []float64{0, 2}}, 5},
		{"norm then value", model.Clip{GlobalNorm: 2.5, Value: 1.75}, []any{[]float64{3, 0}, []float64{0, -4}},
			[]any{[]float64{1.5, 0}, []float64{0, -1.75}}, 5},
		{"norm within", model.Clip{GlobalNorm: 6}, []any{[]float64{3, 0}, []float64{0, 4}},
			[]any{[]float64{3, 0}, []float64{0, 4}}, 5},
		{"none", model.Clip{}, []any{[]float64{30, 0}}, []any{[]float64{30, 0}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			norm, err := replicate.ClipGradients(tc.grads, tc.clip)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, tc.grads); diff != "" {
				t.Errorf("clipped (-want +got):\n%s", diff)
			}
			if norm != tc.wantNorm {
				t.Errorf("norm %v, want %v", norm, tc.wantNorm)
			}
		})
	}
}

// TestClipErrors: a bound that is no bound, a norm that is not finite, a
// gradient of no known kind: errors naming them, nothing scaled.
func TestClipErrors(t *testing.T) {
	cases := []struct {
		name  string
		clip  model.Clip
		grads []any
		want  string
	}{
		{"negative", model.Clip{GlobalNorm: -1}, []any{[]float64{1}}, "GlobalNorm -1"},
		{"NaN", model.Clip{Value: math.NaN()}, []any{[]float64{1}}, "Value NaN"},
		{"infinite norm", model.Clip{GlobalNorm: 1}, []any{[]float64{1}, []float64{math.Inf(-1), 2}}, "gradient 1 is not finite"},
		{"NaN norm", model.Clip{GlobalNorm: 1}, []any{[]float32{float32(math.NaN())}}, "gradient 0 is not finite"},
		{"kind", model.Clip{GlobalNorm: 1}, []any{[]int{1}}, "not a []int"},
		{"bad slices", model.Clip{Value: 1}, []any{towers.IndexedSlices{Indices: []int{3}, Values: []float64{1}, DenseShape: []int{2}}}, "index 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := replicate.ClipGradients(tc.grads, tc.clip)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if d, ok := tc.grads[0].([]float64); ok && d[0] != 1 {
				t.Errorf("a failed clip scaled the gradients: %v", tc.grads)
			}
		})
	}
}

// TestApplyGradientsClipsACopy: ApplyGradients clips the gradients it is
// given without changing them, as a TrainStep on the batch would, and a
// model whose clipping cannot be done is an error that changes nothing.
func TestApplyGradientsClipsACopy(t *testing.T) {
	s := linearSetup{Opt: func() optimizers.Optimizer { return optimizers.SGD(0.1) }, Clip: model.Clip{GlobalNorm: 0.5}}
	batch := linearBatch(12, 1)
	ref := s.engine(t, s.config(1))
	if _, err := ref.TrainStep(context.Background(), batch, replicate.StepHooks{}); err != nil {
		t.Fatal(err)
	}
	e := s.engine(t, s.config(1))
	_, computed, err := e.ComputeGradients(context.Background(), batch, replicate.StepHooks{})
	if err != nil {
		t.Fatal(err)
	}
	var given []replicate.Gradient
	for _, g := range computed {
		given = append(given, replicate.Gradient{Variable: g.Variable, Value: numeric.Copy(g.Value)})
	}
	kept := make([]any, len(given))
	for i, g := range given {
		kept[i] = numeric.Copy(g.Value)
	}
	if err := e.ApplyGradients(context.Background(), given); err != nil {
		t.Fatal(err)
	}
	for i, g := range given {
		if diff := cmp.Diff(kept[i], g.Value); diff != "" {
			t.Errorf("ApplyGradients changed the gradient of %q it was given (-given +after):\n%s", g.Variable.Name(), diff)
		}
	}
	if diff := cmp.Diff(weightsOf(t, ref), weightsOf(t, e)); diff != "" {
		t.Errorf("computed then applied differs from a train step (-step +applied):\n%s", diff)
	}
	before := weightsOf(t, e)
	inf := numeric.Copy(given[0].Value).([]float64)
	inf[0] = math.Inf(1)
	given[0].Value = inf
	err = e.ApplyGradients(context.Background(), given)
	if err == nil || !strings.Contains(err.Error(), "not finite") || !strings.Contains(err.Error(), given[0].Variable.Name()) {
		t.Fatalf("applying an infinite gradient with clipping: error %v, want one naming %q, not finite", err, given[0].Variable.Name())
	}
	if diff := cmp.Diff(before, weightsOf(t, e)); diff != "" {
		t.Errorf("a failed clip changed the weights (-before +after):\n%s", diff)
	}
}
