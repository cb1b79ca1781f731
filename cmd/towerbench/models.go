package main

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/examples/cifar10/cifar"
	"github.com/towerflow/towerflow/examples/mnist/mnist"
	"github.com/towerflow/towerflow/internal/reference"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/towers"
)

// learningRate is the SGD learning rate of both models: small enough that
// the mean squared error against random targets stays finite.
const learningRate = 0.01

// benchModel is one benchmark model: its input and target shapes and a
// graph builder that both implementations share, so that towerflow and the
// hand-written gorgonia loop compute the same ops.
type benchModel struct {
	name         string
	defaultBatch int
	// example is the shape of one input example (without the batch).
	example tensor.Shape
	// outputs is the width of the targets.
	outputs int
	// loss builds the model's mean squared error on x (a batch of inputs)
	// against y with the layers of k, asking vars for its variables.
	loss func(vars variables, k kit, x, y *G.Node) (*G.Node, error)
	// classifier, when set, is a whole model function instead: an example's
	// classifier over the feature "image" and int64 class ids "label"
	// (random, of outputs classes), trained with softmax cross-entropy and
	// SGD with momentum, on towerflow only; it may depend on the run's
	// configuration (the order of ResNet-20's activations).
	classifier func(cfg config) model.Fn
	// custom, when set, is the model's own towerflow trainer (its data,
	// model function and optimizer), on towerflow only.
	custom func(cfg config, nTowers int) (trainer, error)
}

// towerflowOnly reports whether m has no gorgonia twin.
func (m benchModel) towerflowOnly() bool { return m.classifier != nil || m.custom != nil }

// classifierMomentum is the momentum of the classifiers' SGD, as in
// bench/torchbench.py.
const classifierMomentum = 0.9

// kit is the layers a model is written with: towerflow's layers package, or
// the same layers in gorgonia's own ops.
type kit struct {
	dense func(x, kernel, bias *G.Node, act layers.Activation) (*G.Node, error)
	conv  func(x, kernel, bias *G.Node, c layers.Conv) (*G.Node, error)
	pool  func(x *G.Node, size, stride [2]int) (*G.Node, error)
	mse   func(pred, labels *G.Node) (*G.Node, error)
}

var kits = map[string]kit{
	"layers": {dense: layers.Dense, conv: layers.Conv2D, pool: func(x *G.Node, size, stride [2]int) (*G.Node, error) { return layers.MaxPool2D(x, size, stride) }, mse: layers.MeanSquaredError},
	"gorgonia": {
		dense: func(x, kernel, bias *G.Node, act layers.Activation) (*G.Node, error) {
			return reference.Dense(x, kernel, bias, act == layers.ReLU)
		},
		conv: func(x, kernel, bias *G.Node, c layers.Conv) (*G.Node, error) {
			stride := [2]int{max(c.Stride[0], 1), max(c.Stride[1], 1)}
			return reference.Conv2D(x, kernel, bias, stride, c.Padding, c.Activation == layers.ReLU)
		},
		pool: reference.MaxPool2D,
		mse:  reference.MeanSquaredError,
	},
}

// variables hands out a model's variables: a tower's in towerflow, plain
// graph nodes in the gorgonia loop.
type variables interface {
	variable(name string, shape tensor.Shape, init towers.Initializer) *G.Node
}

var models = map[string]benchModel{
	"mlp": {name: "mlp", defaultBatch: 512, example: tensor.Shape{256}, outputs: 10, loss: mlpLoss},
	"cnn": {name: "cnn", defaultBatch: 128, example: tensor.Shape{3, 32, 32}, outputs: 10, loss: cnnLoss},
	// ResNet-20 of examples/cifar10 on CIFAR-10's shapes.
	"resnet20": {name: "resnet20", defaultBatch: 128, example: tensor.Shape{3, 32, 32}, outputs: cifar.Classes, classifier: func(cfg config) model.Fn { return cifar.ResNet{Depth: 20, Format: cfg.format}.Model }},
	// The MLP of examples/mnist (784 → 128 ReLU → 10) at a small batch.
	"mnist": {name: "mnist", defaultBatch: 50, example: tensor.Shape{mnist.Side * mnist.Side}, outputs: mnist.Classes, classifier: func(config) model.Fn { return mnist.MLP{}.Model }},
	// A click-through-rate model over 26 embedding tables (embed.go).
	"embed": {name: "embed", defaultBatch: 2048, custom: func(cfg config, n int) (trainer, error) { return newEmbedTrainer(cfg, n) }},
}

// dense returns act(x·w + b) for a fresh dense layer of out units.
func dense(vars variables, k kit, name string, x *G.Node, out int, act layers.Activation) (*G.Node, error) {
	in := x.Shape()[1]
	w := vars.variable(name+"/kernel", tensor.Shape{in, out}, towers.GlorotUniform())
	b := vars.variable(name+"/bias", tensor.Shape{out}, towers.Zeros())
	return k.dense(x, w, b, act)
}

