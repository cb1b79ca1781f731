package layers

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// LossOption adjusts a cross-entropy loss.
type LossOption func(*lossOptions)

type lossOptions struct {
	weights   *G.Node
	smoothing float64
	err       error
}

// ExampleWeights weights each example's loss: w has shape (N), the
// logits' dtype. The loss is then Σᵢ wᵢ·lossᵢ / N: still a mean over the
// batch's examples, so that N towers on their shards give what one device
// gives on the whole batch (Keras' SUM_OVER_BATCH_SIZE, not TensorFlow 1's
// division by the number of nonzero weights, which would not).
func ExampleWeights(w *G.Node) LossOption {
	return func(o *lossOptions) {
		if w == nil {
			o.err = fmt.Errorf("ExampleWeights: nil weights")
		}
		o.weights = w
	}
}

// LabelSmoothing mixes the labels with the uniform distribution, as
// TensorFlow's label_smoothing: a softmax target becomes
// (1 − eps)·label + eps/K over K classes, a sigmoid one
// (1 − eps)·label + eps/2. eps is in [0, 1).
func LabelSmoothing(eps float64) LossOption {
	return func(o *lossOptions) {
		if !(eps >= 0 && eps < 1) {
			o.err = fmt.Errorf("LabelSmoothing(%v): want a value in [0, 1)", eps)
		}
		o.smoothing = eps
	}
}

// xentKind is what a cross-entropy's labels are.
type xentKind int

const (
	sparseXent  xentKind = iota // class ids (N), softmax over K
	denseXent                   // distributions (N, K), softmax over K
	sigmoidXent                 // targets in [0, 1] (N, K), one sigmoid each
)

func (k xentKind) String() string {
	return [...]string{"SparseSoftmaxCrossEntropy", "SoftmaxCrossEntropy", "SigmoidCrossEntropy"}[k]
}

// SparseSoftmaxCrossEntropy returns the mean over the batch of the softmax
// cross-entropy between logits (N, K) and labels (N) holding class ids in
// [0, K) (int, int32, int64, or integral float32 or float64 values), as one
// op: each row's softmax is computed stably, from the row's own maximum,
// and the sum is accumulated in float64. A class id out of range is an
// error of the run naming the row. Labels get no gradient.
func SparseSoftmaxCrossEntropy(logits, labels *G.Node, opts ...LossOption) (*G.Node, error) {
	return crossEntropy(sparseXent, logits, labels, opts)
}

// SoftmaxCrossEntropy is SparseSoftmaxCrossEntropy for labels given as
// distributions over the classes (N, K), one-hot or not, of the logits'
// dtype.
func SoftmaxCrossEntropy(logits, labels *G.Node, opts ...LossOption) (*G.Node, error) {
	return crossEntropy(denseXent, logits, labels, opts)
}

// SigmoidCrossEntropy returns the mean over every element of the sigmoid
// cross-entropy of logits and labels of one shape (N, ...) (binary or
// multi-label targets in [0, 1]): max(x, 0) − x·z + log(1 + e^−|x|), which
// never overflows. With ExampleWeights, row i's elements are weighted by wᵢ.
func SigmoidCrossEntropy(logits, labels *G.Node, opts ...LossOption) (*G.Node, error) {
	return crossEntropy(sigmoidXent, logits, labels, opts)
}

func crossEntropy(kind xentKind, logits, labels *G.Node, opts []LossOption) (*G.Node, error) {
	op := "layers." + kind.String()
	var o lossOptions
	for _, f := range opts {
		f(&o)
	}
	if o.err != nil {
		return nil, fmt.Errorf("%s: %w", op, o.err)
	}
	if logits == nil || labels == nil {
		return nil, fmt.Errorf("%s: nil logits or labels", op)
	}
	if err := checkFloat(op, logits); err != nil {
		return nil, err
	}
	ls, ys := logits.Shape(), labels.Shape()
	switch {
	case kind != sigmoidXent && len(ls) != 2:
		return nil, fmt.Errorf("%s: logits %s have shape %v, want (N, K)", op, logits.Name(), ls)
	case kind == sigmoidXent && len(ls) < 1:
		return nil, fmt.Errorf("%s: logits %s are a scalar, want (N, ...)", op, logits.Name())
	case kind == sparseXent && (len(ys) != 1 || ys[0] != ls[0]):
		return nil, fmt.Errorf("%s: labels %s have shape %v, want (%d) for logits %v", op, labels.Name(), ys, ls[0], ls)
	case kind != sparseXent && !ys.Eq(ls):
		return nil, fmt.Errorf("%s: labels %s have shape %v, the logits %s %v", op, labels.Name(), ys, logits.Name(), ls)
	}
	if kind == sparseXent {
		switch labels.Dtype() {
		case tensor.Int, tensor.Int32, tensor.Int64, tensor.Float32, tensor.Float64:
		default:
			return nil, fmt.Errorf("%s: labels %s have dtype %v, want int, int32, int64, float32 or float64 class ids", op, labels.Name(), labels.Dtype())
		}
	} else if err := checkFloat(op, logits, labels); err != nil {
		return nil, err
	}
	x := &xent{dt: logits.Dtype(), labels: labels.Dtype(), kind: kind, smoothing: o.smoothing, dims: len(ls), n: ls[0], k: ls[1:].TotalSize()}
	ins := G.Nodes{logits, labels}
	if o.weights != nil {
		if err := checkFloat(op, logits, o.weights); err != nil {
			return nil, err
		}
		if ws := o.weights.Shape(); len(ws) != 1 || ws[0] != ls[0] {
			return nil, fmt.Errorf("%s: weights %s have shape %v, want (%d)", op, o.weights.Name(), ws, ls[0])
		}
		x.weighted = true
		ins = append(ins, o.weights)
	}
	out, err := G.ApplyOp(&xentOp{xent: x}, ins...)
	if err != nil {
		return nil, fmt.Errorf("%s(%s, %s): %w", op, logits.Name(), labels.Name(), err)
	}
	return out, nil
}

