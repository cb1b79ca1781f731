package layers

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/vec"
	"github.com/towerflow/towerflow/towers"
)

// BatchNormConfig configures BatchNorm; its zero value is momentum 0.99,
// epsilon 1e-3, statistics synchronized over the towers, no activation.
type BatchNormConfig struct {
	// Momentum of the moving statistics, TensorFlow's convention:
	// moving = Momentum·moving + (1 − Momentum)·batch. 0 means 0.99.
	Momentum float64
	// Epsilon is added to the variance; 0 means 1e-3.
	Epsilon float64
	// PerTower normalizes each tower with its own shard's statistics, as
	// TensorFlow's replicate_model_fn and PyTorch's DistributedDataParallel
	// do. By default the statistics (and their gradients) are summed over
	// the build's towers (Scope.Group), so that N towers compute what one
	// device computes on the whole batch.
	PerTower bool
	// Activation is applied to the output in the same op: Linear or ReLU.
	Activation Activation
	// Format is the order of a 4-D input's dimensions: NCHW (the zero
	// value) normalizes per channel along axis 1, NHWC along axis 3 (as
	// TensorFlow's axis=-1). 2-D inputs (N, C) are normalized per feature
	// in either.
	Format Format
}

// BatchNorm returns γ·(x − mean)/√(var + ε) + β, per channel of x (N, C,
// H, W), or (N, H, W, C) with cfg.Format NHWC, or per feature of x (N, C),
// with its variables created in s under
// name: name/gamma (ones), name/beta (zeros), and the non-trainable
// name/moving_mean (zeros) and name/moving_variance (ones).
//
// In training (training true) the mean and variance are the batch's, over
// N (and H, W), and the moving statistics are updated once per step
// through state updates (Scope.Assign): moving = m·moving + (1 − m)·batch,
// with the unbiased batch variance, as PyTorch and TensorFlow's fused
// kernel do (the normalization uses the biased one). Otherwise the moving
// statistics normalize, and nothing is updated.
func BatchNorm(s *towers.Scope, name string, x *G.Node, training bool, cfg BatchNormConfig) (*G.Node, error) {
	return batchNormOf("layers.BatchNorm", s, name, x, nil, training, cfg)
}

// batchNormOf is BatchNorm, with side (nil: none) BatchNormAdd's.
func batchNormOf(op string, s *towers.Scope, name string, x, side *G.Node, training bool, cfg BatchNormConfig) (*G.Node, error) {
	if s == nil || x == nil {
		return nil, fmt.Errorf("%s(%q): nil scope or input", op, name)
	}
	if err := checkFloat(op, x); err != nil {
		return nil, err
	}
	if side != nil {
		if err := checkSide(op, name, x, side); err != nil {
			return nil, err
		}
	}
	if _, _, err := cfg.settings(); err != nil {
		return nil, fmt.Errorf("%s(%q): %w", op, name, err)
	}
	shape := x.Shape()
	if len(shape) != 2 && len(shape) != 4 {
		return nil, fmt.Errorf("%s(%q): input %s has shape %v, want (N, C) or %s", op, name, x.Name(), shape, cfg.Format.want())
	}
	vars, err := batchNormVariables(s, name, x.Dtype(), shape[channelAxis(shape, cfg.Format)])
	if err != nil {
		return nil, fmt.Errorf("%s(%q): %w", op, name, err)
	}
	return applyBatchNorm(op, s, name, x, side, vars, training, cfg)
}

// BatchNormAdd returns act(BatchNorm(x) + side) as one op, for side of x's
// shape and dtype: a residual block's last normalization, its sum with the
// shortcut and the block's ReLU (TensorFlow's fused batch norm with a side
// input), with cfg.Activation applied after the sum. The variables are
// BatchNorm's, under the same names, and the values are those of
// Add(BatchNorm(x), side, act) with BatchNorm's activation Linear, bit for
// bit; the op adds side in the pass that normalizes, where Add makes a
// pass of its own, and its gradient with respect to side is the dz the
// normalization's own gradient computes on its way, where Add's is a pass
// of its own too.
func BatchNormAdd(s *towers.Scope, name string, x, side *G.Node, training bool, cfg BatchNormConfig) (*G.Node, error) {
	const op = "layers.BatchNormAdd"
	if side == nil {
		return nil, fmt.Errorf("%s(%q): nil side input", op, name)
	}
	return batchNormOf(op, s, name, x, side, training, cfg)
}

