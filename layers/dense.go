package layers

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/vec"
)

// Activation is the function a Dense layer applies to x·kernel + bias.
type Activation int

const (
	// Linear applies nothing: the layer returns x·kernel + bias.
	Linear Activation = iota
	// ReLU returns max(x·kernel + bias, 0).
	ReLU
)

func (a Activation) String() string {
	switch a {
	case Linear:
		return "linear"
	case ReLU:
		return "relu"
	}
	return fmt.Sprintf("Activation(%d)", int(a))
}

// Dense returns act(x·kernel + bias) for a batch x of shape (rows, in), a
// kernel of shape (in, units) and a bias of shape (units), as one op; bias
// may be nil. Its gradients with respect to x, kernel and bias are ops of
// this package too.
func Dense(x, kernel, bias *G.Node, act Activation) (*G.Node, error) {
	const op = "layers.Dense"
	ins, err := layerInputs(op, x, kernel, bias, act)
	if err != nil {
		return nil, err
	}
	d := &denseOp{layer: layer{act: act, bias: bias != nil}}
	shapes := make([]G.DimSizer, len(ins))
	for i, n := range ins {
		shapes[i] = n.Shape()
	}
	if _, err := d.InferShape(shapes...); err != nil {
		return nil, fmt.Errorf("%s(%s, %s): %w", op, x.Name(), kernel.Name(), err)
	}
	out, err := G.ApplyOp(d, ins...)
	if err != nil {
		return nil, fmt.Errorf("%s(%s, %s): %w", op, x.Name(), kernel.Name(), err)
	}
	return out, nil
}

// layerInputs checks a layer's inputs and returns them as the op's: x,
// kernel and the bias unless it is nil.
func layerInputs(op string, x, kernel, bias *G.Node, act Activation) (G.Nodes, error) {
	if x == nil || kernel == nil {
		return nil, fmt.Errorf("%s: nil input or kernel", op)
	}
	if act != Linear && act != ReLU {
		return nil, fmt.Errorf("%s: unknown activation %v", op, act)
	}
	ins := G.Nodes{x, kernel}
	if bias != nil {
		ins = append(ins, bias)
	}
	if err := checkFloat(op, ins...); err != nil {
		return nil, err
	}
	return ins, nil
}

// layer is what the ops of Dense and Conv2D share: an activation, an
// optional bias (a third input) and the output they keep.
type layer struct {
	forwardOp
	act  Activation
	bias bool
	out  buffer
}

func (op *layer) Arity() int {
	if op.bias {
		return 3
	}
	return 2
}

// layerType is the type of a layer whose input and output have dims
// dimensions: (x, kernel[, bias]) → output.
func (op *layer) layerType(dims int) hm.Type {
	a := hm.TypeVariable('a')
	t := tensorType(dims, a)
	if op.bias {
		return hm.NewFnType(t, t, tensorType(1, a), t)
	}
	return hm.NewFnType(t, t, t)
}

// denseOp is act(x·kernel + bias).
type denseOp struct {
	layer
	matMulPrecision
}

func (op *denseOp) Type() hm.Type { return op.layerType(2) }

func (op *denseOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	x, err := shapeOf("dense", in, 0)
	if err != nil {
		return nil, err
	}
	k, err := shapeOf("dense", in, 1)
	if err != nil {
		return nil, err
	}
	if len(x) != 2 {
		return nil, fmt.Errorf("input has shape %v, want (rows, in)", x)
	}
	if len(k) != 2 {
		return nil, fmt.Errorf("kernel has shape %v, want (in, units)", k)
	}
	if x[1] != k[0] {
		return nil, fmt.Errorf("input has shape %v but kernel has %v: input width %d ≠ kernel rows %d", x, k, x[1], k[0])
	}
	if op.bias {
		b, err := shapeOf("dense", in, 2)
		if err != nil {
			return nil, err
		}
		if len(b) != 1 || b[0] != k[1] {
			return nil, fmt.Errorf("bias has shape %v, want (%d) for kernel %v", b, k[1], k)
		}
	}
	return tensor.Shape{x[0], k[1]}, nil
}

func (op *denseOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(in), op.Arity())
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return denseDo[float32](op, in) },
		func() (G.Value, error) { return denseDo[float64](op, in) })
}

