package layers

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Reformat returns the batch of images x, in order from, with its
// dimensions in order to: (N, C, H, W) to (N, H, W, C) or back, as one op
// that keeps its output from run to run. Its gradient is the reverse
// reordering. With from equal to to it returns x itself.
//
// A model that computes in NHWC on images that arrive in NCHW (as
// examples/cifar10's do) reorders them once, at its start.
func Reformat(x *G.Node, from, to Format) (*G.Node, error) {
	const op = "layers.Reformat"
	if x == nil {
		return nil, fmt.Errorf("%s: nil input", op)
	}
	if err := checkFloat(op, x); err != nil {
		return nil, err
	}
	for _, f := range []Format{from, to} {
		if err := f.check(); err != nil {
			return nil, fmt.Errorf("%s(%s): %w", op, x.Name(), err)
		}
	}
	if s := x.Shape(); len(s) != 4 {
		return nil, fmt.Errorf("%s(%s): input has shape %v, want %s", op, x.Name(), s, from.want())
	}
	if from == to {
		return x, nil
	}
	out, err := G.ApplyOp(&reformatOp{from: from, to: to}, x)
	if err != nil {
		return nil, fmt.Errorf("%s(%s): %w", op, x.Name(), err)
	}
	return out, nil
}

// reformatOp reorders a 4-D batch from one Format to the other.
type reformatOp struct {
	forwardOp
	from, to Format
	out      buffer
}

func (op *reformatOp) Arity() int { return 1 }

func (op *reformatOp) Type() hm.Type {
	t := tensorType(4, hm.TypeVariable('a'))
	return hm.NewFnType(t, t)
}

func (op *reformatOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf("reformat", in, 0)
	if err != nil {
		return nil, err
	}
	if len(s) != 4 {
		return nil, fmt.Errorf("%v: input has shape %v, want %s", op, s, op.from.want())
	}
	return op.to.shape(op.from.dims(s)), nil
}

func (op *reformatOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(in))
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return reformatDo[float32](op, in[0]) },
		func() (G.Value, error) { return reformatDo[float64](op, in[0]) })
}

func reformatDo[T float](op *reformatOp, in G.Value) (G.Value, error) {
	s, err := op.InferShape(in.Shape())
	if err != nil {
		return nil, err
	}
	x, err := backing[T]("input", in)
	if err != nil {
		return nil, err
	}
	out := op.out.get(in.Dtype(), s)
	n, c, h, w := op.from.dims(in.Shape())
	rows, cols := c, h*w // an NCHW image's matrix
	if op.from == NHWC {
		rows, cols = h*w, c
	}
	transposeImages(data[T](out), x, n, rows, cols)
	return out, nil
}

func (op *reformatOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *reformatOp) Hashcode() uint32      { return hashOf(op) }
func (op *reformatOp) String() string        { return fmt.Sprintf("Reformat{%v→%v}", op.from, op.to) }

func (op *reformatOp) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	d, err := G.ApplyOp(&reformatOp{from: op.to, to: op.from}, grad)
	if err != nil {
		return nil, fmt.Errorf("%v: gradient: %w", op, err)
	}
	return G.Nodes{d}, nil
}
