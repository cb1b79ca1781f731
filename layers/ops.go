package layers

import (
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/chewxy/hm"
	"gonum.org/v1/gonum/blas"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
)

// float is the element types the layers compute in.
type float interface{ float32 | float64 }

// buffer is an op's output, kept from run to run: a tower runs its graph
// again and again with the same shapes, so the memory is allocated once.
// gorgonia may hand the value to a later op of the same run to overwrite
// (once nothing else reads it) or reshape its header in place; both are
// undone here before the next run writes it again.
type buffer struct{ t *tensor.Dense }

func (b *buffer) get(dt tensor.Dtype, shape tensor.Shape) *tensor.Dense {
	switch {
	case b.t == nil || b.t.Dtype() != dt || b.t.Shape().TotalSize() != shape.TotalSize() ||
		b.t.IsMaterializable() || b.t.IsView():
		b.t = tensor.New(tensor.Of(dt), tensor.WithShape(shape.Clone()...))
	case !b.t.Shape().Eq(shape):
		if err := b.t.Reshape(shape...); err != nil {
			b.t = tensor.New(tensor.Of(dt), tensor.WithShape(shape.Clone()...))
		}
	}
	return b.t
}

// backing returns v's elements as a []T, row-major: the backing itself for
// a contiguous tensor, a copy for a view.
// data returns the elements of d, one of an op's own buffers (contiguous,
// of element type T), without the allocation of d.Data().
func data[T float](d *tensor.Dense) []T {
	if s, ok := numeric.Floats[T](d); ok {
		return s
	}
	return d.Data().([]T)
}

