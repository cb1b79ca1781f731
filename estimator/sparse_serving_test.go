package estimator_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/embedtest"
	"github.com/towerflow/towerflow/internal/wanterr"
)

// TestPredictEvaluateEmbedding predicts and evaluates a model with an
// embedding over a sparse feature (bags of 0 to 4 weighted ids) on 1 to 3
// towers: the predictions are the weighted sums of the table's rows worked
// out here, and the loss their mean squared error.
func TestPredictEvaluateEmbedding(t *testing.T) {
	// The table and v as embedtest.Model initializes them.
	table := func(id int64, d int) float64 { return float64((int(id)*embedtest.Dim+d)%7)/7 - 0.4 }
	v := []float64{0.5, -0.25}
	var want []float64
	var loss float64
	for _, r := range embedtest.Rows {
		p := r.X
		for j, id := range r.IDs {
			for d := range embedtest.Dim {
				p += r.Weights[j] * table(id, d) * v[d]
			}
		}
		want = append(want, p)
		loss += (p - (1 - r.X)) * (p - (1 - r.X)) / float64(len(embedtest.Rows))
	}
	for _, n := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("%d towers", n), func(t *testing.T) {
			est := newEstimator(t, replicated(embedtest.Model, n))
			var got []float64
			for p, err := range est.Predict(context.Background(), embedtest.Input(embedtest.Rows, false, 1)) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, p["p"].Data().([]float64)...)
			}
			if diff := cmp.Diff(want, got, relApprox); diff != "" {
				t.Errorf("predictions (-want +got):\n%s", diff)
			}
			scores, err := est.Evaluate(context.Background(), embedtest.Input(embedtest.Rows, true, 1))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]float64{"loss": loss, "global_step": 0}, scores, relApprox); diff != "" {
				t.Errorf("evaluation (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExportSparseServingInputErrors exports with sparse serving inputs
// Export refuses: each error names the input.
func TestExportSparseServingInputErrors(t *testing.T) {
	tests := []struct {
		name string
		spec estimator.FeatureSpec
		want []string
	}{
		{"no dimension", estimator.FeatureSpec{Dtype: tensor.Int64, Sparse: true}, []string{`sparse serving input "cat" has shape []`, "want one dimension"}},
		{"two dimensions", estimator.FeatureSpec{Dtype: tensor.Int64, Shape: []int{2, 2}, Sparse: true}, []string{`sparse serving input "cat" has shape [2 2]`}},
		{"zero values", estimator.FeatureSpec{Dtype: tensor.Int64, Shape: []int{0}, Sparse: true}, []string{`serving input "cat" has shape [0]`, "positive"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est := newEstimator(t, replicated(embedtest.Model, 1))
			in := estimator.ServingInput{"cat": tc.spec, "w": embedtest.Serving["w"], "x": embedtest.Serving["x"]}
			_, err := est.Export(context.Background(), t.TempDir(), in, estimator.AllowUntrained())
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}
