package estimator

import (
	"context"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/towers"
)

// TestBuildsAreBounded: predicting with many batch sizes keeps at most
// maxBuilds sets of towers, and evicted sizes build again when they return.
func TestBuildsAreBounded(t *testing.T) {
	model := func(tw *towers.Tower, _ Mode, f, _ map[string]*G.Node, _ Params) (*Spec, error) {
		c := tw.MustVariable("c", tensor.Float64, nil, towers.Constant(2))
		return &Spec{Predictions: map[string]*G.Node{"y": G.Must(G.Mul(f["x"], c))}}, nil
	}
	est, err := New(ModelFn(model), RunConfig{LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, rows := range append([]int{1}, seq(2, maxBuilds+10)...) {
		b := Batch{Features: map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{rows, 1}, make([]float64, rows))}}
		if _, _, err := est.eng.predictStep(context.Background(), b); err != nil {
			t.Fatalf("%d rows: %v", rows, err)
		}
		if n := len(est.eng.builds); n > maxBuilds {
			t.Fatalf("%d builds kept, at most %d allowed", n, maxBuilds)
		}
	}
	if _, ok := est.eng.builds[signature(Predict, []Batch{{Features: map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{1, 1}, []float64{0})}}})]; ok {
		t.Errorf("the least recently used build (1 row) was not evicted")
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}
