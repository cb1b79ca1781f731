package cifar

import (
	"cmp"
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/examples/internal/classifier"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/towers"
)

// ResNet is He et al.'s residual network for CIFAR-10 (2016, section 4.2):
// a 3×3 convolution of 16 filters, three stages of (Depth − 2)/6 basic
// blocks of 16, 32 and 64 filters (the first block of stages 2 and 3
// halves the resolution with stride 2 and a projection shortcut, option B:
// a 1×1 convolution of stride 2 and batch normalization), global average
// pooling and a dense layer of 10 logits. A basic block is conv 3×3, batch
// norm, ReLU, conv 3×3, batch norm, plus the shortcut, ReLU. Convolutions
// have no bias (batch normalization follows each) and He-normal kernels.
//
// The loss is the mean softmax cross-entropy plus WeightDecay times the
// L2 loss (Σ w²/2) of every convolution and dense kernel; the eval metrics
// are "accuracy" (top-1) and "top5" (recall at 5); predictions and export
// signatures are the classifier's (see examples/internal/classifier).
// The model function takes no optimizer: pass one in replicate.Config
// (Optimizer below makes the paper's).
type ResNet struct {
	// Depth is 6n + 2 for n blocks per stage: 20, 32, 44, 56, 110; 0
	// means 20.
	Depth int
	// WeightDecay scales the kernels' L2 loss; 0 means 1e-4, negative
	// none.
	WeightDecay float64
	// BatchNorm configures every batch normalization (its Activation and
	// Format are set per use); a zero Momentum means 0.9, PyTorch's 0.1.
	BatchNorm layers.BatchNormConfig
	// Format is the order of the network's activations. The images come
	// in (N, 3, H, W) either way; with NHWC the network reorders them once
	// and computes channels last, which oneDNN's convolutions do fastest
	// (layers.PreferredFormat). The variables, and so the checkpoints, are
	// the same in both orders.
	Format layers.Format
}

// Blocks returns the number of basic blocks per stage, or an error for a
// depth that is not 6n + 2.
func (r ResNet) Blocks() (int, error) {
	d := cmp.Or(r.Depth, 20)
	if d < 8 || (d-2)%6 != 0 {
		return 0, fmt.Errorf("ResNet: depth %d is not 6n + 2 (20, 32, 44, 56, 110)", d)
	}
	return (d - 2) / 6, nil
}

// Model is the ResNet's model function.
func (r ResNet) Model(s *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, _ model.Params) (*model.Spec, error) {
	n, err := r.Blocks()
	if err != nil {
		return nil, err
	}
	x, err := features.Lookup(ImageKey)
	if err != nil {
		return nil, err
	}
	if sh := x.Shape(); x.Dtype() != tensor.Float32 || len(sh) != 4 || sh[1] != 3 {
		return nil, fmt.Errorf("ResNet: feature %q is %v of shape %v, want float32 images (N, 3, H, W)", ImageKey, x.Dtype(), sh)
	}
	b := &builder{s: s, training: mode == model.Train, bn: r.BatchNorm, format: r.Format}
	b.bn.Momentum = cmp.Or(b.bn.Momentum, 0.9)
	b.bn.Format = r.Format
	if x, err = layers.Reformat(x, layers.NCHW, r.Format); err != nil {
		return nil, fmt.Errorf("ResNet-%d: %w", 6*n+2, err)
	}
	h := b.convBN("conv0", x, 16, 3, 1, layers.ReLU)
	for stage, filters := range []int{16, 32, 64} {
		for i := range n {
			stride := 1
			if stage > 0 && i == 0 {
				stride = 2
			}
			h = b.block(fmt.Sprintf("stage%d/block%d", stage+1, i+1), h, filters, stride)
		}
	}
	var logits *G.Node
	if b.err == nil {
		var pooled *G.Node
		if pooled, b.err = layers.GlobalAvgPool2D(h, b.format); b.err == nil {
			kernel := b.variable("logits/kernel", tensor.Shape{64, Classes}, towers.GlorotUniform())
			bias := b.variable("logits/bias", tensor.Shape{Classes}, towers.Zeros())
			if b.err == nil {
				logits, b.err = layers.Dense(pooled, kernel, bias, layers.Linear)
			}
		}
	}
	if b.err != nil {
		return nil, fmt.Errorf("ResNet-%d: %w", 6*n+2, b.err)
	}
	spec, err := classifier.Head(mode, logits, labels, LabelKey)
	if err != nil || mode == model.Predict {
		return spec, err
	}
	if mode == model.Eval {
		y, _ := labels.Lookup(LabelKey)
		spec.EvalMetrics["top5"] = metrics.RecallAtK(y, spec.Predictions["probabilities"], 5)
	}
	if wd := r.WeightDecay; wd >= 0 {
		l2, err := layers.L2Loss(b.kernels...)
		if err != nil {
			return nil, err
		}
		decay := G.NewConstant(float32(cmp.Or(wd, 1e-4)))
		if spec.Loss, err = G.Add(spec.Loss, G.Must(G.Mul(decay, l2))); err != nil {
			return nil, fmt.Errorf("ResNet: weight decay: %w", err)
		}
	}
	return spec, nil
}

