// Command cifar10 trains ResNet-N on CIFAR-10 with one tower per local
// device (batch normalization synchronized over the towers), evaluating on
// the test set as it goes (train and evaluate), and prints each
// evaluation:
//
//	go run ./examples/cifar10 -data ~/cifar-10-batches-bin
//	go run -tags openblas ./examples/cifar10 -data ~/cifar-10-batches-bin -depth 56 -steps 64000 -boundaries 32000,48000
//
// -data names a directory of CIFAR-10's binary files (data_batch_1.bin
// .. data_batch_5.bin, test_batch.bin). Without it the command writes a
// small synthetic data set in the same files into a temporary directory,
// says so, and trains on that through the same reader. Training batches
// are normalized per channel, cropped at random from the image padded by
// 4 pixels and flipped at random, by worker goroutines ahead of the
// towers; the same -seed gives the same batches on any number of towers.
//
// The optimizer is the paper's: SGD with momentum 0.9, the rate -lr
// divided by 10 at each of -boundaries, weight decay -weight_decay. Every
// -eval_every steps, and at the end, the test set is evaluated and one
// line "step=<s> accuracy=<top-1> top5=<top-5> loss=<loss>" printed; the
// evaluations are kept in the model directory's eval history
// (eval_history.jsonl) with -model_dir, which also keeps checkpoints, so a
// second run continues from the saved step. With -serve it then exports
// the model and serves it with TensorFlow Serving's REST API.
//
// Started by mpirun (built with -tags mpi), the processes train together,
// each its towers on its part of every batch (see the README); rank 0
// writes the model directory and prints the evaluations:
//
//	go build -tags mpi -o /tmp/cifar10 ./examples/cifar10 && mpirun -np 2 /tmp/cifar10
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/cifar10/cifar"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/runner"
	"github.com/towerflow/towerflow/towers"
)

// options are the command's flags.
type options struct {
	runner.Flags
	data        string
	depth       int
	steps       int64
	batch       int
	lr          float64
	boundaries  []int64
	weightDecay float64
	evalEvery   int64
	seed        uint64
	synthetic   [2]int
	logEvery    int
	// procs is the group of processes mpirun started this one in; nil
	// alone.
	procs collective.Comm
	// precision is -precision (replicate.Config.Precision).
	precision towers.Precision
	// format is -format: the network's order (cifar.ResNet.Format), or
	// auto for layers.PreferredFormat.
	format string
}

// defaults are the flags' defaults: a short run.
var defaults = options{depth: 20, steps: 300, batch: 128, lr: 0.1, boundaries: []int64{200, 250}, weightDecay: 1e-4, evalEvery: 100, seed: 1, synthetic: [2]int{2000, 500}, logEvery: 50, format: "auto"}

