package layers

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/towers"
)

// DenseConfig configures NewDense.
type DenseConfig struct {
	// In and Units are the kernel's shape (In, Units); both must be
	// positive.
	In, Units int
	// Activation is fused into the layer: Linear or ReLU.
	Activation Activation
	// NoBias leaves out the bias.
	NoBias bool
	// Dtype is the variables' and inputs' type: Float32 (the zero value)
	// or Float64.
	Dtype tensor.Dtype
	// KernelInit initializes the kernel when it is created; nil means
	// towers.GlorotUniform. BiasInit likewise, nil meaning zeros.
	KernelInit, BiasInit towers.Initializer
}

// DenseLayer is a dense layer that owns its variables, name/kernel and
// name/bias: every Apply uses them, so the gradients of all uses add up.
type DenseLayer struct {
	name         string
	kernel, bias *G.Node
	act          Activation
}

// NewDense makes the dense layer name in m, getting or creating its
// variables m.Name(name)+"/kernel" (In, Units) and "/bias" (Units).
func NewDense(m *Module, name string, cfg DenseConfig) (*DenseLayer, error) {
	const op = "layers.NewDense"
	l := &DenseLayer{act: cfg.Activation}
	if m == nil {
		return nil, fmt.Errorf("%s(%q): nil module", op, name)
	}
	l.name = m.Name(name)
	dt, err := layerDtype(op, l.name, cfg.Dtype)
	if err != nil {
		return nil, err
	}
	if cfg.In <= 0 || cfg.Units <= 0 {
		return nil, fmt.Errorf("%s(%q): %d inputs, %d units: want both positive", op, l.name, cfg.In, cfg.Units)
	}
	if l.kernel, l.bias, err = kernelAndBias(m, op, name, dt, tensor.Shape{cfg.In, cfg.Units}, cfg.Units, cfg.Activation, cfg.NoBias,
		orInit(cfg.KernelInit, towers.GlorotUniform()), cfg.BiasInit); err != nil {
		return nil, err
	}
	return l, nil
}

// kernelAndBias checks a layer's activation and gets or creates its
// variables name/kernel of kshape and, unless noBias, name/bias of units
// elements (binit nil meaning zeros).
func kernelAndBias(m *Module, op, name string, dt tensor.Dtype, kshape tensor.Shape, units int, act Activation, noBias bool, kinit, binit towers.Initializer) (kernel, bias *G.Node, err error) {
	full := m.Name(name)
	if act != Linear && act != ReLU {
		return nil, nil, fmt.Errorf("%s(%q): unknown activation %v", op, full, act)
	}
	if kernel, err = m.Variable(name+"/kernel", dt, kshape, kinit); err != nil {
		return nil, nil, fmt.Errorf("%s(%q): %w", op, full, err)
	}
	if noBias {
		return kernel, nil, nil
	}
	if bias, err = m.Variable(name+"/bias", dt, tensor.Shape{units}, orInit(binit, towers.Zeros())); err != nil {
		return nil, nil, fmt.Errorf("%s(%q): %w", op, full, err)
	}
	return kernel, bias, nil
}

// Apply returns act(x·kernel + bias) for x of shape (rows, In), a node of
// the layer's graph with its dtype (Dense).
func (l *DenseLayer) Apply(x *G.Node) (*G.Node, error) {
	const op = "layers.DenseLayer"
	if err := layerIn(op, l.name, x, l.kernel); err != nil {
		return nil, err
	}
	y, err := Dense(x, l.kernel, l.bias, l.act)
	if err != nil {
		return nil, fmt.Errorf("%s(%q): %w", op, l.name, err)
	}
	return y, nil
}

// Name returns the layer's full name, the prefix of its variables.
func (l *DenseLayer) Name() string { return l.name }

// Kernel returns the tower's node of the kernel.
func (l *DenseLayer) Kernel() *G.Node { return l.kernel }

// Bias returns the tower's node of the bias, nil without one.
func (l *DenseLayer) Bias() *G.Node { return l.bias }