// checkSide checks that side, BatchNormAdd's side input, matches x.
func checkSide(op, name string, x, side *G.Node) error {
	if side.Dtype() != x.Dtype() || !side.Shape().Eq(x.Shape()) {
		return fmt.Errorf("%s(%q): side input %s is %v of shape %v, want %v of %s's shape %v", op, name, side.Name(), side.Dtype(), side.Shape(), x.Dtype(), x.Name(), x.Shape())
	}
	if side.Graph() != x.Graph() {
		return fmt.Errorf("%s(%q): side input %s is of another graph than %s", op, name, side.Name(), x.Name())
	}
	return nil
}

// channelAxis returns the axis of shape, (N, C) or 4-D in order f, that
// batch normalization normalizes per value of.
func channelAxis(shape tensor.Shape, f Format) int {
	if len(shape) == 4 && f == NHWC {
		return 3
	}
	return 1
}

// settings returns the momentum and epsilon cfg means, checked.
func (cfg BatchNormConfig) settings() (mom, eps float64, err error) {
	if err := cfg.Format.check(); err != nil {
		return 0, 0, err
	}
	if cfg.Activation != Linear && cfg.Activation != ReLU {
		return 0, 0, fmt.Errorf("unknown activation %v", cfg.Activation)
	}
	mom, eps = cfg.Momentum, cfg.Epsilon
	if mom == 0 {
		mom = 0.99
	}
	if eps == 0 {
		eps = 1e-3
	}
	if !(mom > 0 && mom < 1) || !(eps > 0) || math.IsInf(eps, 0) {
		return 0, 0, fmt.Errorf("momentum %v, epsilon %v: want momentum in (0, 1) and a finite positive epsilon", cfg.Momentum, cfg.Epsilon)
	}
	return mom, eps, nil
}

// batchNormVariables gets or creates a batch normalization's variables of c
// channels in s under name: gamma, beta, moving mean and moving variance.
func batchNormVariables(s *towers.Scope, name string, dt tensor.Dtype, c int) ([4]*G.Node, error) {
	var vars [4]*G.Node
	for i, v := range []struct {
		suffix string
		init   towers.Initializer
		opts   []towers.VarOption
	}{
		{"gamma", towers.Constant(1), nil},
		{"beta", towers.Zeros(), nil},
		{"moving_mean", towers.Zeros(), []towers.VarOption{towers.NotTrainable()}},
		{"moving_variance", towers.Constant(1), []towers.VarOption{towers.NotTrainable()}},
	} {
		n, err := s.Variable(name+"/"+v.suffix, dt, tensor.Shape{c}, v.init, v.opts...)
		if err != nil {
			return vars, err
		}
		vars[i] = n
	}
	return vars, nil
}

