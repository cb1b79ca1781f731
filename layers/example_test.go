package layers_test

import (
	"context"
	"fmt"
	"log"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// mlp is a model function written with layers: 1 → 16 ReLU → 1, mean
// squared error.
func mlp(t *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, _ model.Params) (*model.Spec, error) {
	h, err := layers.Dense(features["x"],
		t.MustVariable("hidden/kernel", tensor.Float64, tensor.Shape{1, 16}, towers.GlorotUniform()),
		t.MustVariable("hidden/bias", tensor.Float64, tensor.Shape{16}, towers.Constant(0.1)),
		layers.ReLU)
	if err != nil {
		return nil, err
	}
	y, err := layers.Dense(h,
		t.MustVariable("out/kernel", tensor.Float64, tensor.Shape{16, 1}, towers.GlorotUniform()),
		t.MustVariable("out/bias", tensor.Float64, tensor.Shape{1}, towers.Zeros()),
		layers.Linear)
	if err != nil {
		return nil, err
	}
	spec := &model.Spec{Predictions: map[string]*G.Node{"y": y}}
	if mode != model.Predict {
		if spec.Loss, err = layers.MeanSquaredError(y, labels["y"]); err != nil {
			return nil, err
		}
	}
	return spec, nil
}

// Example trains a small network written with layers on two CPU towers to
// fit |x| on [-1, 1].
func Example() {
	const n = 256
	r := rand.New(rand.NewPCG(1, 2))
	xs, ys := make([]float64, n), make([]float64, n)
	for i := range xs {
		xs[i] = 2*r.Float64() - 1
		ys[i] = math.Abs(xs[i])
	}
	features := map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(n, 1), tensor.WithBacking(xs))}
	labels := map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(n, 1), tensor.WithBacking(ys))}

	est, err := estimator.New(
		replicate.ModelFn(mlp,
			replicate.Config{Devices: []towers.Device{towers.CPU(0), towers.CPU(1)}, Optimizer: optimizers.Adam(0.02), Reduction: replicate.BatchMean}),
		estimator.RunConfig{Seed: 3, LogEvery: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer est.Close()
	ctx := context.Background()
	eval, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: n})
	if err != nil {
		log.Fatal(err)
	}
	before, err := est.Evaluate(ctx, eval)
	if err != nil {
		log.Fatal(err)
	}
	train, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 64, Epochs: estimator.Forever, Shuffle: true, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	if err := est.Train(ctx, train, estimator.MaxSteps(500)); err != nil {
		log.Fatal(err)
	}
	after, err := est.Evaluate(ctx, eval)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("loss below 0.01: before %t, after %t\n", before["loss"] < 0.01, after["loss"] < 0.01)
	// Output:
	// loss below 0.01: before false, after true
}
