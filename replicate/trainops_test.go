package replicate_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// TestTwoOptimizersOneLoss: two train ops minimise the same loss over
// disjoint variables, each with its own optimizer (a wide-and-deep model's
// linear and DNN parts, TensorFlow's DNNLinearCombined): each variable
// gets its gradient of the loss, on any number of towers.
func TestTwoOptimizersOneLoss(t *testing.T) {
	mdl := func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
		a := tw.MustVariable("a", tensor.Float64, nil, towers.Constant(1))
		b := tw.MustVariable("b", tensor.Float64, nil, towers.Constant(1))
		x := f["x"]
		// Both parts meet in one sum, as the two parts' logits do.
		total := G.Must(G.Add(G.Must(G.Sum(G.Must(G.Mul(x, a)))), G.Must(G.Sum(G.Must(G.Mul(x, G.Must(G.Mul(b, b))))))))
		return &model.Spec{Loss: total, TrainOps: []model.TrainOp{
			{Optimizer: optimizers.SGD(0.1), Vars: []string{"a"}},
			{Optimizer: optimizers.Adagrad(0.5, optimizers.InitialAccumulator(0)), Vars: []string{"b"}},
		}}, nil
	}
	run := func(devs int) map[string]float64 {
		est, err := estimator.New(replicate.ModelFn(mdl, replicate.Config{Devices: cpus(devs), Reduction: replicate.Sum}), estimator.RunConfig{LogEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer est.Close()
		in, _ := estimator.FromTensors(map[string]*tensor.Dense{"x": column(1, 2, 3, 4)}, nil, estimator.TensorInput{BatchSize: 4})
		if err := est.Train(context.Background(), in, estimator.Steps(1)); err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, n := range est.VariableNames() {
			if v, err := est.VariableValue(n); err == nil {
				if f, ok := v.Data().(float64); ok {
					out[n] = f
				}
			}
		}
		return out
	}
	// sum x = 10. a: SGD 0.1 on d/da = 10 -> 0. b: Adagrad 0.5 on d/db =
	// 2*b*10 = 20: accumulator 400, b = 1 - 0.5*20/(20+1e-7); slots of b
	// alone.
	want := map[string]float64{"a": 0, "b": 1 - 0.5*20/(20+1e-7), "b/Adagrad/accumulator": 400}
	for _, n := range []int{1, 2, 3} {
		if diff := cmp.Diff(want, run(n), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
			t.Errorf("%d towers (-want +got):\n%s", n, diff)
		}
	}
}
