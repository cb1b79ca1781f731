package export_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

func ExampleLoad() {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "towerflow-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)

	// Train the linear model on two towers and export it.
	m := replicate.ModelFn(linreg.Model,
		replicate.Config{Devices: []towers.Device{towers.CPU(0), towers.CPU(1)}, Optimizer: optimizers.SGD(0.5)})
	est, err := estimator.New(m, estimator.RunConfig{
		ModelDir: filepath.Join(tmp, "model"), Seed: 1, LogEvery: -1, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer est.Close()
	features, labels := linreg.Data(1000, 1)
	train, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 100, Epochs: estimator.Forever, Shuffle: true, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	if err := est.Train(ctx, train, estimator.MaxSteps(400)); err != nil {
		log.Fatal(err)
	}
	if _, err := est.Export(ctx, filepath.Join(tmp, "serving"), estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1}}}); err != nil {
		log.Fatal(err)
	}

	// Elsewhere: load the newest version with the same Go model, on one
	// device, and compute its default signature.
	p, err := export.LoadLatest(filepath.Join(tmp, "serving"), replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	sig := p.Signatures()[model.DefaultServingSignature]
	fmt.Printf("version %d, global step %d, method %s\n", p.Version(), p.Step(), sig.Method)
	fmt.Printf("inputs %v, outputs %v\n", sig.Inputs, sig.Outputs)

	x := tensor.New(tensor.WithShape(3, 1), tensor.WithBacking([]float64{0, 1, 2}))
	out, err := p.Run(ctx, model.DefaultServingSignature, map[string]*tensor.Dense{"x": x})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("outputs %v: %.3f\n", out["outputs"].Shape(), out["outputs"].Data())
	// Output:
	// version 1, global step 400, method regress
	// inputs map[x:{float64 [-1 1] false}], outputs map[outputs:{float64 [-1 1] false}]
	// outputs (3, 1): [0.300 0.400 0.500]
}