// mlpLoss: 256 → 512 ReLU → 10, mean squared error.
func mlpLoss(vars variables, k kit, x, y *G.Node) (*G.Node, error) {
	h, err := dense(vars, k, "hidden", x, 512, layers.ReLU)
	if err != nil {
		return nil, err
	}
	out, err := dense(vars, k, "out", h, 10, layers.Linear)
	if err != nil {
		return nil, err
	}
	return k.mse(out, y)
}

// cnnLoss: NCHW 3×32×32 → conv 3×3×16 (same padding, no bias) + ReLU +
// max-pool 2 → conv 3×3×32 + ReLU + max-pool 2 → dense 10, mean squared
// error.
func cnnLoss(vars variables, k kit, x, y *G.Node) (*G.Node, error) {
	conv := func(name string, in *G.Node, filters int) *G.Node {
		w := vars.variable(name+"/kernel", tensor.Shape{filters, in.Shape()[1], 3, 3}, towers.GlorotUniform())
		c := G.Must(k.conv(in, w, nil, layers.Conv{Padding: [2]int{1, 1}, Activation: layers.ReLU}))
		return G.Must(k.pool(c, [2]int{2, 2}, [2]int{2, 2}))
	}
	h := conv("conv1", x, 16)
	h = conv("conv2", h, 32)
	s := h.Shape()
	flat, err := G.Reshape(h, tensor.Shape{s[0], s[1] * s[2] * s[3]})
	if err != nil {
		return nil, fmt.Errorf("flatten %v: %w", s, err)
	}
	out, err := dense(vars, k, "out", flat, 10, layers.Linear)
	if err != nil {
		return nil, err
	}
	return k.mse(out, y)
}

// dataset is synthetic training data: inputs and targets from a seeded
// generator, nBatches batches of batch rows.
type dataset struct {
	x, y     []float32
	classes  []int64 // a classifier's labels, instead of y
	rows     int
	example  tensor.Shape
	outputs  int
	batch    int
	nBatches int
}

func newDataset(m benchModel, batch, nBatches int, seed uint64) *dataset {
	rng := rand.New(rand.NewPCG(seed, 1))
	rows := batch * nBatches
	d := &dataset{rows: rows, example: m.example, outputs: m.outputs, batch: batch, nBatches: nBatches}
	d.x = make([]float32, rows*m.example.TotalSize())
	for i := range d.x {
		d.x[i] = float32(rng.NormFloat64())
	}
	if m.classifier != nil {
		d.classes = make([]int64, rows)
		for i := range d.classes {
			d.classes[i] = int64(rng.IntN(m.outputs))
		}
		return d
	}
	d.y = make([]float32, rows*m.outputs)
	for i := range d.y {
		d.y[i] = float32(rng.NormFloat64())
	}
	return d
}

func withBatch(rows int, s tensor.Shape) tensor.Shape { return append(tensor.Shape{rows}, s...) }

// all returns the whole data set as tensors.
func (d *dataset) all() (x, y *tensor.Dense) {
	x = tensor.New(tensor.WithShape(withBatch(d.rows, d.example)...), tensor.WithBacking(d.x))
	if d.classes != nil {
		return x, tensor.New(tensor.WithShape(d.rows), tensor.WithBacking(d.classes))
	}
	y = tensor.New(tensor.WithShape(d.rows, d.outputs), tensor.WithBacking(d.y))
	return x, y
}

// batchAt returns batch i as tensors over the data set's memory (no copy).
func (d *dataset) batchAt(i int) (x, y *tensor.Dense) {
	xs, ys := d.batch*d.example.TotalSize(), d.batch*d.outputs
	x = tensor.New(tensor.WithShape(withBatch(d.batch, d.example)...), tensor.WithBacking(d.x[i*xs:(i+1)*xs]))
	y = tensor.New(tensor.WithShape(d.batch, d.outputs), tensor.WithBacking(d.y[i*ys:(i+1)*ys]))
	return x, y
}

// graphVariables makes variables as plain nodes of one graph, initialised
// with towerflow's initializers from a generator seeded by the name.
type graphVariables struct {
	g    *G.ExprGraph
	seed uint64
	all  G.Nodes
}

func (v *graphVariables) variable(name string, shape tensor.Shape, init towers.Initializer) *G.Node {
	h := fnv.New64a()
	h.Write([]byte(name))
	backing := make([]float32, shape.TotalSize())
	if err := init(rand.New(rand.NewPCG(v.seed, h.Sum64())), tensor.Float32, shape, backing); err != nil {
		panic(fmt.Errorf("initialise %s: %w", name, err))
	}
	val := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing))
	n := G.NewTensor(v.g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(val))
	v.all = append(v.all, n)
	return n
}

// towerVariables makes variables as a tower's shared variables.
type towerVariables struct{ t *towers.Scope }

func (v towerVariables) variable(name string, shape tensor.Shape, init towers.Initializer) *G.Node {
	return v.t.MustVariable(name, tensor.Float32, shape, init)
}