// builder builds one tower's network, keeping the first error.
type builder struct {
	s        *towers.Scope
	training bool
	bn       layers.BatchNormConfig
	format   layers.Format
	kernels  []*G.Node
	err      error
}

func (b *builder) variable(name string, shape tensor.Shape, init towers.Initializer) *G.Node {
	if b.err != nil {
		return nil
	}
	v, err := b.s.Variable(name, tensor.Float32, shape, init)
	b.err = err
	if len(shape) > 1 {
		b.kernels = append(b.kernels, v)
	}
	return v
}

// channels returns the channels of x, a batch of images in b's order.
func (b *builder) channels(x *G.Node) int {
	if b.format == layers.NHWC {
		return x.Shape()[3]
	}
	return x.Shape()[1]
}

// convBN is a convolution of filters k×k kernels ("same" padding, no bias)
// and a batch normalization with act.
func (b *builder) convBN(name string, x *G.Node, filters, k, stride int, act layers.Activation) *G.Node {
	return b.normalize(name, b.conv(name, x, filters, k, stride), act)
}

// conv is convBN's convolution.
func (b *builder) conv(name string, x *G.Node, filters, k, stride int) *G.Node {
	if b.err != nil {
		return nil
	}
	kernel := b.variable(name+"/kernel", tensor.Shape{filters, b.channels(x), k, k}, towers.HeNormal())
	if b.err != nil {
		return nil
	}
	c, err := layers.Conv2D(x, kernel, nil, layers.Conv{Stride: [2]int{stride, stride}, Padding: [2]int{k / 2, k / 2}, Format: b.format})
	b.err = err
	return c
}

// normalize is convBN's batch normalization of c with act.
func (b *builder) normalize(name string, c *G.Node, act layers.Activation) *G.Node {
	if b.err != nil {
		return nil
	}
	var y *G.Node
	y, b.err = layers.BatchNorm(b.s, name+"/bn", c, b.training, b.bnConfig(act))
	return y
}

func (b *builder) bnConfig(act layers.Activation) layers.BatchNormConfig {
	cfg := b.bn
	cfg.Activation = act
	return cfg
}

// block is a basic residual block: the second normalization, the sum with
// the shortcut and the ReLU are one op (BatchNormLayer.ApplyAdd, made
// before the shortcut so that the variables are created in the order of
// a convBN and an Add).
func (b *builder) block(name string, x *G.Node, filters, stride int) *G.Node {
	if b.err != nil {
		return nil
	}
	h := b.convBN(name+"/conv1", x, filters, 3, stride, layers.ReLU)
	h = b.conv(name+"/conv2", h, filters, 3, 1)
	if b.err != nil {
		return nil
	}
	bn, err := layers.NewBatchNorm(layers.NewModule(b.s, ""), name+"/conv2/bn",
		layers.BatchNormLayerConfig{Channels: filters, Dtype: tensor.Float32, BatchNormConfig: b.bnConfig(layers.ReLU)})
	if b.err = err; err != nil {
		return nil
	}
	shortcut := x
	if stride != 1 || b.channels(x) != filters {
		shortcut = b.convBN(name+"/shortcut", x, filters, 1, stride, layers.Linear)
	}
	if b.err != nil {
		return nil
	}
	var y *G.Node
	y, b.err = bn.ApplyAdd(h, shortcut, b.training)
	return y
}

// Optimizer is the paper's: SGD with momentum 0.9 and a learning rate of
// lr, divided by 10 after each of the boundaries (He et al.: 0.1, then
// 0.01 and 0.001 at 32k and 48k of 64k steps of batch 128).
func Optimizer(lr float64, boundaries ...int64) optimizers.Optimizer {
	values := []float64{lr}
	for range boundaries {
		values = append(values, values[len(values)-1]/10)
	}
	return optimizers.Momentum(lr, 0.9, optimizers.LearningRateSchedule(optimizers.PiecewiseConstant(boundaries, values)))
}
