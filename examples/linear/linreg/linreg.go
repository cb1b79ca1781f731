// Package linreg is the linear-regression example's model and data: y =
// 0.1x + 0.3 learned by a model with two variables, w and b. The example's
// main package trains it with replicated towers; tests import the same model.
package linreg

import (
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/towers"
)

// The true line the data follows.
const (
	TrueW = 0.1
	TrueB = 0.3
)

// Data returns n examples with x uniform in [0,1) and y = TrueW*x + TrueB,
// as features {"x": [n,1]} and labels {"y": [n,1]}, from a seeded generator.
func Data(n int, seed uint64) (features, labels map[string]*tensor.Dense) {
	r := rand.New(rand.NewPCG(seed, 1))
	xs, ys := make([]float64, n), make([]float64, n)
	for i := range xs {
		xs[i] = r.Float64()
		ys[i] = TrueW*xs[i] + TrueB
	}
	return map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(n, 1), tensor.WithBacking(xs))},
		map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(n, 1), tensor.WithBacking(ys))}
}

// Model is the linear model pred = x*w + b with a mean squared error loss.
// It is an ordinary single-device model function: it runs unchanged on one
// device or wrapped by replicate.ModelFn.
func Model(t *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, _ model.Params) (*model.Spec, error) {
	x, err := features.Lookup("x")
	if err != nil {
		return nil, err
	}
	w, err := t.Variable("w", tensor.Float64, nil, towers.RandomUniform(-1, 1))
	if err != nil {
		return nil, err
	}
	b, err := t.Variable("b", tensor.Float64, nil, towers.Zeros())
	if err != nil {
		return nil, err
	}
	pred := G.Must(G.Add(G.Must(G.Mul(x, w)), b))
	spec := &model.Spec{
		Predictions:   map[string]*G.Node{"y": pred},
		ExportOutputs: map[string]model.ExportOutput{model.DefaultServingSignature: model.RegressionOutput{Value: pred}},
	}
	if mode == model.Predict {
		return spec, nil
	}
	y, err := labels.Lookup("y")
	if err != nil {
		return nil, err
	}
	diff := G.Must(G.Sub(pred, y))
	spec.Loss = G.Must(G.Mean(G.Must(G.Square(diff))))
	spec.EvalMetrics = map[string]metrics.Bound{
		"mean_abs_error": metrics.Mean(G.Must(G.Abs(diff))),
	}
	return spec, nil
}