func main() {
	o := defaults
	o.Register(flag.CommandLine)
	bounds := joinInts(o.boundaries)
	flag.StringVar(&o.data, "data", "", "directory of CIFAR-10's binary files; empty trains on a synthetic data set")
	flag.IntVar(&o.depth, "depth", o.depth, "ResNet depth 6n + 2, 8 to 1202: 8, 14, 20 (ResNet-20), 32, 44, 56, 110")
	flag.Int64Var(&o.steps, "steps", o.steps, "training steps to run (more, when -model_dir holds a checkpoint)")
	flag.IntVar(&o.batch, "batch", o.batch, "batch size")
	flag.Float64Var(&o.lr, "lr", o.lr, "initial learning rate")
	flag.StringVar(&bounds, "boundaries", bounds, "comma-separated steps after which the rate is divided by 10")
	flag.Float64Var(&o.weightDecay, "weight_decay", o.weightDecay, "weight decay (L2 loss of the kernels), e.g. 1e-4, 2e-4, 5e-4")
	flag.Int64Var(&o.evalEvery, "eval_every", o.evalEvery, "evaluate on the test set every this many steps")
	flag.Uint64Var(&o.seed, "seed", o.seed, "seed of the initial variables, the shuffling, the augmentation and the synthetic data")
	flag.IntVar(&o.synthetic[0], "synthetic_train", o.synthetic[0], "training examples of the synthetic data set")
	flag.IntVar(&o.synthetic[1], "synthetic_test", o.synthetic[1], "test examples of the synthetic data set")
	flag.StringVar(&o.format, "format", o.format, "order the network computes in: nchw, nhwc, or auto (nhwc where oneDNN computes the convolutions, -tags dnnl; else nchw); the images, variables and checkpoints are the same in all")
	prec := flag.String("precision", "float32", "arithmetic of the convolutions and matrix products: float32 or bf16 (bfloat16 mixed precision; replicate.Config.Precision)")
	flag.Parse()
	p, perr := towers.ParsePrecision(*prec)
	if perr != nil {
		runner.Usage("cifar10", fmt.Errorf("-precision: %w", perr))
	}
	o.precision = p
	var err error
	if o.boundaries, err = parseInts(bounds); err != nil {
		runner.Usage("cifar10", fmt.Errorf("-boundaries: %w", err))
	}
	runner.Usage("cifar10", o.check())
	var leave func()
	o.procs, leave = runner.Processes("cifar10", o.Flags)
	defer leave()
	runner.Main("cifar10", o.Flags, func(ctx context.Context) error {
		_, err := train(ctx, o, os.Stdout)
		return err
	}, runner.Serving{
		Name:   "cifar10",
		Model:  func() (*replicate.Model, error) { return newModel(o) },
		Inputs: estimator.ServingInput{cifar.ImageKey: {Dtype: tensor.Float32, Shape: tensor.Shape{cifar.Channels, cifar.Side, cifar.Side}}},
		Try:    `curl -d '{"instances": [...]}' %s/v1/models/cifar10:classify`,
		Logger: runner.Logger(),
	})
}

// maxDepth is the deepest ResNet -depth may ask for: the paper's
// deepest, ResNet-1202.
const maxDepth = 1202

// check checks the flags: the ranges they may take, and that the
// synthetic data they ask for fits in memory.
func (o options) check() error {
	var c runner.Check
	c.Add(o.Flags.Check())
	c.Int("depth", int64(o.depth), 8, maxDepth)
	if o.depth >= 8 && o.depth <= maxDepth {
		if _, err := (cifar.ResNet{Depth: o.depth}).Blocks(); err != nil {
			c.Add(fmt.Errorf("-depth %d: %w", o.depth, err))
		}
	}
	if _, err := layers.ParseFormat(o.format); err != nil {
		c.Add(fmt.Errorf("-format: %w", err))
	}
	c.Int("steps", o.steps, 1, runner.NoLimit)
	c.Int("batch", int64(o.batch), 1, runner.NoLimit)
	c.Float("lr", o.lr, 0, math.Inf(1))
	c.Float("weight_decay", o.weightDecay, 0, math.Inf(1))
	c.Int("eval_every", o.evalEvery, 1, runner.NoLimit)
	if o.data == "" {
		c.Int("synthetic_train", int64(o.synthetic[0]), max(int64(o.batch), 1), runner.NoLimit) // every batch whole
		c.Int("synthetic_test", int64(o.synthetic[1]), 1, runner.NoLimit)
		// Each image's bytes, and its float32 pixels.
		examples := float64(o.synthetic[0]) + float64(o.synthetic[1])
		c.Memory(fmt.Sprintf("-synthetic_train %d -synthetic_test %d", o.synthetic[0], o.synthetic[1]), "the data", examples*cifar.Channels*cifar.Side*cifar.Side*(1+4))
	}
	return c.Err()
}

func joinInts(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, ",")
}

