package layers

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Concat returns the matrices xs, each (N, Kᵢ) of one float dtype, side by
// side: (N, ΣKᵢ), G.Concat(1, xs...) as one op that copies rows (gorgonia's
// goes element by element through iterators, and its gradient through
// views it then copies). The gradient of xᵢ is its columns of the output's
// gradient.
func Concat(xs ...*G.Node) (*G.Node, error) {
	const op = "layers.Concat"
	if len(xs) == 0 {
		return nil, fmt.Errorf("%s: no inputs", op)
	}
	for i, x := range xs {
		if x == nil {
			return nil, fmt.Errorf("%s: input %d is nil", op, i)
		}
	}
	if err := checkFloat(op, xs...); err != nil {
		return nil, err
	}
	n := -1
	widths := make([]int, len(xs))
	for i, x := range xs {
		s := x.Shape()
		if len(s) != 2 || (n >= 0 && s[0] != n) {
			return nil, fmt.Errorf("%s: %s has shape %v, want (N, K) with N the same for all (%s: %v)", op, x.Name(), s, xs[0].Name(), xs[0].Shape())
		}
		n, widths[i] = s[0], s[1]
	}
	out, err := G.ApplyOp(&concatOp{rows: n, widths: widths}, xs...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// concatOp places its (rows, widths[i]) inputs side by side.
type concatOp struct {
	forwardOp
	rows   int
	widths []int
	out    buffer
}

func (op *concatOp) total() int {
	t := 0
	for _, w := range op.widths {
		t += w
	}
	return t
}

func (op *concatOp) Arity() int { return len(op.widths) }

func (op *concatOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	ts := make([]hm.Type, len(op.widths)+1)
	for i := range ts {
		ts[i] = tensorType(2, a)
	}
	return hm.NewFnType(ts...)
}

func (op *concatOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{op.rows, op.total()}, nil
}

func (op *concatOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != len(op.widths) {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(in), len(op.widths))
	}
	for i, v := range in {
		if s := v.Shape(); len(s) != 2 || s[0] != op.rows || s[1] != op.widths[i] {
			return nil, fmt.Errorf("%v: input %d has shape %v, want (%d, %d)", op, i, s, op.rows, op.widths[i])
		}
	}
	dt := in[0].Dtype()
	return dispatch(op, dt, func() (G.Value, error) { return concatDo[float32](op, in) }, func() (G.Value, error) { return concatDo[float64](op, in) })
}

func concatDo[T float](op *concatOp, in []G.Value) (G.Value, error) {
	out := op.out.get(in[0].Dtype(), tensor.Shape{op.rows, op.total()})
	dst := data[T](out)
	w, at := op.total(), 0
	for i, v := range in {
		src, err := backing[T](fmt.Sprintf("%v: input %d", op, i), v)
		if err != nil {
			return nil, err
		}
		k := op.widths[i]
		for r := range op.rows {
			copy(dst[r*w+at:r*w+at+k], src[r*k:(r+1)*k])
		}
		at += k
	}
	return out, nil
}

func (op *concatOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *concatOp) Hashcode() uint32      { return hashOf(op) }
func (op *concatOp) String() string        { return fmt.Sprintf("ConcatColumns{%d, %v}", op.rows, op.widths) }

func (op *concatOp) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	out := make(G.Nodes, len(in))
	at := 0
	for i, k := range op.widths {
		d, err := G.ApplyOp(&columnsOp{rows: op.rows, width: op.total(), from: at, cols: k}, grad)
		if err != nil {
			return nil, fmt.Errorf("%v: gradient of input %d: %w", op, i, err)
		}
		out[i] = d
		at += k
	}
	return out, nil
}

// columnsOp returns columns [from, from+cols) of its (rows, width) input.
type columnsOp struct {
	gradOp
	rows, width, from, cols int
	out                     buffer
}

func (op *columnsOp) Arity() int { return 1 }

func (op *columnsOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tensorType(2, a), tensorType(2, a))
}

func (op *columnsOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{op.rows, op.cols}, nil
}

func (op *columnsOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(in))
	}
	if s := in[0].Shape(); len(s) != 2 || s[0] != op.rows || s[1] != op.width {
		return nil, fmt.Errorf("%v: input has shape %v, want (%d, %d)", op, s, op.rows, op.width)
	}
	return dispatch(op, in[0].Dtype(), func() (G.Value, error) { return columnsDo[float32](op, in[0]) }, func() (G.Value, error) { return columnsDo[float64](op, in[0]) })
}

func columnsDo[T float](op *columnsOp, v G.Value) (G.Value, error) {
	src, err := backing[T](op.String(), v)
	if err != nil {
		return nil, err
	}
	out := op.out.get(v.Dtype(), tensor.Shape{op.rows, op.cols})
	dst := data[T](out)
	for r := range op.rows {
		copy(dst[r*op.cols:(r+1)*op.cols], src[r*op.width+op.from:r*op.width+op.from+op.cols])
	}
	return out, nil
}

func (op *columnsOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *columnsOp) Hashcode() uint32      { return hashOf(op) }
func (op *columnsOp) String() string {
	return fmt.Sprintf("Columns{%dx%d, [%d, %d)}", op.rows, op.width, op.from, op.from+op.cols)
}
