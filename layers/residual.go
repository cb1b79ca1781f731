package layers

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Add returns act(a + b) for a and b of one shape, as one op: a residual
// block's sum of its branch and its shortcut (identity, or the projection
// of ResNet's option B: a strided 1×1 Conv2D and a BatchNorm), with the
// block's ReLU fused.
func Add(a, b *G.Node, act Activation) (*G.Node, error) {
	const op = "layers.Add"
	if a == nil || b == nil {
		return nil, fmt.Errorf("%s: nil input", op)
	}
	if act != Linear && act != ReLU {
		return nil, fmt.Errorf("%s: unknown activation %v", op, act)
	}
	if err := checkFloat(op, a, b); err != nil {
		return nil, err
	}
	if !a.Shape().Eq(b.Shape()) {
		return nil, fmt.Errorf("%s: %s has shape %v but %s has %v", op, a.Name(), a.Shape(), b.Name(), b.Shape())
	}
	out, err := G.ApplyOp(&addOp{dims: a.Dims(), act: act}, a, b)
	if err != nil {
		return nil, fmt.Errorf("%s(%s, %s): %w", op, a.Name(), b.Name(), err)
	}
	return out, nil
}

// addOp is act(a + b).
type addOp struct {
	forwardOp
	dims int
	act  Activation
	out  buffer
}

func (op *addOp) Arity() int { return 2 }

func (op *addOp) Type() hm.Type {
	t := tensorType(op.dims, hm.TypeVariable('a'))
	return hm.NewFnType(t, t, t)
}

func (op *addOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := sameShapes("add", in...)
	if err != nil {
		return nil, err
	}
	return s.Clone(), nil
}

func (op *addOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", op, len(in))
	}
	return dispatch(op.String(), in[0].Dtype(),
		func() (G.Value, error) { return addDo[float32](op, in) },
		func() (G.Value, error) { return addDo[float64](op, in) })
}

func addDo[T float](op *addOp, in []G.Value) (G.Value, error) {
	s, a, b, err := predsAndLabels[T]("add", in)
	if err != nil {
		return nil, err
	}
	if s.IsScalar() {
		v := a[0] + b[0]
		if op.act == ReLU {
			v = max(v, 0)
		}
		return newScalar(v), nil
	}
	out := op.out.get(in[0].Dtype(), s)
	o := data[T](out)
	if op.act == ReLU {
		for i, v := range a {
			o[i] = max(v+b[i], 0)
		}
		return out, nil
	}
	for i, v := range a {
		o[i] = v + b[i]
	}
	return out, nil
}

func (op *addOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *addOp) Hashcode() uint32      { return hashOf(op) }
func (op *addOp) String() string        { return fmt.Sprintf("Add{%d, %v}", op.dims, op.act) }

// SymDiff: both inputs get grad ⊙ act′(a + b).
func (op *addOp) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if op.act != ReLU {
		return G.Nodes{grad, grad}, nil
	}
	d, err := G.ApplyOp(&reluGradOp{dims: op.dims}, output, grad)
	if err != nil {
		return nil, fmt.Errorf("%v: gradient: %w", op, err)
	}
	return G.Nodes{d, d}, nil
}

// GlobalAvgPool2D returns the mean of every channel of x (N, C, H, W) over
// its H·W positions: shape (N, C), as one op.
func GlobalAvgPool2D(x *G.Node) (*G.Node, error) {
	const op = "layers.GlobalAvgPool2D"
	if x == nil {
		return nil, fmt.Errorf("%s: nil input", op)
	}
	if err := checkFloat(op, x); err != nil {
		return nil, err
	}
	if x.Dims() != 4 {
		return nil, fmt.Errorf("%s(%s): input has shape %v, want (N, C, H, W)", op, x.Name(), x.Shape())
	}
	s := x.Shape()
	out, err := G.ApplyOp(&gapOp{in: s.Clone()}, x)
	if err != nil {
		return nil, fmt.Errorf("%s(%s): %w", op, x.Name(), err)
	}
	return out, nil
}

// gapOp is the mean over positions; with grad true it is the gradient,
// spreading each (N, C) gradient evenly back over the positions.
type gapOp struct {
	forwardOp
	in   tensor.Shape
	grad bool
	out  buffer
}

func (op *gapOp) Arity() int { return 1 }

func (op *gapOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	if op.grad {
		return hm.NewFnType(tensorType(2, a), tensorType(4, a))
	}
	return hm.NewFnType(tensorType(4, a), tensorType(2, a))
}

func (op *gapOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	if op.grad {
		return op.in.Clone(), nil
	}
	return tensor.Shape{op.in[0], op.in[1]}, nil
}

func (op *gapOp) DiffWRT(n int) []bool { return []bool{!op.grad} }

func (op *gapOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(in))
	}
	return dispatch(op.String(), in[0].Dtype(),
		func() (G.Value, error) { return gapDo[float32](op, in[0]) },
		func() (G.Value, error) { return gapDo[float64](op, in[0]) })
}

func gapDo[T float](op *gapOp, in G.Value) (G.Value, error) {
	x, err := backing[T]("input", in)
	if err != nil {
		return nil, err
	}
	hw := op.in[2] * op.in[3]
	nc := op.in[0] * op.in[1]
	s, _ := op.InferShape()
	if want := s.TotalSize(); op.grad && len(x) != nc || !op.grad && len(x) != nc*hw {
		return nil, fmt.Errorf("%v: input has %d elements, want %d", op, len(x), want)
	}
	out := op.out.get(in.Dtype(), s)
	o := data[T](out)
	inv := 1 / T(hw)
	for i := range nc {
		if op.grad {
			v := x[i] * inv
			for j := range o[i*hw : (i+1)*hw] {
				o[i*hw+j] = v
			}
			continue
		}
		var sum T
		for _, v := range x[i*hw : (i+1)*hw] {
			sum += v
		}
		o[i] = sum * inv
	}
	return out, nil
}

func (op *gapOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *gapOp) Hashcode() uint32      { return hashOf(op) }
func (op *gapOp) String() string {
	if op.grad {
		return fmt.Sprintf("GlobalAvgPool2DGrad{%v}", op.in)
	}
	return fmt.Sprintf("GlobalAvgPool2D{%v}", op.in)
}

func (op *gapOp) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if op.grad {
		return nil, fmt.Errorf("layers: second derivatives are not supported")
	}
	d, err := G.ApplyOp(&gapOp{in: op.in, grad: true}, grad)
	if err != nil {
		return nil, fmt.Errorf("%v: gradient: %w", op, err)
	}
	return G.Nodes{d}, nil
}
