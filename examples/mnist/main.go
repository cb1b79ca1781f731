// Command mnist trains a digit classifier on MNIST with one tower per local
// device, then evaluates it on the test set:
//
//	go run ./examples/mnist -data ~/mnist               # the MLP
//	go run ./examples/mnist -data ~/mnist -model cnn -optimizer adam
//
// -data names a directory of MNIST's four files (train-images-idx3-ubyte,
// train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte,
// each plain or gzipped). Without it the command writes a small synthetic
// data set in the same files into a temporary directory, says so, and
// trains on that through the same reader.
//
// It logs progress while training and ends with one line "step=<step>
// accuracy=<test accuracy> loss=<test loss>". With -model_dir the run
// keeps checkpoints there, and a second run with the same directory
// continues from the saved step. With -serve it then exports the model and
// serves it with TensorFlow Serving's REST API until interrupted; classify
// answers each image's most probable digit with its probability:
//
//	go run ./examples/mnist -model_dir runs/mnist -serve localhost:8501
//	curl -d @runs/mnist/classify_request.json localhost:8501/v1/models/mnist:classify
//
// Started by mpirun (built with -tags mpi), the processes train together:
// each its towers on its part of every batch, the gradients all-reduced
// (see the README); rank 0 writes the model directory and prints the
// result:
//
//	go build -tags mpi -o /tmp/mnist ./examples/mnist && mpirun -np 2 /tmp/mnist
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/mnist/mnist"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/runner"
	"github.com/towerflow/towerflow/towers"
)

// options are the command's flags.
type options struct {
	runner.Flags
	data      string
	net       string
	hidden    int
	filters   int
	steps     int64
	batch     int
	optimizer string
	lr        float64
	momentum  float64
	seed      uint64
	// synthetic is the number of training and test examples of the
	// synthetic data set.
	synthetic [2]int
	// logEvery is the Estimator's LogEvery.
	logEvery int
	// procs is the group of processes mpirun started this one in; nil
	// alone.
	procs collective.Comm
	// precision is -precision (replicate.Config.Precision).
	precision towers.Precision
}

// defaults are the flags' defaults.
var defaults = options{net: "mlp", steps: 1000, batch: 100, optimizer: "momentum", momentum: 0.9, seed: 1, synthetic: [2]int{5000, 1000}, logEvery: 100}

func main() {
	o := defaults
	o.Register(flag.CommandLine)
	flag.StringVar(&o.data, "data", "", "directory of MNIST's files (NAME or NAME.gz); empty trains on a synthetic data set")
	flag.StringVar(&o.net, "model", o.net, "the model: mlp or cnn")
	flag.IntVar(&o.hidden, "hidden", 0, "units of the hidden dense layer; 0 means 128")
	flag.IntVar(&o.filters, "filters", 0, "the cnn's first convolution's filters (the second has twice as many); 0 means 32")
	flag.Int64Var(&o.steps, "steps", o.steps, "training steps to run (more, when -model_dir holds a checkpoint)")
	flag.IntVar(&o.batch, "batch", o.batch, "batch size")
	flag.StringVar(&o.optimizer, "optimizer", o.optimizer, "momentum or adam")
	flag.Float64Var(&o.lr, "lr", 0, "learning rate; 0 means 0.05 with momentum, 0.001 with adam")
	flag.Float64Var(&o.momentum, "momentum", o.momentum, "momentum of -optimizer momentum")
	flag.Uint64Var(&o.seed, "seed", o.seed, "seed of the initial variables, the shuffling and the synthetic data")
	flag.IntVar(&o.synthetic[0], "synthetic_train", o.synthetic[0], "training examples of the synthetic data set")
	flag.IntVar(&o.synthetic[1], "synthetic_test", o.synthetic[1], "test examples of the synthetic data set")
	prec := flag.String("precision", "float32", "arithmetic of the convolutions and matrix products: float32 or bf16 (bfloat16 mixed precision; replicate.Config.Precision)")
	flag.Parse()
	p, perr := towers.ParsePrecision(*prec)
	if perr != nil {
		runner.Usage("mnist", fmt.Errorf("-precision: %w", perr))
	}
	o.precision = p
	runner.Usage("mnist", o.check())
	net, _ := newNet(o) // check checked it
	var leave func()
	o.procs, leave = runner.Processes("mnist", o.Flags)
	defer leave()
	// The served input is an image of the size of the data's.
	inputs := estimator.ServingInput{}
	trainFn := func(ctx context.Context) error {
		r, err := train(ctx, o, os.Stdout)
		inputs[mnist.ImageKey] = servingInput(net, r.rows, r.cols)
		return err
	}
	runner.Main("mnist", o.Flags, trainFn, runner.Serving{
		Name:   "mnist",
		Model:  func() (*replicate.Model, error) { return newModel(o) },
		Inputs: inputs,
		Try:    "curl -d @" + filepath.Join(o.ModelDir, requestFile) + " %s/v1/models/mnist:classify",
		Logger: runner.Logger(),
	})
}

