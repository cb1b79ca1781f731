// Command linear trains the linear-regression example with one tower per
// local device and prints the learned variables:
//
//	go run ./examples/linear
//
// It logs progress while training and ends with one line "w=<value>
// b=<value>"; the data follows y = 0.1x + 0.3. With -model_dir the run
// keeps checkpoints there, and a second run with the same directory
// continues from the saved step. With -serve it then exports the model
// and serves it with TensorFlow Serving's REST API until interrupted:
//
//	go run ./examples/linear -model_dir runs/linear -serve localhost:8501
//	curl -d '{"instances": [[0.5], [1.0]]}' localhost:8501/v1/models/linear:predict
package main

import (
	"context"
	"flag"
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/runner"
)

// options are the command's flags.
type options struct {
	runner.Flags
	steps    int64
	batch    int
	lr       float64
	examples int
}

func main() {
	var o options
	o.Register(flag.CommandLine)
	flag.Int64Var(&o.steps, "steps", 400, "training steps to run (more, when -model_dir holds a checkpoint)")
	flag.IntVar(&o.batch, "batch", 100, "batch size")
	flag.Float64Var(&o.lr, "lr", 0.5, "SGD learning rate")
	flag.IntVar(&o.examples, "examples", 1000, "training examples")
	flag.Parse()
	runner.Usage("linear", o.check())
	runner.Main("linear", o.Flags, func(ctx context.Context) error { return train(ctx, o) }, runner.Serving{
		Name:   "linear",
		Model:  func() (*replicate.Model, error) { return newModel(o) },
		Inputs: estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1}}},
		Try:    `curl -d '{"instances": [[0.5], [1.0]]}' %s/v1/models/linear:predict`,
		Logger: runner.Logger(),
	})
}

// check checks the flags: the ranges they may take, and that the data
// they ask for fits in memory.
func (o options) check() error {
	var c runner.Check
	c.Add(o.Flags.Check())
	c.Int("steps", o.steps, 0, runner.NoLimit)
	c.Int("batch", int64(o.batch), 1, runner.NoLimit)
	c.Float("lr", o.lr, 0, math.Inf(1))
	c.Int("examples", int64(o.examples), 1, runner.NoLimit)
	// x and y, float64 each.
	c.Memory(fmt.Sprintf("-examples %d", o.examples), "the data", float64(o.examples)*2*8)
	return c.Err()
}

// newModel returns the model on o's towers.
func newModel(o options) (*replicate.Model, error) {
	devices, err := runner.Devices(o.Towers)
	if err != nil {
		return nil, err
	}
	// The zero Config's loss reduction: each tower weighted by its share
	// of the batch, so the run trains the same on any machine.
	return replicate.ModelFn(linreg.Model, replicate.Config{Devices: devices, Optimizer: optimizers.SGD(o.lr)}), nil
}

func train(ctx context.Context, o options) error {
	log := runner.Logger()
	m, err := newModel(o)
	if err != nil {
		return err
	}
	est, err := estimator.New(m, runner.Config(o.ModelDir, 1, 50, log))
	if err != nil {
		return err
	}
	defer est.Close()
	features, labels := linreg.Data(o.examples, 1)
	input, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: o.batch, Epochs: estimator.Forever, Shuffle: true, Seed: 1})
	if err != nil {
		return err
	}
	devices, _ := runner.Devices(o.Towers) // newModel checked them
	log.Info("training", "towers", len(devices), "devices", fmt.Sprint(devices), "steps", o.steps, "batch", o.batch)
	if o.steps > 0 {
		if err := est.Train(ctx, input, estimator.Steps(o.steps)); err != nil {
			return err
		}
	}
	eval, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: o.batch})
	if err != nil {
		return err
	}
	// The Estimator logs the evaluation's results.
	if _, err := est.Evaluate(ctx, eval); err != nil {
		return err
	}
	w, err := est.VariableValue("w")
	if err != nil {
		return err
	}
	b, err := est.VariableValue("b")
	if err != nil {
		return err
	}
	fmt.Printf("w=%.4f b=%.4f\n", w.Data(), b.Data())
	return nil
}