// applyBatchNorm normalizes x with the variables of the batch
// normalization name (gamma, beta, moving mean, moving variance, in s's
// graph) and, in training, declares the updates of its moving statistics.
// x is a float tensor of 2 or 4 dimensions, side nil or checked against
// it (checkSide); op names the caller in errors.
func applyBatchNorm(op string, s *towers.Scope, name string, x, side *G.Node, vars [4]*G.Node, training bool, cfg BatchNormConfig) (*G.Node, error) {
	mom, eps, err := cfg.settings()
	if err != nil {
		return nil, fmt.Errorf("%s(%q): %w", op, name, err)
	}
	shape := x.Shape()
	bn := &batchNorm{name: name, training: training, eps: eps, act: cfg.Activation, dims: len(shape), tower: s.Index(),
		last: channelAxis(shape, cfg.Format) == 3, side: side != nil}
	if training && !cfg.PerTower && s.Towers() > 1 {
		bn.moments = s.Group(name + "/moments")
		bn.grads = s.Group(name + "/moments_grad")
	}
	// In training the moving mean is the shift the statistics are summed
	// from (the same master on every tower): E[(x−m)²] − E[x−m]² does not
	// cancel catastrophically once m is near the batch's mean.
	ins := G.Nodes{x, vars[0], vars[1], vars[2]}
	if !training {
		ins = append(ins, vars[3])
	}
	if side != nil {
		ins = append(ins, side)
	}
	y, err := G.ApplyOp(&batchNormOp{bn: bn}, ins...)
	if err != nil {
		return nil, fmt.Errorf("%s(%q, %s): %w", op, name, x.Name(), err)
	}
	if !training {
		return y, nil
	}
	for i, which := range []string{"moving_mean", "moving_variance"} {
		next, err := G.ApplyOp(&movingOp{bn: bn, variance: i == 1, momentum: mom}, y, vars[2+i])
		if err != nil {
			return nil, fmt.Errorf("%s(%q): %s update: %w", op, name, which, err)
		}
		if err := s.Assign(name+"/"+which, next); err != nil {
			return nil, fmt.Errorf("%s(%q): %w", op, name, err)
		}
	}
	return y, nil
}

// batchNorm is the state one normalization's ops share within a tower: the
// forward op writes the statistics, which the moving-statistics and
// gradient ops of the same run read (the gradient takes x̂ = (x − mean)·σ⁻¹
// again from the input, which it gets as an input of its own).
type batchNorm struct {
	name     string
	training bool
	eps      float64
	act      Activation
	dims     int
	last     bool // channels last (NHWC): the input is rows of C values
	side     bool // BatchNormAdd's: the forward adds its last input
	tower    int
	moments  *towers.Group // nil: this tower's statistics only
	grads    *towers.Group

	count   float64   // elements per channel the statistics are over
	mean    []float64 // per channel
	varB    []float64 // biased variance
	invStd  []float64
	partial []float64 // scratch for the groups
	// dSums is this tower's Σ dz and Σ dz·x̂ per channel, from the input
	// gradient's op: β's and γ's gradients.
	dSums []float64
	// dz is dz = grad ⊙ act′ with a side input, from the input gradient's
	// op: the side input's gradient.
	dz buffer
}

func (b *batchNorm) String() string {
	var more string
	if b.side {
		more += ", side"
	}
	if b.last {
		more += ", NHWC"
	}
	return fmt.Sprintf("BatchNorm{%q, training=%t, synced=%t, %v%s}", b.name, b.training, b.moments != nil, b.act, more)
}

// geometry returns the batch, channels and positions per channel of x: n
// planes of hw positions per channel, or with channels last n·h·w rows of
// c channels (n the rows, hw 1).
func (b *batchNorm) geometry(s tensor.Shape) (n, c, hw int) {
	if b.last {
		return s[0] * s[1] * s[2], s[3], 1
	}
	n, c, hw = s[0], s[1], 1
	if len(s) == 4 {
		hw = s[2] * s[3]
	}
	return n, c, hw
}

// channelScratch returns n values of T for per-channel parameters and sums,
// kept in *p from run to run.
func channelScratch[T float](p *any, n int) []T {
	if s, ok := (*p).([]T); ok && cap(s) >= n {
		return s[:n]
	}
	s := make([]T, n)
	*p = s
	return s
}

