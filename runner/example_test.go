package runner_test

import (
	"context"
	"flag"
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/runner"
	"github.com/towerflow/towerflow/towers"
)

// linear is a model function: pred = x*w + b, with a mean squared error
// loss.
func linear(t *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, _ model.Params) (*model.Spec, error) {
	x, err := features.Lookup("x")
	if err != nil {
		return nil, err
	}
	w, err := t.Variable("w", tensor.Float64, nil, towers.Zeros())
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
	spec.EvalMetrics = map[string]metrics.Bound{"mean_abs_error": metrics.Mean(G.Must(G.Abs(diff)))}
	return spec, nil
}

// lineData returns n points of y = 0.1x + 0.3, x evenly spread over [0,1).
func lineData(n int) (features, labels map[string]*tensor.Dense) {
	xs, ys := make([]float64, n), make([]float64, n)
	for i := range xs {
		xs[i] = float64(i) / float64(n)
		ys[i] = 0.1*xs[i] + 0.3
	}
	return map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(n, 1), tensor.WithBacking(xs))},
		map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(n, 1), tensor.WithBacking(ys))}
}

// A whole program: the standard flags and two of its own, checked; a
// model on the towers -towers asks for; training that Ctrl-C stops with a
// checkpoint saved in -model_dir; an evaluation; and, with -serve, the
// model exported and served. A program's main registers the flags on
// flag.CommandLine and calls flag.Parse; here they are parsed from a
// fixed command line.
func Example() {
	var f runner.Flags
	fs := flag.NewFlagSet("fit", flag.ExitOnError)
	f.Register(fs)
	steps := fs.Int64("steps", 300, "training steps")
	lr := fs.Float64("lr", 0.5, "SGD learning rate")
	fs.Parse([]string{"-towers", "1", "-steps", "200"})

	var c runner.Check
	c.Add(f.Check())
	c.Int("steps", *steps, 1, runner.NoLimit)
	c.Float("lr", *lr, 0, math.Inf(1))
	runner.Usage("fit", c.Err()) // exits with status 2, naming each bad flag

	newModel := func() (*replicate.Model, error) {
		devices, err := runner.Devices(f.Towers)
		if err != nil {
			return nil, err
		}
		return replicate.ModelFn(linear, replicate.Config{Devices: devices, Optimizer: optimizers.SGD(*lr)}), nil
	}
	train := func(ctx context.Context) error {
		m, err := newModel()
		if err != nil {
			return err
		}
		est, err := estimator.New(m, runner.Config(f.ModelDir, 1, 100, runner.Logger()))
		if err != nil {
			return err
		}
		defer est.Close()
		features, labels := lineData(1000)
		input, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 100, Epochs: estimator.Forever, Shuffle: true, Seed: 1})
		if err != nil {
			return err
		}
		if err := est.Train(ctx, input, estimator.Steps(*steps)); err != nil {
			return err
		}
		eval, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 100})
		if err != nil {
			return err
		}
		scores, err := est.Evaluate(ctx, eval)
		if err != nil {
			return err
		}
		fmt.Printf("mean absolute error below 0.01: %v\n", scores["mean_abs_error"] < 0.01)
		return nil
	}
	runner.Main("fit", f, train, runner.Serving{
		Name:   "fit",
		Model:  newModel,
		Inputs: estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1}}},
		Try:    `curl -d '{"instances": [[0.5]]}' %s/v1/models/fit:predict`,
		Logger: runner.Logger(),
	})
	// Output: mean absolute error below 0.01: true
}