// xent is what the loss and its gradient op share: the kind, the shapes
// (n rows of k classes or elements) and the options.
type xent struct {
	// dt and labels are the dtypes of the logits and the labels: the
	// types are concrete, as gorgonia's inference fails to unify a type
	// variable of the labels with one of the logits.
	dt, labels tensor.Dtype
	kind       xentKind
	smoothing  float64
	weighted   bool
	dims       int
	n, k       int
}

func (x *xent) String() string {
	return fmt.Sprintf("%v{%dx%d, smoothing=%v, weighted=%t}", x.kind, x.n, x.k, x.smoothing, x.weighted)
}

func (x *xent) arity() int {
	if x.weighted {
		return 3
	}
	return 2
}

// types returns the types of the logits, labels and (if any) weights.
func (x *xent) types() []hm.Type {
	lt := tensorType(x.dims, x.dt)
	yt := lt
	if x.kind == sparseXent {
		yt = tensorType(1, x.labels)
	}
	ts := []hm.Type{lt, yt}
	if x.weighted {
		ts = append(ts, tensorType(1, x.dt))
	}
	return ts
}

// target is one example's (smoothed) target: element j of a class id's
// one-hot row, of a distribution, or of sigmoid targets.
type target[T float] struct {
	kind   xentKind
	class  int
	ys     []T
	eps, k float64
}

func (t *target[T]) at(j int) float64 {
	switch t.kind {
	case sparseXent:
		v := t.eps / t.k
		if j == t.class {
			v += 1 - t.eps
		}
		return v
	case denseXent:
		return (1-t.eps)*float64(t.ys[j]) + t.eps/t.k
	}
	return (1-t.eps)*float64(t.ys[j]) + t.eps/2
}

// xentRows runs row(i, logits, target, w) for every example, where w is
// the example's weight over the normalizer (N for softmax, N·K for
// sigmoid).
func xentRows[T float](x *xent, in []G.Value, row func(i int, logits []T, t *target[T], w float64)) error {
	lg, err := backing[T]("logits", in[0])
	if err != nil {
		return err
	}
	var ws []T
	if x.weighted {
		if ws, err = backing[T]("weights", in[2]); err != nil {
			return err
		}
	}
	norm := float64(x.n)
	if x.kind == sigmoidXent {
		norm *= float64(x.k)
	}
	var dense []T
	var classes func(i int) (int, bool)
	if x.kind == sparseXent {
		if classes, err = classIDs(in[1]); err != nil {
			return err
		}
	} else if dense, err = backing[T]("labels", in[1]); err != nil {
		return err
	}
	t := target[T]{kind: x.kind, eps: x.smoothing, k: float64(x.k)}
	for i := range x.n {
		w := 1.0
		if ws != nil {
			w = float64(ws[i])
		}
		if x.kind == sparseXent {
			c, ok := classes(i)
			if !ok || c < 0 || c >= x.k {
				return fmt.Errorf("%v: label of row %d is %v, want a class id in [0, %d)", x, i, labelAt(in[1], i), x.k)
			}
			t.class = c
		} else {
			t.ys = dense[i*x.k : (i+1)*x.k]
		}
		row(i, lg[i*x.k:(i+1)*x.k], &t, w/norm)
	}
	return nil
}