// servingInput is the served model's input: one image of rows×cols.
func servingInput(net mnist.Net, rows, cols int) estimator.FeatureSpec {
	return estimator.FeatureSpec{Dtype: tensor.Float32, Shape: net.Layout().Shape(rows, cols)}
}

// result is what train found: the size of the images and the test scores.
type result struct {
	rows, cols int
	scores     map[string]float64
}

// requestFile is a classify request of two test images that a run with
// -serve writes into the model directory.
const requestFile = "classify_request.json"

// maxUnits is the most units or filters a layer may have.
const maxUnits = math.MaxInt32

// check checks the flags: the ranges they may take, and that the model and
// the synthetic data they ask for fit in memory.
func (o options) check() error {
	var c runner.Check
	c.Add(o.Flags.Check())
	c.OneOf("model", o.net, "mlp", "cnn")
	c.OneOf("optimizer", o.optimizer, "momentum", "adam")
	c.Int("hidden", int64(o.hidden), 0, maxUnits)
	c.Int("filters", int64(o.filters), 0, maxUnits)
	c.Int("steps", o.steps, 0, runner.NoLimit)
	c.Int("batch", int64(o.batch), 1, runner.NoLimit)
	c.Float("lr", o.lr, 0, math.Inf(1))
	c.Float("momentum", o.momentum, 0, 1)
	if o.data == "" {
		c.Int("synthetic_train", int64(o.synthetic[0]), max(int64(o.batch), 1), runner.NoLimit) // every batch whole
		c.Int("synthetic_test", int64(o.synthetic[1]), 1, runner.NoLimit)
		// Each image's bytes, and its float32 pixels.
		examples := float64(o.synthetic[0]) + float64(o.synthetic[1])
		c.Memory(fmt.Sprintf("-synthetic_train %d -synthetic_test %d", o.synthetic[0], o.synthetic[1]), "the data", examples*mnistSide*mnistSide*(1+4))
	}
	if err := c.Err(); err != nil {
		return err // the net's size needs sizes in range
	}
	net, err := newNet(o)
	if err != nil {
		return err
	}
	slots := 1 // momentum's
	if o.optimizer == "adam" {
		slots = 2
	}
	flags := fmt.Sprintf("-hidden %d", o.hidden)
	if o.net == "cnn" {
		flags = fmt.Sprintf("-filters %d -hidden %d", o.filters, o.hidden)
	}
	c.Memory(flags, "the weights and optimizer slots", runner.ModelBytes(net.Params(mnistSide, mnistSide), 4, slots))
	return c.Err()
}

// mnistSide is the side of MNIST's images, of which the memory a run needs
// is estimated.
const mnistSide = 28

// newOptimizer returns the optimizer o names.
func newOptimizer(o options) (optimizers.Optimizer, error) {
	switch o.optimizer {
	case "momentum":
		return optimizers.Momentum(cmp.Or(o.lr, 0.05), o.momentum), nil
	case "adam":
		return optimizers.Adam(cmp.Or(o.lr, 0.001)), nil
	}
	return nil, fmt.Errorf("-optimizer %q: want momentum or adam", o.optimizer)
}

// newNet returns the net o names, of o's sizes.
func newNet(o options) (mnist.Net, error) {
	switch {
	case o.hidden < 0 || o.filters < 0:
		return nil, fmt.Errorf("-hidden %d, -filters %d: want 0 (the default) or more", o.hidden, o.filters)
	case o.net == "mlp":
		return mnist.MLP{Hidden: o.hidden}, nil
	case o.net == "cnn":
		return mnist.CNN{Filters: [2]int{o.filters, 2 * o.filters}, Hidden: o.hidden}, nil
	}
	return nil, fmt.Errorf("-model %q: want mlp or cnn", o.net)
}

