package weightavg

import (
	"cmp"
	"fmt"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/cifar10/cifar"
	"github.com/towerflow/towerflow/examples/mnist/mnist"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/runner"
)

// Task is what the workers train and the driver evaluates.
type Task struct {
	// Name names the model, e.g. "mlp".
	Name string
	// NewModel returns a worker's model: the model function replicated on
	// the worker's towers, with its optimizer. Every worker calls it once.
	NewModel func() (*replicate.Model, error)
	// Input returns worker's training input for a round of workers
	// workers: its part of every batch of a shuffle of the training set
	// seeded with seed. Every worker of a round gets the same seed, so
	// their parts are disjoint. It must yield at least Config.ComputeSteps
	// batches.
	Input func(seed uint64, worker, workers int) (estimator.InputFn, error)
	// Test is the test set, which the driver evaluates the averaged model
	// on; its eval metrics must include "accuracy".
	Test estimator.InputFn
}

// TaskConfig configures the tasks MNIST and CIFAR make.
type TaskConfig struct {
	// Batch is each worker's rows per step; workers together take
	// Batch × workers rows per step.
	Batch int
	// Towers is each worker's number of towers; 0 means one per local
	// device (one per core), as runner.Devices.
	Towers int
	// Optimizer is "sgd", "momentum" (0.9; the default) or "adam".
	Optimizer string
	// LR is the learning rate; 0 means the task's default (0.05 for
	// MNIST, 0.1 for CIFAR-10; 0.001 with adam).
	LR float64
}

// newOptimizer returns the optimizer cfg names, lr its rate unless cfg has
// one.
func (cfg TaskConfig) newOptimizer(lr float64) (optimizers.Optimizer, error) {
	switch cfg.Optimizer {
	case "sgd":
		return optimizers.SGD(cmp.Or(cfg.LR, lr)), nil
	case "momentum", "":
		return optimizers.Momentum(cmp.Or(cfg.LR, lr), 0.9), nil
	case "adam":
		return optimizers.Adam(cmp.Or(cfg.LR, 0.001)), nil
	}
	return nil, fmt.Errorf("optimizer %q: want sgd, momentum or adam", cfg.Optimizer)
}

// check checks cfg and returns its devices and optimizer.
func (cfg TaskConfig) check(lr float64) (*replicate.Config, error) {
	if cfg.Batch < 1 {
		return nil, fmt.Errorf("batch %d per worker, want at least 1", cfg.Batch)
	}
	devices, err := runner.Devices(cfg.Towers)
	if err != nil {
		return nil, err
	}
	opt, err := cfg.newOptimizer(lr)
	if err != nil {
		return nil, err
	}
	return &replicate.Config{Devices: devices, Optimizer: opt}, nil
}

// evalBatch is the batch the driver evaluates with.
const evalBatch = 500

// netName is the name of an MNIST net.
func netName(net mnist.Net) string {
	if _, ok := net.(mnist.CNN); ok {
		return "cnn"
	}
	return "mlp"
}

// MNIST returns the task of training net on MNIST-sized data: train's
// images, shuffled every round, test's to evaluate.
func MNIST(net mnist.Net, train, test *mnist.Set, cfg TaskConfig) (Task, error) {
	rcfg, err := cfg.check(0.05)
	if err != nil {
		return Task{}, fmt.Errorf("MNIST task: %w", err)
	}
	x, y := train.Features(net.Layout()), train.LabelTensors()
	testIn, err := estimator.FromTensors(test.Features(net.Layout()), test.LabelTensors(), estimator.TensorInput{BatchSize: evalBatch})
	if err != nil {
		return Task{}, fmt.Errorf("MNIST task: test set: %w", err)
	}
	return Task{
		Name:     netName(net),
		NewModel: func() (*replicate.Model, error) { return replicate.ModelFn(net.Model, *rcfg), nil },
		Input: func(seed uint64, worker, workers int) (estimator.InputFn, error) {
			return estimator.FromTensors(x, y, estimator.TensorInput{
				BatchSize: cfg.Batch * workers, DropRemainder: true, Epochs: estimator.Forever,
				Shuffle: true, Seed: seed, Processes: workers, Rank: worker,
			})
		},
		Test: testIn,
	}, nil
}

// CIFAR returns the task of training net on CIFAR-10-sized data: train's
// images, shuffled, cropped and flipped anew every round, test's to
// evaluate. The optimizer's rate stays constant (no boundaries).
func CIFAR(net cifar.ResNet, train, test *cifar.Set, cfg TaskConfig) (Task, error) {
	if _, err := net.Blocks(); err != nil {
		return Task{}, fmt.Errorf("CIFAR-10 task: %w", err)
	}
	rcfg, err := cfg.check(0.1)
	if err != nil {
		return Task{}, fmt.Errorf("CIFAR-10 task: %w", err)
	}
	testIn, err := cifar.EvalInput(test, 100, 1, 0)
	if err != nil {
		return Task{}, fmt.Errorf("CIFAR-10 task: test set: %w", err)
	}
	return Task{
		Name:     fmt.Sprintf("resnet%d", cmp.Or(net.Depth, 20)),
		NewModel: func() (*replicate.Model, error) { return replicate.ModelFn(net.Model, *rcfg), nil },
		Input: func(seed uint64, worker, workers int) (estimator.InputFn, error) {
			return cifar.TrainInput(train, cifar.InputConfig{
				BatchSize: cfg.Batch * workers, DropRemainder: true, Epochs: estimator.Forever,
				Shuffle: true, Augment: true, Seed: seed, Workers: 1, Processes: workers, Rank: worker,
			})
		},
		Test: testIn,
	}, nil
}