// moments sets the statistics from x: the batch's, summed over the towers
// when synchronized, from sums of x − shift per channel. tmp holds 2c
// values for the sums of a block of rows, with channels last.
func moments[T float](b *batchNorm, x, shift, tmp []T, n, c, hw int) error {
	if cap(b.partial) < 2*c+1 {
		b.partial = make([]float64, 2*c+1)
		b.mean, b.varB, b.invStd = make([]float64, c), make([]float64, c), make([]float64, c)
	}
	p := b.partial[:2*c+1]
	clear(p)
	if b.last {
		// In T within a block of rows, in float64 across them.
		s, ss := tmp[:c], tmp[c:2*c]
		for lo, k := 0, vec.BlockRows(c); lo < n; lo += k {
			vec.SumsAboutRows(x[lo*c:min(lo+k, n)*c], shift, s, ss)
			for ch := range c {
				p[ch] += float64(s[ch])
				p[c+ch] += float64(ss[ch])
			}
		}
	} else {
		for i := range n {
			for ch := range c {
				// In T within a row of positions, in float64 across them.
				s, ss := vec.SumsAbout(x[(i*c+ch)*hw:(i*c+ch+1)*hw], shift[ch])
				p[ch] += float64(s)
				p[c+ch] += float64(ss)
			}
		}
	}
	p[2*c] = float64(n * hw)
	if b.moments != nil {
		var err error
		if p, err = b.moments.AllSum(b.tower, p); err != nil {
			return fmt.Errorf("%v: %w", b, err)
		}
	}
	b.count = p[2*c]
	for ch := range c {
		m := p[ch] / b.count // of x − shift
		b.mean[ch] = float64(shift[ch]) + m
		b.varB[ch] = max(p[c+ch]/b.count-m*m, 0)
		b.invStd[ch] = 1 / math.Sqrt(b.varB[ch]+b.eps)
	}
	return nil
}

// batchNormOp normalizes: inputs x, gamma, beta, and out of training the
// moving mean and variance.
type batchNormOp struct {
	forwardOp
	bn  *batchNorm
	out buffer
	par any // []T: per-channel sums and parameters, with channels last
}

func (op *batchNormOp) Arity() int { return 1 + op.params() + op.sides() }

// params is how many per-channel inputs follow x: γ, β, the moving mean
// and, out of training, the moving variance.
func (op *batchNormOp) params() int {
	if op.bn.training {
		return 3
	}
	return 4
}

// sides is how many side inputs follow the parameters: 1 or 0.
func (op *batchNormOp) sides() int {
	if op.bn.side {
		return 1
	}
	return 0
}

func (op *batchNormOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	t, v := tensorType(op.bn.dims, a), tensorType(1, a)
	ts := []hm.Type{t}
	for range op.params() {
		ts = append(ts, v)
	}
	for range op.sides() {
		ts = append(ts, t)
	}
	return hm.NewFnType(append(ts, t)...)
}

func (op *batchNormOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf("batch norm", in, 0)
	if err != nil {
		return nil, err
	}
	return s.Clone(), nil
}

func (op *batchNormOp) DiffWRT(n int) []bool {
	d := make([]bool, n)
	for i := range min(n, 3) {
		d[i] = true
	}
	if op.bn.side && n == op.Arity() {
		d[n-1] = true
	}
	return d
}

func (op *batchNormOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(in), op.Arity())
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return batchNormDo[float32](op, in) },
		func() (G.Value, error) { return batchNormDo[float64](op, in) })
}