// newModel returns o's net on o's towers with o's optimizer.
func newModel(o options) (*replicate.Model, error) {
	net, err := newNet(o)
	if err != nil {
		return nil, err
	}
	devices, err := runner.Devices(o.Towers)
	if err != nil {
		return nil, err
	}
	opt, err := newOptimizer(o)
	if err != nil {
		return nil, err
	}
	return replicate.ModelFn(net.Model, replicate.Config{Devices: devices, Optimizer: opt, Processes: o.procs, Precision: o.precision}), nil
}

// train trains o's model for o.steps steps on the training split of o.data
// (or of a synthetic data set), evaluates it on the test split and writes
// the scores on out.
func train(ctx context.Context, o options, out io.Writer) (result, error) {
	log := runner.Logger()
	m, err := newModel(o)
	if err != nil {
		return result{}, err
	}
	net, _ := newNet(o) // newModel checked it
	procs, rank := 1, 0
	if o.procs != nil {
		procs, rank = o.procs.Size(), o.procs.Rank()
	}
	if rank != 0 {
		out = io.Discard // rank 0 reports for every process
	}
	dir := o.data
	if dir == "" {
		if dir, err = os.MkdirTemp("", "mnist-synthetic-"); err != nil {
			return result{}, err
		}
		defer os.RemoveAll(dir)
		if err := mnist.WriteSynthetic(dir, o.synthetic[0], o.synthetic[1], o.seed, true); err != nil {
			return result{}, err
		}
		fmt.Fprintf(out, "no -data: training on a synthetic data set in MNIST's files (%d training and %d test images of seven-segment digits) in %s, removed at the end\n", o.synthetic[0], o.synthetic[1], dir)
	}
	trainSet, testSet, err := mnist.Load(dir)
	if err != nil {
		return result{}, err
	}
	r := result{rows: trainSet.Rows, cols: trainSet.Cols}
	if o.Serve != "" {
		if err := writeRequest(filepath.Join(o.ModelDir, requestFile), testSet); err != nil {
			return result{}, err
		}
	}
	est, err := estimator.New(m, runner.Config(o.ModelDir, o.seed, o.logEvery, log))
	if err != nil {
		return result{}, err
	}
	defer est.Close()
	input, err := estimator.FromTensors(trainSet.Features(net.Layout()), trainSet.LabelTensors(),
		estimator.TensorInput{BatchSize: o.batch, Epochs: estimator.Forever, Shuffle: true, Seed: o.seed, DropRemainder: true, Processes: procs, Rank: rank})
	if err != nil {
		return result{}, err
	}
	devices, _ := runner.Devices(o.Towers) // newModel checked them
	log.Info("training", "model", o.net, "data", dir, "examples", trainSet.Len(), "towers", len(devices), "devices", fmt.Sprint(devices), "steps", o.steps, "batch", o.batch)
	if o.steps > 0 {
		if err := est.Train(ctx, input, estimator.Steps(o.steps)); err != nil {
			return result{}, err
		}
	}
	eval, err := estimator.FromTensors(testSet.Features(net.Layout()), testSet.LabelTensors(), estimator.TensorInput{BatchSize: o.batch, Processes: procs, Rank: rank})
	if err != nil {
		return result{}, err
	}
	scores, err := est.Evaluate(ctx, eval)
	if err != nil {
		return result{}, err
	}
	_, err = fmt.Fprintf(out, "step=%d accuracy=%.4f loss=%.4f\n", int64(scores["global_step"]), scores["accuracy"], scores["loss"])
	r.scores = scores
	return r, err
}

// writeRequest writes a classify request of the first two images of s to
// path: each image's pixels scaled to [0, 1] in one flat list, as classify
// takes any image shape.
func writeRequest(path string, s *mnist.Set) error {
	if s.Len() < 2 {
		return errors.New("a classify request needs two test images")
	}
	first := (&mnist.Set{Rows: s.Rows, Cols: s.Cols, Pixels: s.Pixels[:2*s.Rows*s.Cols], Labels: s.Labels[:2]}).Features(mnist.Flat)
	images := first[mnist.ImageKey].Data().([]float32)
	size := s.Rows * s.Cols
	type example map[string][]float32
	req := struct {
		Examples []example `json:"examples"`
	}{[]example{{mnist.ImageKey: images[:size]}, {mnist.ImageKey: images[size:]}}}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
