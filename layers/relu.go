package layers

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/vec"
)

// Rectify returns max(x, 0) elementwise, for x of any shape, as one op
// (gorgonia's G.Rectify is a comparison and a product, each a new tensor
// every run).
func Rectify(x *G.Node) (*G.Node, error) {
	const op = "layers.Rectify"
	if x == nil {
		return nil, fmt.Errorf("%s: nil input", op)
	}
	if err := checkFloat(op, x); err != nil {
		return nil, err
	}
	out, err := G.ApplyOp(&reluOp{dims: x.Dims()}, x)
	if err != nil {
		return nil, fmt.Errorf("%s(%s): %w", op, x.Name(), err)
	}
	return out, nil
}

// reluOp is max(x, 0).
type reluOp struct {
	forwardOp
	dims int
	out  buffer
}

func (op *reluOp) Arity() int { return 1 }

func (op *reluOp) Type() hm.Type {
	t := tensorType(op.dims, hm.TypeVariable('a'))
	return hm.NewFnType(t, t)
}

func (op *reluOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf("relu", in, 0)
	if err != nil {
		return nil, err
	}
	return s.Clone(), nil
}

func (op *reluOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(in))
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return reluDo[float32](op, in[0]) },
		func() (G.Value, error) { return reluDo[float64](op, in[0]) })
}

func reluDo[T float](op *reluOp, in G.Value) (G.Value, error) {
	x, err := backing[T]("input", in)
	if err != nil {
		return nil, err
	}
	if in.Shape().IsScalar() {
		return newScalar(max(x[0], 0)), nil
	}
	out := op.out.get(in.Dtype(), in.Shape())
	vec.ReLU(data[T](out), x)
	return out, nil
}

func (op *reluOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *reluOp) Hashcode() uint32      { return hashOf(op) }
func (op *reluOp) String() string        { return fmt.Sprintf("ReLU{%d}", op.dims) }

func (op *reluOp) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	d, err := G.ApplyOp(&reluGradOp{dims: op.dims}, output, grad)
	if err != nil {
		return nil, fmt.Errorf("%v: gradient: %w", op, err)
	}
	return G.Nodes{d}, nil
}

// reluGradOp is grad where y > 0, else 0, for y = max(x, 0): the gradient
// of the rectifier from its output (y > 0 exactly where x > 0).
type reluGradOp struct {
	gradOp
	dims int // of y
	out  buffer
}

func (op *reluGradOp) Arity() int { return 2 }

func (op *reluGradOp) Type() hm.Type {
	t := tensorType(op.dims, hm.TypeVariable('a'))
	return hm.NewFnType(t, t, t)
}

func (op *reluGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	y, err := shapeOf("relu gradient", in, 0)
	if err != nil {
		return nil, err
	}
	g, err := shapeOf("relu gradient", in, 1)
	if err != nil {
		return nil, err
	}
	if !y.Eq(g) {
		return nil, fmt.Errorf("relu gradient: output %v and gradient %v differ", y, g)
	}
	return y.Clone(), nil
}

func (op *reluGradOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", op, len(in))
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return reluGradDo[float32](op, in) },
		func() (G.Value, error) { return reluGradDo[float64](op, in) })
}

func reluGradDo[T float](op *reluGradOp, in []G.Value) (G.Value, error) {
	s, err := op.InferShape(in[0].Shape(), in[1].Shape())
	if err != nil {
		return nil, err
	}
	y, g, err := backings[T](in, "output", "gradient")
	if err != nil {
		return nil, err
	}
	if s.IsScalar() {
		o := []T{0}
		vec.Mask(o, y, g)
		return newScalar(o[0]), nil
	}
	out := op.out.get(in[0].Dtype(), s)
	vec.Mask(data[T](out), y, g)
	return out, nil
}

func (op *reluGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *reluGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *reluGradOp) String() string        { return fmt.Sprintf("ReLUGrad{%d}", op.dims) }