// Conv2DConfig configures NewConv2D.
type Conv2DConfig struct {
	// In and Filters are the input and output channels, Size the kernel's
	// height and width: the kernel has shape (Filters, In, Size[0],
	// Size[1]). All must be positive.
	In, Filters int
	Size        [2]int
	// Conv is the stride, padding, activation and data format of every
	// application: with Format NHWC the layer takes (N, H, W, In) and
	// gives (N, OH, OW, Filters); the variables are the same in either.
	Conv
	// NoBias leaves out the bias.
	NoBias bool
	// Dtype is the variables' and inputs' type: Float32 (the zero value)
	// or Float64.
	Dtype tensor.Dtype
	// KernelInit initializes the kernel when it is created; nil means
	// towers.HeNormal (whose fan-in is In·Size[0]·Size[1]). BiasInit
	// likewise, nil meaning zeros.
	KernelInit, BiasInit towers.Initializer
}

// Conv2DLayer is a 2-D convolution that owns its variables, name/kernel
// and name/bias: every Apply uses them, so the gradients of all uses add
// up.
type Conv2DLayer struct {
	name         string
	kernel, bias *G.Node
	conv         Conv
}

// NewConv2D makes the convolution name in m, getting or creating its
// variables m.Name(name)+"/kernel" (Filters, In, Size[0], Size[1]) and
// "/bias" (Filters).
func NewConv2D(m *Module, name string, cfg Conv2DConfig) (*Conv2DLayer, error) {
	const op = "layers.NewConv2D"
	if m == nil {
		return nil, fmt.Errorf("%s(%q): nil module", op, name)
	}
	l := &Conv2DLayer{name: m.Name(name), conv: cfg.Conv}
	dt, err := layerDtype(op, l.name, cfg.Dtype)
	if err != nil {
		return nil, err
	}
	if err := cfg.Format.check(); err != nil {
		return nil, fmt.Errorf("%s(%q): %w", op, l.name, err)
	}
	if cfg.In <= 0 || cfg.Filters <= 0 || cfg.Size[0] <= 0 || cfg.Size[1] <= 0 {
		return nil, fmt.Errorf("%s(%q): %d inputs, %d filters of size %v: want all positive", op, l.name, cfg.In, cfg.Filters, cfg.Size)
	}
	shape := tensor.Shape{cfg.Filters, cfg.In, cfg.Size[0], cfg.Size[1]}
	if l.kernel, l.bias, err = kernelAndBias(m, op, name, dt, shape, cfg.Filters, cfg.Activation, cfg.NoBias,
		orInit(cfg.KernelInit, towers.HeNormal()), cfg.BiasInit); err != nil {
		return nil, err
	}
	return l, nil
}

// Apply returns act(x ⋆ kernel + bias) for x of shape (N, In, H, W), or
// (N, H, W, In) with Format NHWC, a node of the layer's graph with its
// dtype (Conv2D).
func (l *Conv2DLayer) Apply(x *G.Node) (*G.Node, error) {
	const op = "layers.Conv2DLayer"
	if err := layerIn(op, l.name, x, l.kernel); err != nil {
		return nil, err
	}
	y, err := Conv2D(x, l.kernel, l.bias, l.conv)
	if err != nil {
		return nil, fmt.Errorf("%s(%q): %w", op, l.name, err)
	}
	return y, nil
}

// Name returns the layer's full name, the prefix of its variables.
func (l *Conv2DLayer) Name() string { return l.name }

// Kernel returns the tower's node of the kernel.
func (l *Conv2DLayer) Kernel() *G.Node { return l.kernel }

// Bias returns the tower's node of the bias, nil without one.
func (l *Conv2DLayer) Bias() *G.Node { return l.bias }

// BatchNormLayerConfig configures NewBatchNorm.
type BatchNormLayerConfig struct {
	// Channels is the number of features (N, C) or channels (N, C, H, W),
	// or (N, H, W, C) with Format NHWC, normalized: C, positive.
	Channels int
	// Dtype is the variables' and inputs' type: Float32 (the zero value)
	// or Float64.
	Dtype tensor.Dtype
	// BatchNormConfig is the momentum, epsilon, synchronization,
	// activation and image order of every application.
	BatchNormConfig
}

// BatchNormLayer is a batch normalization that owns its variables,
// name/gamma, name/beta, name/moving_mean and name/moving_variance, as
// BatchNorm makes them.
//
// It may be applied any number of times out of training, but at most once
// in training in one tower's graph: a training application declares the
// one update of the moving statistics the step makes (Scope.Assign), from
// the statistics of the batch it normalizes, and a second one's would
// have to replace or be averaged with it. Applying it again in training is
// an error naming the layer; normalize two inputs in training with two
// layers of two names, or concatenate them along the batch.
type BatchNormLayer struct {
	s        *towers.Scope
	name     string
	vars     [4]*G.Node
	cfg      BatchNormConfig
	training bool // applied in training already
}

