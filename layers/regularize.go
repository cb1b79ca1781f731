package layers

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// L2Loss returns Σ over ws of Σ w²/2 (TensorFlow's tf.nn.l2_loss, summed),
// a scalar of their dtype, as one op: the weight-decay term a model adds to
// its loss, scaled (loss + 1e-4·L2Loss(kernels...)). Its gradient with
// respect to each w is w times the incoming gradient.
func L2Loss(ws ...*G.Node) (*G.Node, error) {
	const op = "layers.L2Loss"
	if len(ws) == 0 {
		return nil, fmt.Errorf("%s: no weights", op)
	}
	for i, w := range ws {
		if w == nil {
			return nil, fmt.Errorf("%s: weight %d is nil", op, i)
		}
	}
	if err := checkFloat(op, ws...); err != nil {
		return nil, err
	}
	dims := make([]int, len(ws))
	for i, w := range ws {
		dims[i] = w.Dims()
	}
	out, err := G.ApplyOp(&l2Op{dims: dims}, ws...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// l2Op is Σ Σ w²/2 over its inputs.
type l2Op struct {
	forwardOp
	dims []int
}

func (op *l2Op) Arity() int { return len(op.dims) }

func (op *l2Op) Type() hm.Type {
	a := hm.TypeVariable('a')
	ts := make([]hm.Type, 0, len(op.dims)+1)
	for _, d := range op.dims {
		ts = append(ts, tensorType(d, a))
	}
	return hm.NewFnType(append(ts, a)...)
}

func (op *l2Op) InferShape(...G.DimSizer) (tensor.Shape, error) { return tensor.ScalarShape(), nil }

func (op *l2Op) Do(in ...G.Value) (G.Value, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(in), op.Arity())
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return l2Do[float32](in) },
		func() (G.Value, error) { return l2Do[float64](in) })
}

func l2Do[T float](in []G.Value) (G.Value, error) {
	sum := 0.0
	for i, v := range in {
		w, err := backing[T](fmt.Sprintf("weight %d", i), v)
		if err != nil {
			return nil, err
		}
		for _, x := range w {
			sum += float64(x) * float64(x)
		}
	}
	return newScalar(T(sum / 2)), nil
}

func (op *l2Op) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *l2Op) Hashcode() uint32      { return hashOf(op) }
func (op *l2Op) String() string        { return fmt.Sprintf("L2Loss%v", op.dims) }

// SymDiff: d/dw = grad·w for each input.
func (op *l2Op) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	out := make(G.Nodes, len(in))
	for i, w := range in {
		d, err := G.ApplyOp(&scaleOp{dims: w.Dims()}, w, grad)
		if err != nil {
			return nil, fmt.Errorf("%v: gradient of %s: %w", op, w.Name(), err)
		}
		out[i] = d
	}
	return out, nil
}

// scaleOp is x times a scalar.
type scaleOp struct {
	gradOp
	dims int
	out  buffer
}

func (op *scaleOp) Arity() int { return 2 }

func (op *scaleOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	t := tensorType(op.dims, a)
	return hm.NewFnType(t, a, t)
}

func (op *scaleOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf("scale", in, 0)
	if err != nil {
		return nil, err
	}
	return s.Clone(), nil
}

func (op *scaleOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", op, len(in))
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return scaleDo[float32](op, in) },
		func() (G.Value, error) { return scaleDo[float64](op, in) })
}

func scaleDo[T float](op *scaleOp, in []G.Value) (G.Value, error) {
	x, err := backing[T]("input", in[0])
	if err != nil {
		return nil, err
	}
	g, err := scalar[T]("gradient", in[1])
	if err != nil {
		return nil, err
	}
	if in[0].Shape().IsScalar() {
		return newScalar(g * x[0]), nil
	}
	out := op.out.get(in[0].Dtype(), in[0].Shape())
	o := data[T](out)
	for i, v := range x {
		o[i] = g * v
	}
	return out, nil
}

func (op *scaleOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *scaleOp) Hashcode() uint32      { return hashOf(op) }
func (op *scaleOp) String() string        { return fmt.Sprintf("Scale{%d}", op.dims) }