func parseInts(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive step", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// newModel returns ResNet-depth on o's towers with the paper's optimizer.
func newModel(o options) (*replicate.Model, error) {
	devices, err := runner.Devices(o.Towers)
	if err != nil {
		return nil, err
	}
	format, err := layers.ParseFormat(o.format)
	if err != nil {
		return nil, fmt.Errorf("-format: %w", err)
	}
	net := cifar.ResNet{Depth: o.depth, WeightDecay: o.weightDecay, Format: format}
	if o.weightDecay == 0 {
		net.WeightDecay = -1 // none
	}
	return replicate.ModelFn(net.Model, replicate.Config{Devices: devices, Optimizer: cifar.Optimizer(o.lr, o.boundaries...), Processes: o.procs, Precision: o.precision}), nil
}

// train trains and evaluates as the command's doc says, printing each
// evaluation on out, and returns the last one.
func train(ctx context.Context, o options, out io.Writer) (map[string]float64, error) {
	log := runner.Logger()
	m, err := newModel(o)
	if err != nil {
		return nil, err
	}
	procs, rank := 1, 0
	if o.procs != nil {
		procs, rank = o.procs.Size(), o.procs.Rank()
	}
	if rank != 0 {
		out = io.Discard // rank 0 reports for every process
	}
	dir := o.data
	if dir == "" {
		if dir, err = os.MkdirTemp("", "cifar10-synthetic-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if err := cifar.WriteSynthetic(dir, o.synthetic[0], o.synthetic[1], o.seed); err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "no -data: training on a synthetic data set in CIFAR-10's binary files (%d training and %d test images of coloured patterns) in %s, removed at the end\n", o.synthetic[0], o.synthetic[1], dir)
	}
	trainSet, testSet, err := cifar.Load(dir)
	if err != nil {
		return nil, err
	}
	// The eval history lives in the model directory: a temporary one
	// when the run keeps none.
	modelDir := o.ModelDir
	if modelDir == "" {
		if modelDir, err = os.MkdirTemp("", "cifar10-run-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(modelDir)
	}
	est, err := estimator.New(m, runner.Config(modelDir, o.seed, o.logEvery, log))
	if err != nil {
		return nil, err
	}
	defer est.Close()
	trainIn, err := cifar.TrainInput(trainSet, cifar.InputConfig{BatchSize: o.batch, DropRemainder: true, Epochs: estimator.Forever, Shuffle: true, Augment: true, Seed: o.seed, Processes: procs, Rank: rank})
	if err != nil {
		return nil, err
	}
	evalIn, err := cifar.EvalInput(testSet, o.batch, procs, rank)
	if err != nil {
		return nil, err
	}
	devices, _ := runner.Devices(o.Towers) // newModel checked them
	log.Info("training", "model", fmt.Sprintf("resnet%d", o.depth), "data", dir, "examples", trainSet.Len(), "towers", len(devices), "steps", o.steps, "batch", o.batch)
	last, err := est.TrainAndEvaluate(ctx,
		estimator.TrainSpec{Input: trainIn, Steps: o.steps},
		estimator.EvalSpec{Input: evalIn, EverySteps: o.evalEvery})
	if err != nil {
		return nil, err
	}
	if rank != 0 {
		return last, nil // rank 0 alone writes the eval history
	}
	// The input never ends: this run trained exactly o.steps steps.
	start := est.GlobalStep() - o.steps
	return last, printHistory(filepath.Join(modelDir, estimator.EvalHistoryFile), start, out)
}

// printHistory prints the evaluations of path after step from.
func printHistory(path string, from int64, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	records, err := estimator.ReadEvalHistory(f, path, nil)
	if err != nil {
		return err
	}
	for _, r := range records {
		if r.Step <= from {
			continue
		}
		if _, err := fmt.Fprintf(out, "step=%d accuracy=%.4f top5=%.4f loss=%.4f\n", r.Step, r.Metrics["accuracy"], r.Metrics["top5"], r.Metrics["loss"]); err != nil {
			return err
		}
	}
	return nil
}