func backing[T float](what string, v G.Value) ([]T, error) {
	if s, ok := numeric.Floats[T](v); ok {
		return s, nil
	}
	s, err := numeric.Slice(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	d, ok := s.([]T)
	if !ok {
		var zero T
		return nil, fmt.Errorf("%s: has dtype %v, want %T", what, v.Dtype(), zero)
	}
	return d, nil
}

// backings returns the elements of in[0] and in[1] as backing does, naming
// them a and b in errors.
func backings[T float](in []G.Value, a, b string) ([]T, []T, error) {
	x, err := backing[T](a, in[0])
	if err != nil {
		return nil, nil, err
	}
	y, err := backing[T](b, in[1])
	if err != nil {
		return nil, nil, err
	}
	return x, y, nil
}

// scalar returns the value of a scalar (or one-element) v.
func scalar[T float](what string, v G.Value) (T, error) {
	switch s := v.(type) {
	case *G.F32:
		return T(*s), nil
	case *G.F64:
		return T(*s), nil
	}
	d, err := backing[T](what, v)
	if err != nil {
		return 0, err
	}
	if len(d) != 1 {
		return 0, fmt.Errorf("%s: want a scalar, have shape %v", what, v.Shape())
	}
	return d[0], nil
}

// newScalar returns x as a gorgonia scalar value of x's type.
func newScalar[T float](x T) G.Value {
	switch x := any(x).(type) {
	case float32:
		return G.NewF32(x)
	default:
		return G.NewF64(x.(float64))
	}
}

// gemm computes c = op(a)·op(b) + beta·c for row-major matrices, with op a
// transpose when the flag says so, in the BLAS gorgonia is using.
func gemm[T float](transA, transB bool, m, n, k int, a, b []T, beta T, c []T) {
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	gemmLD(transA, transB, m, n, k, a, lda, b, ldb, beta, c, n)
}

// gemmLD is gemm on matrices whose rows lie lda, ldb and ldc elements
// apart.
func gemmLD[T float](transA, transB bool, m, n, k int, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	ta := G.WhichBLAS()
	tA, tB := blas.NoTrans, blas.NoTrans
	if transA {
		tA = blas.Trans
	}
	if transB {
		tB = blas.Trans
	}
	switch a := any(a).(type) {
	case []float32:
		ta.Sgemm(tA, tB, m, n, k, 1, a, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc)
	case []float64:
		ta.Dgemm(tA, tB, m, n, k, 1, a, lda, any(b).([]float64), ldb, float64(beta), any(c).([]float64), ldc)
	}
}

// gemv sets y = op(a)·x + beta·y for a row-major m×n matrix a, op a
// transpose when trans.
func gemv[T float](trans bool, m, n int, a, x []T, beta T, y []T) {
	if m == 0 || n == 0 {
		if beta == 0 {
			clear(y)
		}
		return
	}
	t := blas.NoTrans
	if trans {
		t = blas.Trans
	}
	b := G.WhichBLAS()
	switch a := any(a).(type) {
	case []float32:
		b.Sgemv(t, m, n, 1, a, n, any(x).([]float32), 1, float32(beta), any(y).([]float32), 1)
	case []float64:
		b.Dgemv(t, m, n, 1, a, n, any(x).([]float64), 1, float64(beta), any(y).([]float64), 1)
	}
}

// dispatch runs f32 or f64 by dtype: the ops compute in float32 and
// float64 only. op names the op in the error, a string or the op itself
// (a fmt.Stringer, formatted only then: an op's String allocates, and Do
// runs every step).
func dispatch(op any, dt tensor.Dtype, f32, f64 func() (G.Value, error)) (G.Value, error) {
	switch dt {
	case tensor.Float32:
		return f32()
	case tensor.Float64:
		return f64()
	}
	return nil, fmt.Errorf("%v: dtype %v: only float32 and float64 are supported", op, dt)
}

// checkFloat is the graph-time dtype check of dispatch.
func checkFloat(op string, ns ...*G.Node) error {
	for _, n := range ns {
		if !numeric.IsFloat(n.Dtype()) {
			return fmt.Errorf("%s: %s has dtype %v: only float32 and float64 are supported", op, n.Name(), n.Dtype())
		}
	}
	for _, n := range ns[1:] {
		if n.Dtype() != ns[0].Dtype() {
			return fmt.Errorf("%s: %s has dtype %v but %s has %v", op, n.Name(), n.Dtype(), ns[0].Name(), ns[0].Dtype())
		}
	}
	return nil
}

// opBase holds what every op here answers the same way. Ops keep their
// output from run to run, so they return neither their input nor a
// pointer into it, and they call BLAS synchronously.
type opBase struct{}

func (opBase) ReturnsPtr() bool     { return false }
func (opBase) CallsExtern() bool    { return false }
func (opBase) OverwritesInput() int { return -1 }

// forwardOp is the part of SDOp a layer's op answers: it is differentiable
// with respect to every input.
type forwardOp struct{ opBase }

func (forwardOp) DiffWRT(n int) []bool {
	d := make([]bool, n)
	for i := range d {
		d[i] = true
	}
	return d
}

// hashOf is Hashcode from WriteHash.
func hashOf(op interface{ WriteHash(hash.Hash) }) uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}

// gradOp is the part of SDOp a gradient op answers: it is not
// differentiated again.
type gradOp struct{ opBase }

func (gradOp) DiffWRT(n int) []bool { return make([]bool, n) }

// Movable: a gradient op computes its value from its arguments and what
// ops before it left (towers.Movable), unless it says otherwise.
func (gradOp) Movable() bool { return true }

func (gradOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("layers: second derivatives are not supported")
}

// tensorType is a gorgonia tensor type of dims dimensions over a.
func tensorType(dims int, a hm.Type) hm.Type {
	if dims == 0 {
		return a
	}
	return G.TensorType{Dims: dims, Of: a}
}

// shapeOf is the shape InferShape is given for input i.
func shapeOf(op string, in []G.DimSizer, i int) (tensor.Shape, error) {
	if i >= len(in) {
		return nil, fmt.Errorf("%s: %d inputs, want at least %d", op, len(in), i+1)
	}
	s, ok := in[i].(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("%s: input %d: want a shape, have %T", op, i, in[i])
	}
	return s, nil
}
