package estimator_test

import (
	"context"
	"fmt"
	"log"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// linearModel learns y = w*x + b with a mean squared error loss. Its train
// op names its optimizer, so it needs no replicate.Config.Optimizer.
func linearModel(t *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, _ model.Params) (*model.Spec, error) {
	w := t.MustVariable("w", tensor.Float64, nil, towers.RandomUniform(-1, 1))
	b := t.MustVariable("b", tensor.Float64, nil, towers.Zeros())
	pred := G.Must(G.Add(G.Must(G.Mul(features["x"], w)), b))
	spec := &model.Spec{Predictions: map[string]*G.Node{"y": pred}}
	if mode == model.Predict {
		return spec, nil
	}
	diff := G.Must(G.Sub(pred, labels["y"]))
	spec.Loss = G.Must(G.Mean(G.Must(G.Square(diff))))
	spec.EvalMetrics = map[string]metrics.Bound{"mae": metrics.Mean(G.Must(G.Abs(diff)))}
	spec.TrainOps = []model.TrainOp{{Optimizer: optimizers.SGD(0.5)}}
	return spec, nil
}

func Example() {
	// 200 points on y = 0.1x + 0.3.
	xs, ys := make([]float64, 200), make([]float64, 200)
	for i := range xs {
		xs[i] = float64(i) / 200
		ys[i] = 0.1*xs[i] + 0.3
	}
	features := map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(200, 1), tensor.WithBacking(xs))}
	labels := map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(200, 1), tensor.WithBacking(ys))}

	est, err := estimator.New(replicate.ModelFn(linearModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{Seed: 1, LogEvery: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer est.Close()
	ctx := context.Background()

	train, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 50, Epochs: estimator.Forever, Shuffle: true, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	if err := est.Train(ctx, train, estimator.MaxSteps(300)); err != nil {
		log.Fatal(err)
	}

	eval, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 50})
	if err != nil {
		log.Fatal(err)
	}
	scores, err := est.Evaluate(ctx, eval)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("global_step=%.0f loss=%.4f mae=%.4f\n", scores["global_step"], scores["loss"], scores["mae"])

	w, _ := est.VariableValue("w")
	b, _ := est.VariableValue("b")
	fmt.Printf("w=%.2f b=%.2f\n", w.Data(), b.Data())

	// One Prediction per example, in input order; "y" has shape [n, 1], so
	// each example's row has shape [1].
	queries := map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(3, 1), tensor.WithBacking([]float64{0, 1, 2}))}
	predict, err := estimator.FromTensors(queries, nil, estimator.TensorInput{BatchSize: 2})
	if err != nil {
		log.Fatal(err)
	}
	for p, err := range est.Predict(ctx, predict) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("y%v = %.2f\n", p["y"].Shape(), p["y"].Data())
	}
	// Output:
	// global_step=300 loss=0.0000 mae=0.0000
	// w=0.10 b=0.30
	// y(1) = [0.30]
	// y(1) = [0.40]
	// y(1) = [0.50]
}

func ExampleFromTensors() {
	features := map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(5, 2), tensor.WithBacking([]int64{0, 0, 1, 10, 2, 20, 3, 30, 4, 40}))}
	labels := map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(5), tensor.WithBacking([]float64{0, 0.1, 0.2, 0.3, 0.4}))}
	// Two epochs of batches of two rows: the last batch of each epoch has one.
	input, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 2, Epochs: 2})
	if err != nil {
		log.Fatal(err)
	}
	for batch, err := range input(context.Background()) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(batch.Features["x"].Shape(), batch.Features["x"].Data(), batch.Labels["y"].Data())
	}
	// Output:
	// (2, 2) [0 0 1 10] [0 0.1]
	// (2, 2) [2 20 3 30] [0.2 0.3]
	// (1, 2) [4 40] [0.4]
	// (2, 2) [0 0 1 10] [0 0.1]
	// (2, 2) [2 20 3 30] [0.2 0.3]
	// (1, 2) [4 40] [0.4]
}