func denseDo[T float](op *denseOp, in []G.Value) (G.Value, error) {
	s, err := op.InferShape(in[0].Shape(), in[1].Shape(), biasShape(in))
	if err != nil {
		return nil, fmt.Errorf("%v: %w", op, err)
	}
	x, k, err := backings[T](in, "input", "kernel")
	if err != nil {
		return nil, err
	}
	out := op.out.get(in[0].Dtype(), s)
	o := data[T](out)
	rows, inner, units := s[0], in[0].Shape()[1], s[1]
	if err := gemmPrec(op.bf16, false, false, rows, units, inner, x, k, 0, o); err != nil {
		return nil, fmt.Errorf("%v: %w", op, err)
	}
	switch {
	case op.bias:
		b, err := backing[T]("bias", in[2])
		if err != nil {
			return nil, err
		}
		addBias(o, b, op.act == ReLU)
	case op.act == ReLU:
		vec.ReLU(o, o)
	}
	return out, nil
}

// addBias adds b to every row of o (len(b) columns), rectifying when relu:
// one pass over the product, where a broadcast copy of the bias before it
// and a rectifier after it would be two.
func addBias[T float](o, b []T, relu bool) {
	for r := 0; r+len(b) <= len(o); r += len(b) {
		row := o[r : r+len(b)]
		vec.Add(row, row, b, relu)
	}
}

// biasShape is the shape of the bias input, or nil without one.
func biasShape(in []G.Value) G.DimSizer {
	if len(in) < 3 {
		return tensor.Shape(nil)
	}
	return in[2].Shape()
}

func (op *denseOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *denseOp) Hashcode() uint32      { return hashOf(op) }
func (op *denseOp) String() string {
	return fmt.Sprintf("Dense{%v, bias=%t}", op.act, op.bias)
}

// SymDiff: with dz = grad ⊙ act′(z) (z = x·kernel + bias), the gradients are
// dz·kernelᵀ, xᵀ·dz and the column sums of dz.
func (op *denseOp) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(in), op.Arity())
	}
	return layerGrads(op, op.act, 2, op.bias, false, output, grad,
		func(dz *G.Node) (*G.Node, error) { return G.ApplyOp(&matMulOp{transB: true}, dz, in[1]) },
		func(dz *G.Node) (*G.Node, error) { return G.ApplyOp(&matMulOp{transA: true}, in[0], dz) })
}

// layerGrads returns the gradients of a layer act(z), z = x∘kernel + bias,
// of dims dimensions, given its output and the gradient grad flowing into
// it: with dz = grad ⊙ act′(z), the gradients with respect to x and the
// kernel that dx and dk make of dz, and with a bias the sums of dz over
// every axis but 1, or with last every axis but the last (channels last).
func layerGrads(op fmt.Stringer, act Activation, dims int, bias, last bool, output, grad *G.Node, dx, dk func(dz *G.Node) (*G.Node, error)) (G.Nodes, error) {
	dz := grad
	if act == ReLU {
		var err error
		if dz, err = G.ApplyOp(&reluGradOp{dims: dims}, output, grad); err != nil {
			return nil, fmt.Errorf("%v: relu gradient: %w", op, err)
		}
	}
	gx, err := dx(dz)
	if err != nil {
		return nil, fmt.Errorf("%v: input gradient: %w", op, err)
	}
	gk, err := dk(dz)
	if err != nil {
		return nil, fmt.Errorf("%v: kernel gradient: %w", op, err)
	}
	grads := G.Nodes{gx, gk}
	if bias {
		gb, err := G.ApplyOp(&sumOp{dims: dims, last: last}, dz)
		if err != nil {
			return nil, fmt.Errorf("%v: bias gradient: %w", op, err)
		}
		grads = append(grads, gb)
	}
	return grads, nil
}

// matMulOp is op(a)·op(b), op a transpose where the flags say so.
type matMulOp struct {
	gradOp
	transA, transB bool
	out            buffer
	matMulPrecision
}

func (op *matMulOp) Arity() int { return 2 }

func (op *matMulOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tensorType(2, a), tensorType(2, a), tensorType(2, a))
}