func batchNormDo[T float](op *batchNormOp, in []G.Value) (G.Value, error) {
	b := op.bn
	x, err := backing[T]("input", in[0])
	if err != nil {
		return nil, err
	}
	n, c, hw := b.geometry(in[0].Shape())
	var buf [4][]T // γ, β, the moving mean and (out of training) variance
	params := buf[:op.params()]
	var side []T
	if b.side {
		if side, err = backing[T]("side input", in[len(in)-1]); err != nil {
			return nil, err
		}
		if len(side) != len(x) {
			return nil, fmt.Errorf("%v: side input has shape %v, input %v", op, in[len(in)-1].Shape(), in[0].Shape())
		}
	}
	for i := range params {
		if params[i], err = backing[T]("parameter", in[i+1]); err != nil {
			return nil, err
		}
		if len(params[i]) != c {
			return nil, fmt.Errorf("%v: parameter %d has %d elements, want %d channels", op, i, len(params[i]), c)
		}
	}
	gamma, beta := params[0], params[1]
	var par []T
	if b.last {
		par = channelScratch[T](&op.par, 2*c)
	}
	if b.training {
		if err := moments(b, x, params[2], par, n, c, hw); err != nil {
			return nil, err
		}
	} else {
		if cap(b.invStd) < c {
			b.mean, b.varB, b.invStd = make([]float64, c), make([]float64, c), make([]float64, c)
		}
		for ch := range c {
			b.mean[ch] = float64(params[2][ch])
			b.varB[ch] = float64(params[3][ch])
			b.invStd[ch] = 1 / math.Sqrt(b.varB[ch]+b.eps)
		}
	}
	out := op.out.get(in[0].Dtype(), in[0].Shape())
	o := data[T](out)
	relu := b.act == ReLU
	// With a side input, act(affine + side) a block of rows or a sample
	// at a time: the affine part's values are added while in cache.
	if b.last {
		m, s := par[:c], par[c:2*c]
		for ch := range c {
			m[ch], s[ch] = T(b.mean[ch]), T(b.invStd[ch])
		}
		if side == nil {
			vec.AffineRows(o, x, m, s, gamma, beta, relu)
			return out, nil
		}
		for lo, k := 0, vec.BlockRows(c)*c; lo < len(o); lo += k {
			hi := min(lo+k, len(o))
			vec.AffineRows(o[lo:hi], x[lo:hi], m, s, gamma, beta, false)
			vec.Add(o[lo:hi], o[lo:hi], side[lo:hi], relu)
		}
		return out, nil
	}
	for i := range n {
		for ch := range c {
			lo, hi := (i*c+ch)*hw, (i*c+ch+1)*hw
			m, s := T(b.mean[ch]), T(b.invStd[ch])
			vec.Affine(o[lo:hi], x[lo:hi], m, s, gamma[ch], beta[ch], relu && side == nil)
		}
		if side != nil { // the sample's values, c·hw, while in cache
			lo, hi := i*c*hw, (i+1)*c*hw
			vec.Add(o[lo:hi], o[lo:hi], side[lo:hi], relu)
		}
	}
	return out, nil
}

func (op *batchNormOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *batchNormOp) Hashcode() uint32      { return hashOf(op) }
func (op *batchNormOp) String() string        { return op.bn.String() }

// SymDiff: with dz = grad ⊙ act′, dβ = Σ dz, dγ = Σ dz·x̂ (this tower's
// rows: the engine sums them over towers), and in training
// dx = γ/σ·(dz − (Σ dz + x̂·Σ dz·x̂)/M) with the sums over every tower's
// rows when synchronized, else dx = γ/σ·dz.
func (op *batchNormOp) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	dx, err := G.ApplyOp(&batchNormGradOp{bn: op.bn, which: gradX}, output, grad, in[1], in[0])
	if err != nil {
		return nil, fmt.Errorf("%v: input gradient: %w", op, err)
	}
	out := make(G.Nodes, len(in))
	out[0] = dx
	// γ's and β's gradients are sums the input gradient's op computes on
	// its way: their ops copy them out (taking dx as input, for the order).
	for i, which := range []bnGrad{gradGamma, gradBeta} {
		d, err := G.ApplyOp(&batchNormGradOp{bn: op.bn, which: which}, dx, in[1])
		if err != nil {
			return nil, fmt.Errorf("%v: gradient %d: %w", op, i+1, err)
		}
		out[i+1] = d
	}
	if op.bn.side {
		// The side input's gradient is dz, which x's op computes and
		// keeps: its op hands it out (taking dx as input, for the order).
		d, err := G.ApplyOp(&batchNormGradOp{bn: op.bn, which: gradSide}, dx)
		if err != nil {
			return nil, fmt.Errorf("%v: side input gradient: %w", op, err)
		}
		out[len(out)-1] = d
	}
	return out, nil
}

type bnGrad int

const (
	gradX bnGrad = iota
	gradGamma
	gradBeta
	gradSide
)

// batchNormGradOp is one gradient of a normalization: x's from the
// forward's output and state, the incoming gradient, γ and x itself; γ's
// and β's (inputs x's gradient and γ) the sums x's op computed.
type batchNormGradOp struct {
	gradOp
	bn    *batchNorm
	which bnGrad
	out   buffer
	sums  []float64
	par   any // []T: per-channel sums and parameters, with channels last
}

func (op *batchNormGradOp) Arity() int {
	switch op.which {
	case gradX:
		return 4
	case gradSide:
		return 1
	}
	return 2
}

