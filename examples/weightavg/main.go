// Command weightavg is Ray's ResNet example in Go: workers, each an
// Estimator with its own towers and optimizer, train -compute_steps local
// steps per round on their own parts of the data, then their weights are
// averaged (one all-reduce of the flat weight vector, divided by the
// number of workers) and every worker goes on from the average. Worker 0
// is also the driver: after each round it evaluates the averaged model on
// the test set and prints one line
//
//	round=<r> step=<each worker's steps> loss=<the workers' mean training loss in the round> accuracy=<test accuracy> test_loss=<test loss> seconds=<since the start>
//
// and at the end a summary: workers, steps per second and time per step
// (each worker's steps, training and averaging; evaluations not counted),
// and the final test accuracy and loss. With -model_dir it writes a checkpoint of
// the averaged model there (a new directory: the example does not
// resume).
//
// In one process the workers are goroutines (Ray's actors on one
// machine); started by mpirun (built with -tags mpi) every process runs
// one worker, with the same code and output:
//
//	go run ./examples/weightavg -workers 2                  # MLP on MNIST-sized data
//	go run ./examples/weightavg -model resnet20 -steps 20   # ResNet-20 on CIFAR-10-sized data
//	go build -tags mpi -o /tmp/weightavg ./examples/weightavg && mpirun -np 2 /tmp/weightavg
//
// -data names a directory of MNIST's files (-model mlp) or CIFAR-10's
// binary files (-model resnet20). Without it the command writes a small
// synthetic data set in the same files into a temporary directory, says
// so, and trains on that through the same reader.
//
// -compute_steps K is the number of local steps between averages; the
// same -steps with K = 1, 10, 100 compares time per step and accuracy:
//
//	for k in 1 10 100; do go run ./examples/weightavg -steps 1000 -compute_steps $k -eval_every 100; done
//
// -mode gradients runs the Ray best-practices page's program instead:
// every iteration each worker computes the gradients of its part of a
// batch of 100 rows of y = 0.1·x + 0.3 (examples/linear's model) without
// applying them, the gradients are averaged over the workers, the driver
// applies the mean once (SGD 0.5) and its weights go out to every worker;
// 201 iterations (-steps), the weights printed every 20 (-eval_every):
//
//	go run ./examples/weightavg -mode gradients -workers 4
//	mpirun -np 4 /tmp/weightavg -mode gradients
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/examples/cifar10/cifar"
	"github.com/towerflow/towerflow/examples/mnist/mnist"
	"github.com/towerflow/towerflow/examples/weightavg/weightavg"
	"github.com/towerflow/towerflow/runner"
)

// options are the command's flags.
type options struct {
	runner.Flags
	mode         string
	data         string
	net          string
	workers      int
	computeSteps int64
	steps        int64
	batch        int
	optimizer    string
	lr           float64
	evalEvery    int64
	seed         uint64
	// synthetic is the number of training and test examples of the
	// synthetic data set; 0 means the model's default.
	synthetic [2]int
}

// perModel are a model's defaults for the flags whose 0 means "the
// model's": a short run.
type perModel struct {
	steps     int64
	batch     int
	synthetic [2]int
}

var models = map[string]perModel{
	"mlp":      {steps: 500, batch: 50, synthetic: [2]int{5000, 1000}},
	"resnet20": {steps: 20, batch: 32, synthetic: [2]int{1000, 200}},
}

// defaults are the flags' defaults.
var defaults = options{Flags: runner.Flags{Towers: 1}, mode: "weights", net: "mlp", computeSteps: 10, optimizer: "momentum", seed: 1}