// NewBatchNorm makes the batch normalization name in m, getting or
// creating its variables under m.Name(name), each of shape (Channels).
func NewBatchNorm(m *Module, name string, cfg BatchNormLayerConfig) (*BatchNormLayer, error) {
	const op = "layers.NewBatchNorm"
	if m == nil || m.s == nil {
		return nil, fmt.Errorf("%s(%q): nil module or scope", op, name)
	}
	l := &BatchNormLayer{s: m.s, name: m.Name(name), cfg: cfg.BatchNormConfig}
	dt, err := layerDtype(op, l.name, cfg.Dtype)
	if err != nil {
		return nil, err
	}
	if cfg.Channels <= 0 {
		return nil, fmt.Errorf("%s(%q): %d channels, want a positive number", op, l.name, cfg.Channels)
	}
	if _, _, err := cfg.settings(); err != nil {
		return nil, fmt.Errorf("%s(%q): %w", op, l.name, err)
	}
	if _, err := m.fullName(name + "/gamma"); err != nil {
		return nil, fmt.Errorf("%s(%q): %w", op, l.name, err)
	}
	if l.vars, err = batchNormVariables(m.s, l.name, dt, cfg.Channels); err != nil {
		return nil, fmt.Errorf("%s(%q): %w", op, l.name, err)
	}
	return l, nil
}

// Apply normalizes x, of shape (N, Channels) or (N, Channels, H, W) ((N,
// H, W, Channels) with Format NHWC), a node of the layer's graph with its
// dtype, as BatchNorm does; see
// BatchNormLayer for applying it in training more than once.
func (l *BatchNormLayer) Apply(x *G.Node, training bool) (*G.Node, error) {
	return l.apply("layers.BatchNormLayer", x, nil, training)
}

// ApplyAdd returns act(BN(x) + side) as one op, as BatchNormAdd does: the
// layer's normalization of x, the sum with side (of x's shape and dtype)
// and then the layer's activation. It counts as an application as Apply
// does.
func (l *BatchNormLayer) ApplyAdd(x, side *G.Node, training bool) (*G.Node, error) {
	const op = "layers.BatchNormLayer.ApplyAdd"
	if side == nil {
		return nil, fmt.Errorf("%s(%q): nil side input", op, l.name)
	}
	return l.apply(op, x, side, training)
}

func (l *BatchNormLayer) apply(op string, x, side *G.Node, training bool) (*G.Node, error) {
	if err := layerIn(op, l.name, x, l.vars[0]); err != nil {
		return nil, err
	}
	if side != nil {
		if err := checkSide(op, l.name, x, side); err != nil {
			return nil, err
		}
	}
	if sh, c := x.Shape(), l.vars[0].Shape()[0]; (len(sh) != 2 && len(sh) != 4) || sh[channelAxis(sh, l.cfg.Format)] != c {
		images := fmt.Sprintf("(N, %d, H, W)", c)
		if l.cfg.Format == NHWC {
			images = fmt.Sprintf("(N, H, W, %d)", c)
		}
		return nil, fmt.Errorf("%s(%q): input %s has shape %v, want (N, %d) or %s", op, l.name, x.Name(), sh, c, images)
	}
	if training {
		if l.training {
			return nil, fmt.Errorf("%s(%q): applied in training a second time in %v: its moving statistics take one update per step; normalize another input with a layer of another name", op, l.name, l.s)
		}
	}
	y, err := applyBatchNorm(op, l.s, l.name, x, side, l.vars, training, l.cfg)
	if err == nil && training {
		l.training = true // only an application that succeeded counts
	}
	return y, err
}

// Name returns the layer's full name, the prefix of its variables.
func (l *BatchNormLayer) Name() string { return l.name }

// Gamma returns the tower's node of γ, the scale.
func (l *BatchNormLayer) Gamma() *G.Node { return l.vars[0] }

// Beta returns the tower's node of β, the offset.
func (l *BatchNormLayer) Beta() *G.Node { return l.vars[1] }

func orInit(i, def towers.Initializer) towers.Initializer {
	if i != nil {
		return i
	}
	return def
}
