package canned

import (
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
)

// rowOp is the one kind of op the heads add to a graph: an op without a
// gradient that maps each example's row of its inputs (every input has
// the batch along dimension 0, any dtype, converted to float64) to a row
// of cols output values, of dtype dtype, shape (batch, cols). The heads use
// it for what only evaluation and prediction read (per-example losses,
// class ids), and to bring labels and example weights to the logits'
// dtype and shape, checking their values, which lie on no variable's
// gradient path. name, with every setting that changes fn, identifies the
// op: gorgonia merges two nodes of equal op hash and inputs.
type rowOp struct {
	name  string
	arity int
	dtype tensor.Dtype
	cols  int
	// fn computes row i of the output from row i of each input; an error
	// names what is wrong with the row.
	fn func(i int, in [][]float64, out []float64) error

	// The op's buffers, kept from run to run (a graph's op runs on its
	// tower's goroutine alone): its inputs as float64, its output values,
	// and its output tensor.
	ins [][]float64
	res []float64
	buf *tensor.Dense
}

// apply adds the op over ins to their graph.
func (op *rowOp) apply(ins ...*G.Node) (*G.Node, error) {
	if len(ins) != op.arity {
		return nil, fmt.Errorf("%s: %d inputs, want %d", op.name, len(ins), op.arity)
	}
	for _, n := range ins {
		if n == nil {
			return nil, fmt.Errorf("%s: nil input", op.name)
		}
		if n.Dims() < 1 {
			return nil, fmt.Errorf("%s: input %s is a scalar, want the batch along dimension 0", op.name, n.Name())
		}
		if n.Shape()[0] != ins[0].Shape()[0] {
			return nil, fmt.Errorf("%s: input %s has %d rows, %s %d", op.name, n.Name(), n.Shape()[0], ins[0].Name(), ins[0].Shape()[0])
		}
	}
	out, err := G.ApplyOp(op, ins...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op.name, err)
	}
	return out, nil
}

func (op *rowOp) Arity() int { return op.arity }

func (op *rowOp) Type() hm.Type {
	ts := make([]hm.Type, 0, op.arity+1)
	for i := 0; i < op.arity; i++ {
		ts = append(ts, hm.TypeVariable(rune('a'+i)))
	}
	ts = append(ts, G.TensorType{Dims: 2, Of: op.dtype})
	return hm.NewFnType(ts...)
}

func (op *rowOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != op.arity {
		return nil, fmt.Errorf("%s: %d input shapes, want %d", op.name, len(in), op.arity)
	}
	s, ok := in[0].(tensor.Shape)
	if !ok || len(s) < 1 {
		return nil, fmt.Errorf("%s: input 0 has shape %v, want the batch along dimension 0", op.name, in[0])
	}
	return tensor.Shape{s[0], op.cols}, nil
}

func (op *rowOp) Do(vals ...G.Value) (G.Value, error) {
	if len(vals) != op.arity {
		return nil, fmt.Errorf("%s: %d inputs, want %d", op.name, len(vals), op.arity)
	}
	rows := vals[0].Shape()[0]
	if len(op.ins) != len(vals) {
		op.ins = make([][]float64, len(vals))
	}
	widths := make([]int, len(vals))
	for k, v := range vals {
		if v.Shape()[0] != rows {
			return nil, fmt.Errorf("%s: input %d has %d rows, input 0 %d", op.name, k, v.Shape()[0], rows)
		}
		var err error
		if op.ins[k], err = float64s(op.ins[k], v); err != nil {
			return nil, fmt.Errorf("%s: input %d: %w", op.name, k, err)
		}
		if rows > 0 {
			widths[k] = len(op.ins[k]) / rows
		}
	}
	op.res = resize(op.res, rows*op.cols)
	row := make([][]float64, len(vals))
	for i := 0; i < rows; i++ {
		for k, in := range op.ins {
			row[k] = in[i*widths[k] : (i+1)*widths[k]]
		}
		if err := op.fn(i, row, op.res[i*op.cols:(i+1)*op.cols]); err != nil {
			return nil, fmt.Errorf("%s: %w", op.name, err)
		}
	}
	if op.buf == nil || op.buf.Shape()[0] != rows {
		op.buf = tensor.New(tensor.Of(op.dtype), tensor.WithShape(rows, op.cols))
	}
	switch d := op.buf.Data().(type) {
	case []int64:
		for i, v := range op.res {
			d[i] = int64(v)
		}
	case []float32:
		for i, v := range op.res {
			d[i] = float32(v)
		}
	case []float64:
		copy(d, op.res)
	default:
		return nil, fmt.Errorf("%s: output dtype %v: want int64, float32 or float64", op.name, op.buf.Dtype())
	}
	return op.buf, nil
}

// float64s returns v's elements as float64 in buf, resized.
func float64s(buf []float64, v G.Value) ([]float64, error) {
	s, err := numeric.Slice(v)
	if err != nil {
		return nil, err
	}
	switch d := s.(type) {
	case []float32:
		buf = resize(buf, len(d))
		for i, x := range d {
			buf[i] = float64(x)
		}
	case []float64:
		buf = resize(buf, len(d))
		copy(buf, d)
	case []int64:
		buf = resize(buf, len(d))
		for i, x := range d {
			buf[i] = float64(x)
		}
	default:
		f, err := numeric.SliceFloat64s(s)
		if err != nil {
			return nil, err
		}
		buf = f
	}
	return buf, nil
}

func resize(buf []float64, n int) []float64 {
	if cap(buf) < n {
		return make([]float64, n)
	}
	return buf[:n]
}

// DiffWRT says that no input gets a gradient through the op.
func (op *rowOp) DiffWRT(n int) []bool { return make([]bool, n) }

// SymDiff is never called: no input gets a gradient through the op.
func (op *rowOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%s has no gradient", op.name)
}

// Movable: the op computes its value from its inputs alone.
func (op *rowOp) Movable() bool { return true }

func (op *rowOp) ReturnsPtr() bool      { return false }
func (op *rowOp) CallsExtern() bool     { return false }
func (op *rowOp) OverwritesInput() int  { return -1 }
func (op *rowOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%s->%v[%d]", op.name, op.dtype, op.cols) }
func (op *rowOp) String() string        { return op.name }

func (op *rowOp) Hashcode() uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}