func (op *batchNormGradOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	t, v := tensorType(op.bn.dims, a), tensorType(1, a)
	switch op.which {
	case gradX:
		return hm.NewFnType(t, t, v, t, t)
	case gradSide:
		return hm.NewFnType(t, t)
	}
	return hm.NewFnType(t, v, v)
}

func (op *batchNormGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf("batch norm gradient", in, 0)
	if err != nil {
		return nil, err
	}
	if op.which == gradX || op.which == gradSide {
		return s.Clone(), nil
	}
	if op.bn.last {
		return tensor.Shape{s[3]}, nil
	}
	return tensor.Shape{s[1]}, nil
}

func (op *batchNormGradOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(in), op.Arity())
	}
	if op.which == gradSide {
		return op.sideGrad(in[0])
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return batchNormGradDo[float32](op, in, nil) },
		func() (G.Value, error) { return batchNormGradDo[float64](op, in, nil) })
}

// sideGrad is the side input's gradient: dz, which the input gradient
// (dx, of dz's shape and dtype) computed and kept.
func (op *batchNormGradOp) sideGrad(dx G.Value) (G.Value, error) {
	dz := op.bn.dz.t
	if dz == nil {
		return nil, fmt.Errorf("%v: before the input gradient", op)
	}
	if !dz.Shape().Eq(dx.Shape()) || dz.Dtype() != dx.Dtype() {
		return nil, fmt.Errorf("%v: the input gradient is %v of shape %v, its dz %v of shape %v", op, dx.Dtype(), dx.Shape(), dz.Dtype(), dz.Shape())
	}
	return dz, nil
}

// SumsInput: with channels last, the input gradient takes its incoming
// gradient (input 1) as a sum's two terms, which its first pass adds a
// block of rows at a time (towers.SumInput).
func (op *batchNormGradOp) SumsInput() int {
	if op.which == gradX && op.bn.last {
		return 1
	}
	return -1
}

// DoSum is Do with the incoming gradient in[1] + b.
func (op *batchNormGradOp) DoSum(b G.Value, in ...G.Value) (G.Value, error) {
	if op.SumsInput() != 1 {
		return nil, fmt.Errorf("%v: takes no input as a sum", op)
	}
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(in), op.Arity())
	}
	if in[1] == nil || b == nil {
		return nil, fmt.Errorf("%v: a nil term of the gradient", op)
	}
	if b.Dtype() != in[1].Dtype() || !b.Shape().Eq(in[1].Shape()) {
		return nil, fmt.Errorf("%v: the gradient's terms differ: %v of shape %v and %v of shape %v", op, in[1].Dtype(), in[1].Shape(), b.Dtype(), b.Shape())
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return batchNormGradDo[float32](op, in, b) },
		func() (G.Value, error) { return batchNormGradDo[float64](op, in, b) })
}