// classIDs returns a function giving row i's class id, false when the
// label is not an integer.
func classIDs(v G.Value) (func(i int) (int, bool), error) {
	switch d := v.Data().(type) {
	case []int:
		return func(i int) (int, bool) { return d[i], true }, nil
	case []int32:
		return func(i int) (int, bool) { return int(d[i]), true }, nil
	case []int64:
		return func(i int) (int, bool) { return int(d[i]), d[i] == int64(int(d[i])) }, nil
	case []float32:
		return func(i int) (int, bool) { return int(d[i]), float32(int(d[i])) == d[i] }, nil
	case []float64:
		return func(i int) (int, bool) { return int(d[i]), float64(int(d[i])) == d[i] }, nil
	}
	return nil, fmt.Errorf("labels: %T holds no class ids", v.Data())
}

func labelAt(v G.Value, i int) any {
	d, err := v.(*tensor.Dense).At(i)
	if err != nil {
		return "?"
	}
	return d
}

// logSumExp returns log Σ e^x over a row, from the row's maximum.
func logSumExp[T float](row []T) float64 {
	m := math.Inf(-1)
	for _, v := range row {
		m = max(m, float64(v))
	}
	if math.IsInf(m, 0) {
		return m
	}
	s := 0.0
	for _, v := range row {
		s += math.Exp(float64(v) - m)
	}
	return m + math.Log(s)
}

// xentOp is the loss: a scalar.
type xentOp struct {
	forwardOp
	*xent
}

func (op *xentOp) Arity() int { return op.arity() }

func (op *xentOp) Type() hm.Type { return hm.NewFnType(append(op.types(), op.dt)...) }

func (op *xentOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return tensor.ScalarShape(), nil }

func (op *xentOp) DiffWRT(n int) []bool {
	d := make([]bool, n)
	d[0] = true
	return d
}

func (op *xentOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != op.arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(in), op.arity())
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return xentDo[float32](op.xent, in) },
		func() (G.Value, error) { return xentDo[float64](op.xent, in) })
}

func xentDo[T float](x *xent, in []G.Value) (G.Value, error) {
	total := 0.0
	err := xentRows(x, in, func(_ int, row []T, t *target[T], w float64) {
		l := 0.0
		if x.kind == sigmoidXent {
			for j, v := range row {
				f := float64(v)
				l += max(f, 0) - f*t.at(j) + math.Log1p(math.Exp(-math.Abs(f)))
			}
		} else {
			lse := logSumExp(row)
			for j, v := range row {
				if tj := t.at(j); tj != 0 {
					l += tj * (lse - float64(v))
				}
			}
		}
		total += w * l
	})
	if err != nil {
		return nil, err
	}
	return newScalar(T(total)), nil
}

func (op *xentOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *xentOp) Hashcode() uint32      { return hashOf(op) }

// SymDiff: the logits' gradient is g·wᵢ/N·(Σt·softmax − t) for a softmax,
// g·wᵢ/(N·K)·(σ(x) − t) for a sigmoid; labels and weights get none.
func (op *xentOp) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	ins := append(G.Nodes{}, in...)
	d, err := G.ApplyOp(&xentGradOp{xent: op.xent}, append(ins, grad)...)
	if err != nil {
		return nil, fmt.Errorf("%v: gradient: %w", op, err)
	}
	out := make(G.Nodes, len(in))
	out[0] = d
	return out, nil
}

// xentGradOp is the loss's gradient with respect to the logits.
type xentGradOp struct {
	gradOp
	*xent
	out buffer
}

func (op *xentGradOp) Arity() int { return op.arity() + 1 }

func (op *xentGradOp) Type() hm.Type {
	ts := op.types()
	return hm.NewFnType(append(ts, op.dt, ts[0])...)
}

func (op *xentGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf("cross-entropy gradient", in, 0)
	if err != nil {
		return nil, err
	}
	return s.Clone(), nil
}

func (op *xentGradOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(in), op.Arity())
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return xentGradDo[float32](op, in) },
		func() (G.Value, error) { return xentGradDo[float64](op, in) })
}

func xentGradDo[T float](op *xentGradOp, in []G.Value) (G.Value, error) {
	g, err := scalar[float64]("gradient", in[len(in)-1])
	if err != nil {
		return nil, err
	}
	out := op.out.get(in[0].Dtype(), in[0].Shape())
	o := data[T](out)
	err = xentRows(op.xent, in[:len(in)-1], func(i int, row []T, t *target[T], w float64) {
		do := o[i*op.k : (i+1)*op.k]
		scale := g * w
		if op.kind == sigmoidXent {
			for j, v := range row {
				do[j] = T(scale * (1/(1+math.Exp(-float64(v))) - t.at(j)))
			}
			return
		}
		lse, sum := logSumExp(row), 0.0
		for j := range row {
			sum += t.at(j)
		}
		for j, v := range row {
			do[j] = T(scale * (sum*math.Exp(float64(v)-lse) - t.at(j)))
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (op *xentGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%vGrad", op) }
func (op *xentGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *xentGradOp) String() string        { return op.xent.String() + "Grad" }
