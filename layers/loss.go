package layers

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// MeanSquaredError returns the mean over all elements of (pred − labels)²,
// a scalar, for pred and labels of one shape, as one op. The sum is
// accumulated in float64 whatever the dtype.
func MeanSquaredError(pred, labels *G.Node) (*G.Node, error) {
	const op = "layers.MeanSquaredError"
	if pred == nil || labels == nil {
		return nil, fmt.Errorf("%s: nil predictions or labels", op)
	}
	if err := checkFloat(op, pred, labels); err != nil {
		return nil, err
	}
	if !pred.Shape().Eq(labels.Shape()) {
		return nil, fmt.Errorf("%s: predictions %s have shape %v but labels %s have %v", op, pred.Name(), pred.Shape(), labels.Name(), labels.Shape())
	}
	out, err := G.ApplyOp(&mseOp{dims: pred.Dims()}, pred, labels)
	if err != nil {
		return nil, fmt.Errorf("%s(%s, %s): %w", op, pred.Name(), labels.Name(), err)
	}
	return out, nil
}

// mseOp is mean((pred − labels)²).
type mseOp struct {
	forwardOp
	dims int
}

func (op *mseOp) Arity() int { return 2 }

func (op *mseOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	t := tensorType(op.dims, a)
	return hm.NewFnType(t, t, a)
}

func (op *mseOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if _, err := sameShapes("mse", in...); err != nil {
		return nil, err
	}
	return tensor.ScalarShape(), nil
}

func (op *mseOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", op, len(in))
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return mseDo[float32](in) },
		func() (G.Value, error) { return mseDo[float64](in) })
}

// predsAndLabels returns the elements of in[0] and in[1], which must have
// one shape.
func predsAndLabels[T float](op string, in []G.Value) (shape tensor.Shape, p, l []T, err error) {
	if shape, err = sameShapes(op, in[0].Shape(), in[1].Shape()); err != nil {
		return nil, nil, nil, err
	}
	if p, l, err = backings[T](in, "predictions", "labels"); err != nil {
		return nil, nil, nil, err
	}
	return shape, p, l[:len(p)], nil
}

func mseDo[T float](in []G.Value) (G.Value, error) {
	_, p, l, err := predsAndLabels[T]("mse", in)
	if err != nil {
		return nil, err
	}
	var sum float64
	for i, v := range p {
		d := float64(v - l[i])
		sum += d * d
	}
	if len(p) > 0 {
		sum /= float64(len(p))
	}
	return newScalar(T(sum)), nil
}

// sameShapes checks that every shape is the first one.
func sameShapes(op string, in ...G.DimSizer) (tensor.Shape, error) {
	first, err := shapeOf(op, in, 0)
	if err != nil {
		return nil, err
	}
	for i := 1; i < len(in); i++ {
		s, err := shapeOf(op, in, i)
		if err != nil {
			return nil, err
		}
		if !s.Eq(first) {
			return nil, fmt.Errorf("%s: input %d has shape %v, input 0 has %v", op, i, s, first)
		}
	}
	return first, nil
}

func (op *mseOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *mseOp) Hashcode() uint32      { return hashOf(op) }
func (op *mseOp) String() string        { return fmt.Sprintf("MSE{%d}", op.dims) }

// SymDiff: d/dpred = 2·grad·(pred − labels)/n, d/dlabels its negation.
func (op *mseOp) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	dp, err := G.ApplyOp(&mseGradOp{dims: op.dims}, in[0], in[1], grad)
	if err != nil {
		return nil, fmt.Errorf("%v: gradient: %w", op, err)
	}
	dl, err := G.Neg(dp)
	if err != nil {
		return nil, fmt.Errorf("%v: labels gradient: %w", op, err)
	}
	return G.Nodes{dp, dl}, nil
}

// mseGradOp is 2·grad·(pred − labels)/n for a scalar grad.
type mseGradOp struct {
	gradOp
	dims int
	out  buffer
}

func (op *mseGradOp) Arity() int { return 3 }

func (op *mseGradOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	t := tensorType(op.dims, a)
	return hm.NewFnType(t, t, a, t)
}

func (op *mseGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := sameShapes("mse gradient", in[:min(2, len(in))]...)
	if err != nil {
		return nil, err
	}
	return s.Clone(), nil
}

func (op *mseGradOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("%v: %d inputs, want 3", op, len(in))
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return mseGradDo[float32](op, in) },
		func() (G.Value, error) { return mseGradDo[float64](op, in) })
}

func mseGradDo[T float](op *mseGradOp, in []G.Value) (G.Value, error) {
	s, p, l, err := predsAndLabels[T]("mse gradient", in)
	if err != nil {
		return nil, err
	}
	g, err := scalar[T]("gradient", in[2])
	if err != nil {
		return nil, err
	}
	scale := 2 * g / T(max(len(p), 1))
	if s.IsScalar() {
		return newScalar(scale * (p[0] - l[0])), nil
	}
	out := op.out.get(in[0].Dtype(), s)
	o := data[T](out)
	for i, v := range p {
		o[i] = scale * (v - l[i])
	}
	return out, nil
}

func (op *mseGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *mseGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *mseGradOp) String() string        { return fmt.Sprintf("MSEGrad{%d}", op.dims) }