// batchNormGradDo is the gradients' Do; for the input's, with plus not
// nil, the incoming gradient is in[1] + plus (DoSum).
func batchNormGradDo[T float](op *batchNormGradOp, in []G.Value, plus G.Value) (G.Value, error) {
	b := op.bn
	n, c, hw := b.geometry(in[0].Shape())
	if op.which != gradX {
		if len(b.dSums) != 2*c {
			return nil, fmt.Errorf("%v: before the input gradient", op)
		}
		out := op.out.get(in[0].Dtype(), tensor.Shape{c})
		o := data[T](out)
		sums := b.dSums[c:] // Σ dz·x̂: γ's
		if op.which == gradBeta {
			sums = b.dSums[:c] // Σ dz
		}
		for ch, v := range sums {
			o[ch] = T(v)
		}
		return out, nil
	}
	y, g, err := backings[T](in, "output", "gradient")
	if err != nil {
		return nil, err
	}
	var g2 []T
	if plus != nil {
		if g2, err = backing[T]("gradient's second term", plus); err != nil {
			return nil, err
		}
	}
	if len(b.invStd) < c {
		return nil, fmt.Errorf("%v: gradient before the forward pass", op)
	}
	gamma, err := backing[T]("gamma", in[2])
	if err != nil {
		return nil, err
	}
	x, err := backing[T]("input", in[3])
	if err != nil {
		return nil, err
	}
	if len(x) != len(y) {
		return nil, fmt.Errorf("%v: input has shape %v, output %v", op, in[3].Shape(), in[0].Shape())
	}
	out := op.out.get(in[0].Dtype(), in[0].Shape())
	o := data[T](out)
	// dz = grad ⊙ act′ into d, and this tower's Σ dz, Σ dz·x̂ per channel
	// (β's and γ's gradients). d is o, where the rest happens in place,
	// but with a side input, whose gradient dz is, it is dz's own buffer,
	// and the rest goes from there into o (with channels first, a sample
	// at a time).
	d := o
	if b.side {
		d = data[T](b.dz.get(in[0].Dtype(), in[0].Shape()))
	}
	if cap(b.dSums) < 2*c {
		b.dSums = make([]float64, 2*c)
	}
	b.dSums = b.dSums[:2*c]
	clear(b.dSums)
	relu := b.act == ReLU
	if b.last {
		par := channelScratch[T](&op.par, 6*c)
		bnGradRows(b, d, y, g, g2, x, par, c, relu)
		if !b.training {
			k := par[c : 2*c]
			for ch := range c {
				k[ch] = T(float64(gamma[ch]) * b.invStd[ch])
			}
			for lo := 0; lo < len(o); lo += c {
				row, dz := o[lo:lo+c], d[lo:lo+c]
				for ch, v := range k {
					row[ch] = dz[ch] * v
				}
			}
			return out, nil
		}
	} else {
		for i := range n {
			for ch := range c {
				lo, hi := (i*c+ch)*hw, (i*c+ch+1)*hw
				ds := d[lo:hi]
				if relu {
					vec.Mask(ds, y[lo:hi], g[lo:hi])
				} else {
					copy(ds, g[lo:hi])
				}
				s, sx := vec.SumAndDotAbout(ds, x[lo:hi], T(b.mean[ch]))
				b.dSums[ch] += float64(s)
				b.dSums[c+ch] += float64(sx) * b.invStd[ch]
			}
		}
		if !b.training {
			for i := range n {
				for ch := range c {
					k := T(float64(gamma[ch]) * b.invStd[ch])
					for j := (i*c + ch) * hw; j < (i*c+ch+1)*hw; j++ {
						o[j] = d[j] * k
					}
				}
			}
			return out, nil
		}
	}
	sums, scale := b.dSums, 1.0
	if b.grads != nil {
		// Tower t's gradient is multiplied by its loss weight w_t after
		// this op; the statistics couple the towers, so the sums are the
		// weighted sums of every tower's, over w_t.
		w := b.grads.Weight(b.tower)
		if cap(op.sums) < 2*c {
			op.sums = make([]float64, 2*c)
		}
		part := op.sums[:2*c]
		for k, v := range sums {
			part[k] = v * w
		}
		if sums, err = b.grads.AllSum(b.tower, part); err != nil {
			return nil, fmt.Errorf("%v: %w", b, err)
		}
		scale = 1 / w
	}
	if b.last {
		par := channelScratch[T](&op.par, 6*c)
		m, k, ms, mx := par[:c], par[c:2*c], par[2*c:3*c], par[3*c:4*c]
		for ch := range c {
			k[ch] = T(float64(gamma[ch]) * b.invStd[ch])
			ms[ch], mx[ch] = T(scale*sums[ch]/b.count), T(b.invStd[ch]*scale*sums[c+ch]/b.count)
		}
		vec.ProjectRowsFrom(o, d, x, k, ms, m, mx)
		return out, nil
	}
	for i := range n {
		if b.side {
			copy(o[i*c*hw:(i+1)*c*hw], d[i*c*hw:(i+1)*c*hw])
		}
		for ch := range c {
			k := float64(gamma[ch]) * b.invStd[ch]
			// x̂·Σ dz·x̂/M = (x − mean)·mx with mx = σ⁻¹·Σ dz·x̂/M.
			ms, mx := T(scale*sums[ch]/b.count), T(b.invStd[ch]*scale*sums[c+ch]/b.count)
			lo, hi := (i*c+ch)*hw, (i*c+ch+1)*hw
			vec.Project(o[lo:hi], x[lo:hi], T(k), ms, T(b.mean[ch]), mx)
		}
	}
	return out, nil
}