// parse parses the command's arguments into options; errors are for
// standard error, with exit status 2.
func parse(args []string, errOut io.Writer) (options, error) {
	o := defaults
	fs := flag.NewFlagSet("weightavg", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&o.mode, "mode", o.mode, "weights: workers train locally and average their weights every -compute_steps; gradients: Ray's gradient-averaging program (linear model, -steps iterations, -batch rows over all workers, SGD -lr, printing every -eval_every)")
	fs.StringVar(&o.ModelDir, "model_dir", "", "new directory for a checkpoint of the averaged model; empty keeps the run in memory")
	fs.IntVar(&o.Towers, "towers", o.Towers, "towers per worker: 0 for one per local device (one per core)")
	fs.StringVar(&o.data, "data", "", "directory of MNIST's files (mlp) or CIFAR-10's binary files (resnet20); empty trains on a synthetic data set")
	fs.StringVar(&o.net, "model", o.net, "the model: mlp (MNIST-sized data) or resnet20 (CIFAR-10-sized data)")
	fs.IntVar(&o.workers, "workers", 0, "workers, as goroutines of this process; 0 means 2, or 1 per process under mpirun")
	fs.Int64Var(&o.computeSteps, "compute_steps", o.computeSteps, "local steps of each worker between two averages")
	fs.Int64Var(&o.steps, "steps", 0, "steps of each worker, a multiple of -compute_steps; 0 means 500 for mlp, 20 for resnet20")
	fs.IntVar(&o.batch, "batch", 0, "batch of each worker; 0 means 50 for mlp, 32 for resnet20")
	fs.StringVar(&o.optimizer, "optimizer", o.optimizer, "sgd, momentum (0.9) or adam: each worker's own")
	fs.Float64Var(&o.lr, "lr", 0, "learning rate; 0 means 0.05 for mlp, 0.1 for resnet20, 0.001 with adam")
	fs.Int64Var(&o.evalEvery, "eval_every", 0, "evaluate and print after the rounds that reach a multiple of this many steps, and after the last; 0 after every round")
	fs.Uint64Var(&o.seed, "seed", o.seed, "seed of the initial variables, the shuffling and the synthetic data")
	fs.IntVar(&o.synthetic[0], "synthetic_train", 0, "training examples of the synthetic data set; 0 means 5000 for mlp, 1000 for resnet20")
	fs.IntVar(&o.synthetic[1], "synthetic_test", 0, "test examples of the synthetic data set; 0 means 1000 for mlp, 200 for resnet20")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, o.fill()
}

// fill puts the model's defaults into the flags left 0 and checks them
// together.
func (o *options) fill() error {
	switch o.mode {
	case "gradients":
		return o.fillGradients()
	case "weights":
	default:
		return fmt.Errorf("-mode %q: want weights or gradients", o.mode)
	}
	d, ok := models[o.net]
	if !ok {
		return fmt.Errorf("-model %q: want mlp or resnet20", o.net)
	}
	if o.steps == 0 {
		o.steps = d.steps
	}
	if o.batch == 0 {
		o.batch = d.batch
	}
	for i, n := range o.synthetic {
		if n == 0 {
			o.synthetic[i] = d.synthetic[i]
		}
	}
	var c runner.Check
	c.Add(o.Check())
	c.Int("workers", int64(o.workers), 0, maxWorkers)
	c.Int("compute_steps", o.computeSteps, 1, runner.NoLimit)
	c.Int("steps", o.steps, 1, runner.NoLimit)
	c.Int("batch", int64(o.batch), 1, runner.NoLimit)
	c.Int("eval_every", o.evalEvery, 0, runner.NoLimit)
	c.Float("lr", o.lr, 0, math.Inf(1))
	c.OneOf("optimizer", o.optimizer, "sgd", "momentum", "adam")
	if o.data == "" {
		c.Int("synthetic_train", int64(o.synthetic[0]), 1, runner.NoLimit)
		c.Int("synthetic_test", int64(o.synthetic[1]), 1, runner.NoLimit)
		// Each image's bytes, and its float32 pixels.
		pixels := 28 * 28
		if o.net == "resnet20" {
			pixels = cifar.Channels * cifar.Side * cifar.Side
		}
		examples := float64(o.synthetic[0]) + float64(o.synthetic[1])
		c.Memory(fmt.Sprintf("-synthetic_train %d -synthetic_test %d", o.synthetic[0], o.synthetic[1]), "the data", examples*float64(pixels)*(1+4))
	}
	if o.computeSteps >= 1 && o.steps%o.computeSteps != 0 {
		c.Add(fmt.Errorf("-steps %d is not a multiple of -compute_steps %d: every round takes -compute_steps steps", o.steps, o.computeSteps))
	}
	return c.Err()
}

// maxWorkers is the most workers -workers may ask for.
const maxWorkers = 1024

