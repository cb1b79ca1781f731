package layers

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Softmax returns each row's softmax for logits (N, K), as one op: every
// row from its own maximum, so no row overflows whatever the others hold
// (gorgonia/tensor v0.9.24's SoftMax takes the maximum of the whole
// tensor's first element, and gives +Inf in row 2 of [[200,0,0],[0,1,2]]).
func Softmax(logits *G.Node) (*G.Node, error) {
	const op = "layers.Softmax"
	if logits == nil {
		return nil, fmt.Errorf("%s: nil logits", op)
	}
	if err := checkFloat(op, logits); err != nil {
		return nil, err
	}
	if len(logits.Shape()) != 2 {
		return nil, fmt.Errorf("%s: logits %s have shape %v, want (N, K)", op, logits.Name(), logits.Shape())
	}
	out, err := G.ApplyOp(&softmaxOp{}, logits)
	if err != nil {
		return nil, fmt.Errorf("%s(%s): %w", op, logits.Name(), err)
	}
	return out, nil
}

// softmaxOp is the rows' softmax.
type softmaxOp struct {
	forwardOp
	out buffer
}

func (op *softmaxOp) Arity() int { return 1 }

func (op *softmaxOp) Type() hm.Type {
	t := tensorType(2, hm.TypeVariable('a'))
	return hm.NewFnType(t, t)
}

func (op *softmaxOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf("softmax", in, 0)
	if err != nil {
		return nil, err
	}
	return s.Clone(), nil
}

func (op *softmaxOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(in))
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return softmaxDo[float32](op, in[0]) },
		func() (G.Value, error) { return softmaxDo[float64](op, in[0]) })
}

func softmaxDo[T float](op *softmaxOp, in G.Value) (G.Value, error) {
	x, err := backing[T]("logits", in)
	if err != nil {
		return nil, err
	}
	out := op.out.get(in.Dtype(), in.Shape())
	o := data[T](out)
	k := in.Shape()[1]
	for r := 0; r+k <= len(x) && k > 0; r += k {
		lse := logSumExp(x[r : r+k])
		for j, v := range x[r : r+k] {
			o[r+j] = T(math.Exp(float64(v) - lse))
		}
	}
	return out, nil
}

func (op *softmaxOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *softmaxOp) Hashcode() uint32      { return hashOf(op) }
func (op *softmaxOp) String() string        { return "Softmax" }

// SymDiff: dx = p ⊙ (g − Σₖ gₖpₖ) row by row, from the output p.
func (op *softmaxOp) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	d, err := G.ApplyOp(&softmaxGradOp{}, output, grad)
	if err != nil {
		return nil, fmt.Errorf("%v: gradient: %w", op, err)
	}
	return G.Nodes{d}, nil
}

// softmaxGradOp is the softmax's gradient from its output and the
// gradient flowing in.
type softmaxGradOp struct {
	gradOp
	out buffer
}

func (op *softmaxGradOp) Arity() int { return 2 }

func (op *softmaxGradOp) Type() hm.Type {
	t := tensorType(2, hm.TypeVariable('a'))
	return hm.NewFnType(t, t, t)
}

func (op *softmaxGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := sameShapes("softmax gradient", in...)
	if err != nil {
		return nil, err
	}
	return s.Clone(), nil
}

func (op *softmaxGradOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", op, len(in))
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return softmaxGradDo[float32](op, in) },
		func() (G.Value, error) { return softmaxGradDo[float64](op, in) })
}

func softmaxGradDo[T float](op *softmaxGradOp, in []G.Value) (G.Value, error) {
	_, p, g, err := predsAndLabels[T]("softmax gradient", in)
	if err != nil {
		return nil, err
	}
	out := op.out.get(in[0].Dtype(), in[0].Shape())
	o := data[T](out)
	k := in[0].Shape()[1]
	for r := 0; r+k <= len(p) && k > 0; r += k {
		dot := 0.0
		for j := range k {
			dot += float64(g[r+j]) * float64(p[r+j])
		}
		for j := range k {
			o[r+j] = T(float64(p[r+j]) * (float64(g[r+j]) - dot))
		}
	}
	return out, nil
}

func (op *softmaxGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *softmaxGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *softmaxGradOp) String() string        { return "SoftmaxGrad" }

// ArgMax returns the index of the largest element along the last axis of
// x (rank 2 or more), as int64: (N, K) gives (N), the predicted classes
// that metrics.Accuracy compares with labels. Of equal maxima the first
// wins; NaN never compares larger, so a row of NaN gives 0. It has no
// gradient.
func ArgMax(x *G.Node) (*G.Node, error) {
	const op = "layers.ArgMax"
	if x == nil {
		return nil, fmt.Errorf("%s: nil input", op)
	}
	if err := checkFloat(op, x); err != nil {
		return nil, err
	}
	if x.Dims() < 2 {
		return nil, fmt.Errorf("%s: input %s has shape %v, want at least 2 dimensions", op, x.Name(), x.Shape())
	}
	out, err := G.ApplyOp(&argMaxOp{dims: x.Dims()}, x)
	if err != nil {
		return nil, fmt.Errorf("%s(%s): %w", op, x.Name(), err)
	}
	return out, nil
}

// argMaxOp is the index of each last-axis maximum.
type argMaxOp struct {
	gradOp // not differentiable
	dims   int
	out    buffer
}

func (op *argMaxOp) Arity() int { return 1 }

func (op *argMaxOp) Type() hm.Type {
	return hm.NewFnType(tensorType(op.dims, hm.TypeVariable('a')), tensorType(op.dims-1, tensor.Int64))
}

func (op *argMaxOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf("argmax", in, 0)
	if err != nil {
		return nil, err
	}
	if len(s) < 2 {
		return nil, fmt.Errorf("argmax: shape %v, want at least 2 dimensions", s)
	}
	return s[:len(s)-1].Clone(), nil
}

func (op *argMaxOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(in))
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return argMaxDo[float32](op, in[0]) },
		func() (G.Value, error) { return argMaxDo[float64](op, in[0]) })
}

func argMaxDo[T float](op *argMaxOp, in G.Value) (G.Value, error) {
	x, err := backing[T]("input", in)
	if err != nil {
		return nil, err
	}
	s, err := op.InferShape(in.Shape())
	if err != nil {
		return nil, err
	}
	out := op.out.get(tensor.Int64, s)
	o := out.Data().([]int64)
	k := in.Shape()[len(in.Shape())-1]
	for i := range o {
		row := x[i*k : (i+1)*k]
		best := 0
		for j, v := range row {
			if v > row[best] || (row[best] != row[best] && v == v) {
				best = j
			}
		}
		o[i] = int64(best)
	}
	return out, nil
}

func (op *argMaxOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *argMaxOp) Hashcode() uint32      { return hashOf(op) }
func (op *argMaxOp) String() string        { return fmt.Sprintf("ArgMax{%d}", op.dims) }