// bnGradRows is the first pass of the input's gradient with channels last:
// dz = grad ⊙ act′ into d, grad being g, or g + g2 (added a block at a
// time) where g2 is not nil, and this tower's Σ dz, Σ dz·x̂ per channel
// into b.dSums, a block of rows at a time. par holds 6c values: the mean
// (left in par[:c], for the second pass), the second pass's parameters
// and a block's sums.
func bnGradRows[T float](b *batchNorm, d, y, g, g2, x, par []T, c int, relu bool) {
	m, s, sx := par[:c], par[4*c:5*c], par[5*c:6*c]
	for ch := range c {
		m[ch] = T(b.mean[ch])
	}
	k := vec.BlockRows(c) * c
	var sum []T // a block of g + g2, with g2
	if g2 != nil {
		sum = borrow[T](k)
		defer giveBack(sum)
	}
	for lo := 0; lo < len(d); lo += k {
		hi := min(lo+k, len(d))
		gb := g[lo:hi]
		if g2 != nil {
			gb = sum[:hi-lo]
			vec.Add(gb, g[lo:hi], g2[lo:hi], false)
		}
		vec.MaskSumAndDotAboutRows(d[lo:hi], y[lo:hi], gb, x[lo:hi], m, s, sx, relu)
		for ch := range c {
			b.dSums[ch] += float64(s[ch])
			b.dSums[c+ch] += float64(sx[ch]) * b.invStd[ch]
		}
	}
}

func (op *batchNormGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *batchNormGradOp) Hashcode() uint32      { return hashOf(op) }

// Movable: the input's gradient meets the other towers (towers.Group);
// γ's and β's copy out the sums it left.
func (op *batchNormGradOp) Movable() bool { return op.which != gradX }

func (op *batchNormGradOp) String() string {
	return fmt.Sprintf("%vGrad%d", op.bn, op.which)
}

// movingOp is a moving statistic's next value, m·moving + (1 − m)·batch,
// from the statistics the forward op (its first input, for the order)
// computed; the variance is the unbiased one.
type movingOp struct {
	gradOp
	bn       *batchNorm
	variance bool
	momentum float64
	out      buffer
}

func (op *movingOp) Arity() int { return 2 }

func (op *movingOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tensorType(op.bn.dims, a), tensorType(1, a), tensorType(1, a))
}

func (op *movingOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf("moving statistic", in, 1)
	if err != nil {
		return nil, err
	}
	return s.Clone(), nil
}

func (op *movingOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", op, len(in))
	}
	return dispatch(op, in[1].Dtype(),
		func() (G.Value, error) { return movingDo[float32](op, in[1]) },
		func() (G.Value, error) { return movingDo[float64](op, in[1]) })
}

func movingDo[T float](op *movingOp, moving G.Value) (G.Value, error) {
	mv, err := backing[T]("moving statistic", moving)
	if err != nil {
		return nil, err
	}
	b := op.bn
	if len(b.mean) < len(mv) {
		return nil, fmt.Errorf("%v: moving statistic before the forward pass", op)
	}
	out := op.out.get(moving.Dtype(), moving.Shape())
	o := data[T](out)
	bessel := b.count / max(b.count-1, 1)
	for ch, m := range mv {
		stat := b.mean[ch]
		if op.variance {
			stat = b.varB[ch] * bessel
		}
		o[ch] = T(op.momentum*float64(m) + (1-op.momentum)*stat)
	}
	return out, nil
}

func (op *movingOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *movingOp) Hashcode() uint32      { return hashOf(op) }
func (op *movingOp) String() string {
	return fmt.Sprintf("%vMoving{variance=%t, momentum=%v}", op.bn, op.variance, op.momentum)
}