func main() {
	o, err := parse(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "weightavg:", err)
		os.Exit(2)
	}
	comms, err := group(o.workers)
	if err != nil {
		fmt.Fprintln(os.Stderr, "weightavg:", err)
		os.Exit(2)
	}
	defer closeAll(comms)
	runner.Main("weightavg", o.Flags, func(ctx context.Context) error {
		if o.mode == "gradients" {
			_, err := trainGradients(ctx, o, comms, os.Stdout)
			return err
		}
		_, err := train(ctx, o, comms, os.Stdout)
		return err
	}, runner.Serving{})
}

// group returns the workers this process runs: one, over MPI's group,
// when mpirun started several processes (then -workers must be 1 or
// unset), else workers (0: 2) ranks of a Local group.
func group(workers int) ([]collective.Comm, error) {
	if n := collective.LaunchedSize(); n > 1 {
		if workers > 1 {
			return nil, fmt.Errorf("-workers %d, but mpirun started %d processes, each one worker: leave -workers unset (or 1) under mpirun", workers, n)
		}
		c, err := collective.Join()
		if err != nil {
			return nil, err
		}
		return []collective.Comm{c}, nil
	}
	if workers == 0 {
		workers = 2
	}
	return collective.Local(workers), nil
}

func closeAll(comms []collective.Comm) {
	for _, c := range comms {
		c.Close()
	}
}

// train runs the example on the workers of comms, printing on out (when
// this process runs the driver), and returns the driver's report (nil in
// the other processes).
func train(ctx context.Context, o options, comms []collective.Comm, out io.Writer) (*weightavg.Report, error) {
	driver := false
	for _, c := range comms {
		driver = driver || c.Rank() == 0
	}
	if !driver {
		out = io.Discard // the driver reports for every process
	}
	task, err := newTask(o, out)
	if err != nil {
		return nil, err
	}
	workers := comms[0].Size()
	where := "goroutines of one process"
	if len(comms) < workers {
		where = "processes"
	}
	rounds := int(o.steps / o.computeSteps)
	fmt.Fprintf(out, "weight averaging: %s on %d workers (%s), %d rounds × %d local steps (batch %d per worker), each round then an average\n", task.Name, workers, where, rounds, o.computeSteps, o.batch)
	rep, err := weightavg.Run(ctx, task, weightavg.Config{
		ComputeSteps: o.computeSteps, Rounds: rounds, EvalEvery: o.evalEvery, Seed: o.seed, ModelDir: o.ModelDir, Out: out,
	}, comms)
	if err != nil || rep == nil {
		return rep, err
	}
	if rep.Checkpoint != "" {
		fmt.Fprintf(out, "saved the averaged model in %s\n", rep.Checkpoint)
	}
	_, err = fmt.Fprintln(out, rep.Summary())
	return rep, err
}

// newTask loads o's data (or writes and reads a synthetic set, saying so
// on out) and returns o's task on it.
func newTask(o options, out io.Writer) (weightavg.Task, error) {
	cfg := weightavg.TaskConfig{Batch: o.batch, Towers: o.Towers, Optimizer: o.optimizer, LR: o.lr}
	dir := o.data
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "weightavg-synthetic-"); err != nil {
			return weightavg.Task{}, err
		}
		defer os.RemoveAll(dir)
	}
	if o.net == "resnet20" {
		if o.data == "" {
			if err := cifar.WriteSynthetic(dir, o.synthetic[0], o.synthetic[1], o.seed); err != nil {
				return weightavg.Task{}, err
			}
			fmt.Fprintf(out, "no -data: training on a synthetic data set in CIFAR-10's binary files (%d training and %d test images of coloured patterns) in %s, removed once read\n", o.synthetic[0], o.synthetic[1], dir)
		}
		train, test, err := cifar.Load(dir)
		if err != nil {
			return weightavg.Task{}, err
		}
		return weightavg.CIFAR(cifar.ResNet{Depth: 20}, train, test, cfg)
	}
	if o.data == "" {
		if err := mnist.WriteSynthetic(dir, o.synthetic[0], o.synthetic[1], o.seed, true); err != nil {
			return weightavg.Task{}, err
		}
		fmt.Fprintf(out, "no -data: training on a synthetic data set in MNIST's files (%d training and %d test images of seven-segment digits) in %s, removed once read\n", o.synthetic[0], o.synthetic[1], dir)
	}
	train, test, err := mnist.Load(dir)
	if err != nil {
		return weightavg.Task{}, err
	}
	return weightavg.MNIST(mnist.MLP{}, train, test, cfg)
}