// dims returns m, n, k of op(a) (m×k) · op(b) (k×n).
func (op *matMulOp) dims(a, b tensor.Shape) (m, n, k int, err error) {
	if len(a) != 2 || len(b) != 2 {
		return 0, 0, 0, fmt.Errorf("%v: shapes %v and %v: want matrices", op, a, b)
	}
	m, k = a[0], a[1]
	if op.transA {
		m, k = k, m
	}
	kb, n := b[0], b[1]
	if op.transB {
		kb, n = n, kb
	}
	if k != kb {
		return 0, 0, 0, fmt.Errorf("%v: shapes %v and %v: inner dimensions %d ≠ %d", op, a, b, k, kb)
	}
	return m, n, k, nil
}

func (op *matMulOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	a, err := shapeOf("matmul", in, 0)
	if err != nil {
		return nil, err
	}
	b, err := shapeOf("matmul", in, 1)
	if err != nil {
		return nil, err
	}
	m, n, _, err := op.dims(a, b)
	if err != nil {
		return nil, err
	}
	return tensor.Shape{m, n}, nil
}

func (op *matMulOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", op, len(in))
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return matMulDo[float32](op, in) },
		func() (G.Value, error) { return matMulDo[float64](op, in) })
}

func matMulDo[T float](op *matMulOp, in []G.Value) (G.Value, error) {
	m, n, k, err := op.dims(in[0].Shape(), in[1].Shape())
	if err != nil {
		return nil, err
	}
	a, b, err := backings[T](in, "a", "b")
	if err != nil {
		return nil, err
	}
	out := op.out.get(in[0].Dtype(), tensor.Shape{m, n})
	if err := gemmPrec(op.bf16, op.transA, op.transB, m, n, k, a, b, 0, data[T](out)); err != nil {
		return nil, fmt.Errorf("%v: %w", op, err)
	}
	return out, nil
}

func (op *matMulOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *matMulOp) Hashcode() uint32      { return hashOf(op) }
func (op *matMulOp) String() string {
	return fmt.Sprintf("MatMul{transA=%t, transB=%t}", op.transA, op.transB)
}

// sumOp sums over every axis but 1: (N, F, ...) → (F). For a matrix these
// are its column sums (a dense layer's bias gradient), for (N, F, H, W) the
// sums over images and positions (a convolution's). With last it sums over
// every axis but the last, (..., F) → (F): the column sums of the rows of
// F (an NHWC convolution's bias gradient). Each is a product with a vector
// of ones, in BLAS.
type sumOp struct {
	gradOp
	dims int
	last bool
	out  buffer
	ones buffer
}

func (op *sumOp) Arity() int { return 1 }

func (op *sumOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tensorType(op.dims, a), tensorType(1, a))
}

func (op *sumOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf("sum", in, 0)
	if err != nil {
		return nil, err
	}
	if len(s) != op.dims || len(s) < 2 {
		return nil, fmt.Errorf("sum: shape %v, want %d dimensions", s, op.dims)
	}
	if op.last {
		return tensor.Shape{s[len(s)-1]}, nil
	}
	return tensor.Shape{s[1]}, nil
}

func (op *sumOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(in))
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return sumDo[float32](op, in[0]) },
		func() (G.Value, error) { return sumDo[float64](op, in[0]) })
}

func sumDo[T float](op *sumOp, in G.Value) (G.Value, error) {
	s, err := op.InferShape(in.Shape())
	if err != nil {
		return nil, err
	}
	a, err := backing[T]("input", in)
	if err != nil {
		return nil, err
	}
	sh := in.Shape()
	n, f, rest := sh[0], sh[1], sh[2:].TotalSize()
	if op.last { // rows of F
		n, f, rest = sh[:len(sh)-1].TotalSize(), sh[len(sh)-1], 1
	}
	out := op.out.get(in.Dtype(), s)
	o := data[T](out)
	ones := data[T](op.ones.get(in.Dtype(), tensor.Shape{max(n, rest)}))
	if len(ones) > 0 && ones[0] != 1 {
		for i := range ones {
			ones[i] = 1
		}
	}
	if len(sh) == 2 || op.last {
		gemv(true, n, f, a, ones[:n], 0, o) // aᵀ·1
		return out, nil
	}
	clear(o)
	for i := range n {
		gemv(false, f, rest, a[i*f*rest:(i+1)*f*rest], ones[:rest], 1, o)
	}
	return out, nil
}

func (op *sumOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *sumOp) Hashcode() uint32      { return hashOf(op) }
func (op *sumOp) String() string {
	if op.last {
		return fmt.Sprintf("Sum{%d, last}", op.dims)
	}
	return fmt.Sprintf("Sum{%d}", op.dims)
}
