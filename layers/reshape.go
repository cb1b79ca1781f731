package layers

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Flatten returns x (N, ...) as (N, the product of the other dimensions),
// a header over x's memory: nothing is copied (see Reshape). An x of
// shape (N, K) is returned as it is.
func Flatten(x *G.Node) (*G.Node, error) {
	const op = "layers.Flatten"
	if x == nil {
		return nil, fmt.Errorf("%s: nil input", op)
	}
	s := x.Shape()
	if len(s) < 2 {
		return nil, fmt.Errorf("%s(%s): input has shape %v, want (N, ...) of at least two dimensions", op, x.Name(), s)
	}
	if len(s) == 2 {
		return x, nil
	}
	return reshape(op, x, tensor.Shape{s[0], s[1:].TotalSize()})
}

// Reshape returns x with the given shape, which must have as many
// elements, without copying: the op's value is a header over its input's
// memory, made once and kept while that memory stays where it is (each run
// of a graph whose ops keep their outputs, such as this package's), and
// its gradient is the same op the other way.
//
// A tower's program never writes an op's input in place, so the header is
// safe there however the input is used. gorgonia's tape machine (graphs
// with G.Read or G.Set statements) may: an in-place gorgonia op after the
// header (G.Add of a value nothing else reads) writes through it into the
// input, exactly as after gorgonia's own G.Reshape, which returns a header
// too.
func Reshape(x *G.Node, shape tensor.Shape) (*G.Node, error) {
	const op = "layers.Reshape"
	if x == nil {
		return nil, fmt.Errorf("%s: nil input", op)
	}
	return reshape(op, x, shape)
}

func reshape(op string, x *G.Node, to tensor.Shape) (*G.Node, error) {
	from := x.Shape()
	if from.IsScalar() || len(to) == 0 {
		return nil, fmt.Errorf("%s(%s): shape %v to %v: want tensors of at least one dimension", op, x.Name(), from, to)
	}
	for _, d := range to {
		if d < 1 {
			return nil, fmt.Errorf("%s(%s): shape %v has a non-positive dimension", op, x.Name(), to)
		}
	}
	if from.TotalSize() != to.TotalSize() {
		return nil, fmt.Errorf("%s(%s): input has shape %v (%d elements), want %v (%d)", op, x.Name(), from, from.TotalSize(), to, to.TotalSize())
	}
	out, err := G.ApplyOp(&reshapeOp{from: from.Clone(), to: to.Clone()}, x)
	if err != nil {
		return nil, fmt.Errorf("%s(%s): %w", op, x.Name(), err)
	}
	return out, nil
}

// reshapeOp returns a header of shape to over its input's memory. It
// keeps the header, and where it was made (the input's address and
// dtype), from run to run; a header something reshaped in place gets its
// shape back. An input that is a view (or a header over a larger array)
// is copied into a buffer of the op's own instead.
type reshapeOp struct {
	from, to tensor.Shape
	hdr      *tensor.Dense
	at       uintptr
	own      buffer
}

func (op *reshapeOp) Arity() int { return 1 }

func (op *reshapeOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tensorType(len(op.from), a), tensorType(len(op.to), a))
}

func (op *reshapeOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.to.Clone(), nil }

func (op *reshapeOp) DiffWRT(int) []bool { return []bool{true} }

// ReturnsPtr: the value shares the input's memory.
func (op *reshapeOp) ReturnsPtr() bool     { return true }
func (op *reshapeOp) CallsExtern() bool    { return false }
func (op *reshapeOp) OverwritesInput() int { return -1 }

func (op *reshapeOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(in))
	}
	if !in[0].Shape().Eq(op.from) {
		return nil, fmt.Errorf("%v: input has shape %v, want %v", op, in[0].Shape(), op.from)
	}
	d, ok := in[0].(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("%v: input is a %T, want a *tensor.Dense", op, in[0])
	}
	if d.IsView() || d.IsMaterializable() || !d.DataOrder().IsContiguous() || d.DataSize() != op.from.TotalSize() {
		own := op.own.get(d.Dtype(), op.to)
		if err := tensor.Copy(own, d.Materialize()); err != nil {
			return nil, fmt.Errorf("%v: copy of a view: %w", op, err)
		}
		return own, nil
	}
	if at := d.Uintptr(); op.hdr == nil || op.at != at || op.hdr.Dtype() != d.Dtype() || op.hdr.IsView() {
		op.hdr = tensor.New(tensor.WithShape(op.to.Clone()...), tensor.WithBacking(d.Data()))
		op.at = at
	} else if !op.hdr.Shape().Eq(op.to) {
		if err := op.hdr.Reshape(op.to...); err != nil {
			return nil, fmt.Errorf("%v: %w", op, err)
		}
	}
	return op.hdr, nil
}

func (op *reshapeOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *reshapeOp) Hashcode() uint32      { return hashOf(op) }
func (op *reshapeOp) String() string        { return fmt.Sprintf("ReshapeHeader{%v→%v}", op.from, op.to) }

func (op *reshapeOp) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	d, err := G.ApplyOp(&reshapeOp{from: op.to, to: op.from}, grad)
	if err != nil {
		return nil, fmt.Errorf("%v: gradient: %w", op, err)
	}
	return G.Nodes{d}, nil
}
