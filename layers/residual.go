package layers

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/vec"
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
	return dispatch(op, in[0].Dtype(),
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
	vec.Add(data[T](out), a, b, op.act == ReLU)
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
