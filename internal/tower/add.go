package tower

import (
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/vec"
)

// isTensorAdd reports whether n is gorgonia's elementwise addition of two
// float tensors of one shape: what symbolic differentiation adds where a
// node feeds several others (a residual block's input feeds the block and
// its shortcut), and what gorgonia computes into a new tensor, cloning its
// first operand, on every run.
func isTensorAdd(n *G.Node, kids []*G.Node) bool {
	op := n.Op()
	if op == nil || len(kids) != 2 || (op.String() != "+ false" && op.String() != "+ true") || !isGorgoniaOp(op, "elemBinOp") {
		return false
	}
	a, b := kids[0], kids[1]
	return a.Dims() > 0 && numeric.IsFloat(a.Dtype()) && a.Dtype() == b.Dtype() && a.Shape().Eq(b.Shape()) && n.Shape().Eq(a.Shape())
}

// adder runs a tensor addition into a buffer it keeps, for isTensorAdd's
// nodes. It falls back to the op itself for values it cannot add in place.
type adder struct {
	op  G.Op
	out *tensor.Dense
}

func (a *adder) Do(in ...G.Value) (G.Value, error) {
	x, y, ok := floatPair(in)
	if !ok {
		return a.op.Do(in...)
	}
	if a.out == nil || !a.out.Shape().Eq(in[0].Shape()) || a.out.Dtype() != in[0].Dtype() {
		a.out = tensor.New(tensor.Of(in[0].Dtype()), tensor.WithShape(in[0].Shape().Clone()...))
	}
	switch x := x.(type) {
	case []float32:
		vec.Add(a.out.Data().([]float32), x, y.([]float32), false)
	case []float64:
		vec.Add(a.out.Data().([]float64), x, y.([]float64), false)
	}
	return a.out, nil
}

// floatPair returns the elements of two contiguous float tensors of one
// dtype and size.
func floatPair(in []G.Value) (x, y any, ok bool) {
	if len(in) != 2 {
		return nil, nil, false
	}
	switch in[0].Dtype() {
	case tensor.Float32:
		a, ok1 := numeric.Floats[float32](in[0])
		b, ok2 := numeric.Floats[float32](in[1])
		return a, b, ok1 && ok2 && len(a) == len(b)
	case tensor.Float64:
		a, ok1 := numeric.Floats[float64](in[0])
		b, ok2 := numeric.Floats[float64](in[1])
		return a, b, ok1 && ok2 && len(a) == len(b)
	}
	return nil, nil, false
}
