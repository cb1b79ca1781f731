package layers

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/dnnl"
	"github.com/towerflow/towerflow/internal/vec"
	"github.com/towerflow/towerflow/towers"
)

// Conv configures Conv2D: the stride and the zero padding along height and
// width, the activation, and the order of the images' dimensions. A zero
// stride is 1.
type Conv struct {
	Stride     [2]int
	Padding    [2]int
	Activation Activation
	// Format is the order of the input x and of the output: NCHW (the
	// zero value) or NHWC. The kernel is (F, C, KH, KW) in both (see
	// Format for what else a change of order changes).
	Format Format
}

// Conv2D returns act(x ⋆ kernel + bias), the 2-D cross-correlation gorgonia's
// G.Conv2d computes (no dilation), for a batch x of shape (N, C, H, W), a
// kernel of shape (F, C, KH, KW) and a bias of shape (F) or nil, as one op
// with the bias and activation fused. The output has shape (N, F, OH, OW)
// with OH = (H + 2·padding − KH)/stride + 1, likewise OW. With c.Format
// NHWC, x is (N, H, W, C) and the output (N, OH, OW, F); the kernel is the
// same.
//
// With stride 1, the batch is copied into a zero-padded layout a few images
// at a time and multiplied by the kernel one tap at a time, KH·KW BLAS calls
// reading the padded images in place (convtaps.go); with a larger stride,
// each image is unfolded (im2col) and multiplied by the kernel in one BLAS
// call. Nothing is allocated per run (the padded copies and the unfolded
// images are scratch shared by every convolution), where G.Conv2d allocates
// the unfolded batch, the product and a transposed copy every run. An NHWC
// batch is transposed to NCHW in scratch, computed as above and its result
// transposed back, giving the NCHW op's bits; oneDNN (-tags dnnl) computes
// on NHWC batches in place, where it reorders NCHW ones into its blocked
// layout and back on every pass: NHWC is the faster order there.
func Conv2D(x, kernel, bias *G.Node, c Conv) (*G.Node, error) {
	const op = "layers.Conv2D"
	ins, err := layerInputs(op, x, kernel, bias, c.Activation)
	if err != nil {
		return nil, err
	}
	geo, err := newConvGeom(x.Shape(), kernel.Shape(), c)
	if err != nil {
		return nil, fmt.Errorf("%s(%s, %s): %w", op, x.Name(), kernel.Name(), err)
	}
	if bias != nil && !bias.Shape().Eq(tensor.Shape{geo.f}) {
		return nil, fmt.Errorf("%s(%s, %s): bias %s has shape %v, want (%d)", op, x.Name(), kernel.Name(), bias.Name(), bias.Shape(), geo.f)
	}
	out, err := G.ApplyOp(&convOp{layer: layer{act: c.Activation, bias: bias != nil}, geo: geo}, ins...)
	if err != nil {
		return nil, fmt.Errorf("%s(%s, %s): %w", op, x.Name(), kernel.Name(), err)
	}
	return out, nil
}

// convGeom is the shapes of one convolution.
type convGeom struct {
	n, c, h, w int // input
	f, kh, kw  int // kernel
	sh, sw     int // stride
	ph, pw     int // padding
	oh, ow     int // output
	format     Format
}

func newConvGeom(x, k tensor.Shape, c Conv) (convGeom, error) {
	if err := c.Format.check(); err != nil {
		return convGeom{}, err
	}
	if len(x) != 4 {
		return convGeom{}, fmt.Errorf("input has shape %v, want %s", x, c.Format.want())
	}
	if len(k) != 4 {
		return convGeom{}, fmt.Errorf("kernel has shape %v, want (F, C, KH, KW)", k)
	}
	n, ch, h, w := c.Format.dims(x)
	if ch != k[1] {
		return convGeom{}, fmt.Errorf("input has shape %v %s but kernel has %v: %d input channels ≠ %d", x, c.Format.want(), k, ch, k[1])
	}
	if ch < 1 || k[0] < 1 {
		return convGeom{}, fmt.Errorf("input %v %s and kernel %v: %d input channels, %d filters; want at least 1 of each", x, c.Format.want(), k, ch, k[0])
	}
	g := convGeom{n: n, c: ch, h: h, w: w, f: k[0], kh: k[2], kw: k[3],
		sh: max(c.Stride[0], 1), sw: max(c.Stride[1], 1), ph: c.Padding[0], pw: c.Padding[1], format: c.Format}
	if c.Stride[0] < 0 || c.Stride[1] < 0 || g.ph < 0 || g.pw < 0 {
		return convGeom{}, fmt.Errorf("stride %v, padding %v: want no negative values", c.Stride, c.Padding)
	}
	g.oh = (g.h+2*g.ph-g.kh)/g.sh + 1
	g.ow = (g.w+2*g.pw-g.kw)/g.sw + 1
	if g.kh < 1 || g.kw < 1 || g.h+2*g.ph < g.kh || g.w+2*g.pw < g.kw {
		return convGeom{}, fmt.Errorf("kernel %v does not fit input %v padded by %v", k, x, c.Padding)
	}
	return g, nil
}

func (g convGeom) in() tensor.Shape     { return g.format.shape(g.n, g.c, g.h, g.w) }
func (g convGeom) kernel() tensor.Shape { return tensor.Shape{g.f, g.c, g.kh, g.kw} }
func (g convGeom) out() tensor.Shape    { return g.format.shape(g.n, g.f, g.oh, g.ow) }
func (g convGeom) ckk() int             { return g.c * g.kh * g.kw }
func (g convGeom) ohw() int             { return g.oh * g.ow }
func (g convGeom) strideOne() bool      { return g.sh == 1 && g.sw == 1 }
func (g convGeom) String() string {
	s := fmt.Sprintf("%v⋆%v stride (%d, %d) padding (%d, %d)", g.in(), g.kernel(), g.sh, g.sw, g.ph, g.pw)
	if g.format != NCHW {
		s += " " + g.format.String()
	}
	return s
}

// check verifies that shapes are the geometry's, in order.
func (g convGeom) check(got []tensor.Shape, want ...tensor.Shape) error {
	for i, w := range want {
		if !got[i].Eq(w) {
			return fmt.Errorf("conv %v: input %d has shape %v, want %v", g, i, got[i], w)
		}
	}
	return nil
}

// inside returns the output columns [lo, hi) at which kernel column j sees
// the image rather than its padding: 0 ≤ ox·sw − pw + j < W.
func (g convGeom) inside(j int) (lo, hi int) {
	lo = min(max((g.pw-j+g.sw-1)/g.sw, 0), g.ow)
	hi = max(min((g.w+g.pw-j+g.sw-1)/g.sw, g.ow), lo)
	return lo, hi
}

// im2col unfolds one image x (C×H×W) into cols (C·KH·KW × OH·OW): row
// (c, i, j) holds, for every output position, the input element the kernel
// tap (c, i, j) sees there, or 0 in the padding.
func im2col[T float](g convGeom, x, cols []T) {
	ohw, r := g.ohw(), 0
	for c := range g.c {
		plane := x[c*g.h*g.w : (c+1)*g.h*g.w]
		for i := range g.kh {
			for j := range g.kw {
				row := cols[r*ohw : (r+1)*ohw]
				r++
				lo, hi := g.inside(j)
				for oy := range g.oh {
					dst := row[oy*g.ow : (oy+1)*g.ow]
					iy := oy*g.sh - g.ph + i
					if iy < 0 || iy >= g.h {
						clear(dst)
						continue
					}
					src := plane[iy*g.w : (iy+1)*g.w]
					clear(dst[:lo])
					for ox, ix := lo, lo*g.sw-g.pw+j; ox < hi; ox, ix = ox+1, ix+g.sw {
						dst[ox] = src[ix]
					}
					clear(dst[hi:])
				}
			}
		}
	}
}

// col2im is im2col's adjoint: it adds every element of cols to the input
// element it was unfolded from, into x (C×H×W, zeroed by the caller).
func col2im[T float](g convGeom, cols, x []T) {
	ohw, r := g.ohw(), 0
	for c := range g.c {
		plane := x[c*g.h*g.w : (c+1)*g.h*g.w]
		for i := range g.kh {
			for j := range g.kw {
				row := cols[r*ohw : (r+1)*ohw]
				r++
				lo, hi := g.inside(j)
				for oy := range g.oh {
					iy := oy*g.sh - g.ph + i
					if iy < 0 || iy >= g.h {
						continue
					}
					src := row[oy*g.ow : (oy+1)*g.ow]
					dst := plane[iy*g.w : (iy+1)*g.w]
					for ox, ix := lo, lo*g.sw-g.pw+j; ox < hi; ox, ix = ox+1, ix+g.sw {
						dst[ix] += src[ox]
					}
				}
			}
		}
	}
}

// convOp is act(x ⋆ kernel + bias).
type convOp struct {
	layer
	convPrecision
	convSharing
	geo convGeom
}

func (op *convOp) Type() hm.Type { return op.layerType(4) }

func (op *convOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(in), op.Arity())
	}
	return op.geo.out(), nil
}

func (op *convOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(in), op.Arity())
	}
	shapes := []tensor.Shape{in[0].Shape(), in[1].Shape()}
	if err := op.geo.check(shapes, op.geo.in(), op.geo.kernel()); err != nil {
		return nil, err
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return convDo[float32](op, in) },
		func() (G.Value, error) { return convDo[float64](op, in) })
}

func convDo[T float](op *convOp, in []G.Value) (G.Value, error) {
	g := op.geo
	x, k, err := backings[T](in, "input", "kernel")
	if err != nil {
		return nil, err
	}
	var b []T
	if op.bias {
		if b, err = backing[T]("bias", in[2]); err != nil {
			return nil, err
		}
		if len(b) != g.f {
			return nil, fmt.Errorf("%v: bias has %d elements, want %d", op, len(b), g.f)
		}
	}
	out := op.out.get(in[0].Dtype(), g.out())
	o := data[T](out)
	if g.n == 0 {
		return out, nil
	}
	if done, err := convOneDNN(g, dnnl.Forward, op.bias, op.act == ReLU, op.bf16, &op.convSharing, x, k, b, o); done {
		if err != nil {
			return nil, fmt.Errorf("%v: %w", op, err)
		}
		return out, nil
	}
	if g.format == NHWC {
		convNHWC(g, x, k, b, o, op.act == ReLU)
		return out, nil
	}
	convGo(g, x, k, b, o, op.act == ReLU)
	return out, nil
}

// convGo sets o = act(x ⋆ k + b) (b nil: no bias) for NCHW x and o, in
// this package's own code.
func convGo[T float](g convGeom, x, k, b, o []T, relu bool) {
	if g.strideOne() {
		convTaps(g, x, k, b, o, relu)
		return
	}
	cols := borrow[T](g.ckk() * g.ohw())
	defer giveBack(cols)
	inSize, outSize, ohw := g.c*g.h*g.w, g.f*g.ohw(), g.ohw()
	for n := range g.n {
		im2col(g, x[n*inSize:(n+1)*inSize], cols)
		on := o[n*outSize : (n+1)*outSize]
		gemm(false, false, g.f, ohw, g.ckk(), k, cols, 0, on)
		switch {
		case b != nil:
			for f := range g.f {
				plane := on[f*ohw : (f+1)*ohw]
				addConst(plane, plane, b[f], relu)
			}
		case relu:
			vec.ReLU(on, on)
		}
	}
}

func (op *convOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *convOp) Hashcode() uint32      { return hashOf(op) }
func (op *convOp) String() string {
	return fmt.Sprintf("Conv2D{%v, %v, bias=%t}", op.geo, op.act, op.bias)
}

// SymDiff: with dz = grad ⊙ act′(z), the kernel's gradient sums dz_n ·
// im2col(x_n)ᵀ over images, the bias's sums dz over images and positions,
// and the input's folds kernelᵀ·dz_n back (col2im).
func (op *convOp) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(in), op.Arity())
	}
	return layerGrads(op, op.act, 4, op.bias, op.geo.format == NHWC, output, grad,
		func(dz *G.Node) (*G.Node, error) { return G.ApplyOp(&convGradOp{geo: op.geo, input: true}, in[1], dz) },
		func(dz *G.Node) (*G.Node, error) { return G.ApplyOp(&convGradOp{geo: op.geo}, in[0], dz) })
}

// convGradOp is a gradient of a convolution: with input kernel false,
// Σ_n dz_n · im2col(x_n)ᵀ shaped as the kernel (inputs x and dz); with
// input true, col2im(kernelᵀ·dz_n) for every image (inputs kernel and dz).
type convGradOp struct {
	gradOp
	geo   convGeom
	input bool
	out   buffer
	convPrecision
	convSharing // the input's gradient only
}

func (op *convGradOp) Arity() int { return 2 }

// ShareOn (towers.Sharing) shares the input's gradient only: the kernel's
// adds its chunks up in order.
func (op *convGradOp) ShareOn(b *towers.Board, tower int) {
	if op.input {
		op.convSharing.ShareOn(b, tower)
	}
}

func (op *convGradOp) Type() hm.Type {
	t4 := tensorType(4, hm.TypeVariable('a'))
	return hm.NewFnType(t4, t4, t4)
}

// shapes returns the shapes of the first input and of the result.
func (op *convGradOp) shapes() (first, result tensor.Shape) {
	if op.input {
		return op.geo.kernel(), op.geo.in()
	}
	return op.geo.in(), op.geo.kernel()
}

func (op *convGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	_, r := op.shapes()
	return r, nil
}

func (op *convGradOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", op, len(in))
	}
	first, _ := op.shapes()
	if err := op.geo.check([]tensor.Shape{in[0].Shape(), in[1].Shape()}, first, op.geo.out()); err != nil {
		return nil, err
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return convGradDo[float32](op, in) },
		func() (G.Value, error) { return convGradDo[float64](op, in) })
}

func convGradDo[T float](op *convGradOp, in []G.Value) (G.Value, error) {
	g := op.geo
	a, dz, err := backings[T](in, "input 0", "gradient")
	if err != nil {
		return nil, err
	}
	_, shape := op.shapes()
	out := op.out.get(in[0].Dtype(), shape)
	o := data[T](out)
	switch {
	case g.n == 0:
		clear(o)
		return out, nil
	}
	pass, in0, in1 := dnnl.KernelGrad, a, dz // (x, dz)
	if op.input {
		pass, in0, in1 = dnnl.InputGrad, dz, a // (dz, kernel)
	}
	if done, err := convOneDNN(g, pass, false, false, op.bf16, &op.convSharing, in0, in1, nil, o); done {
		if err != nil {
			return nil, fmt.Errorf("%v: %w", op, err)
		}
		return out, nil
	}
	if g.format == NHWC {
		convGradNHWC(g, op.input, a, dz, o)
		return out, nil
	}
	convGradGo(g, op.input, a, dz, o)
	return out, nil
}

// convGradGo sets o to the input's gradient (input: from the kernel a and
// dz) or the kernel's (from x a and dz), for NCHW x and dz, in this
// package's own code.
func convGradGo[T float](g convGeom, input bool, a, dz, o []T) {
	switch {
	case g.strideOne() && input:
		convTapsInputGrad(g, a, dz, o)
		return
	case g.strideOne():
		convTapsKernelGrad(g, a, dz, o)
		return
	}
	clear(o)
	cols := borrow[T](g.ckk() * g.ohw())
	defer giveBack(cols)
	inSize, outSize := g.c*g.h*g.w, g.f*g.ohw()
	for n := range g.n {
		dzn := dz[n*outSize : (n+1)*outSize]
		if input { // a is the kernel
			gemm(true, false, g.ckk(), g.ohw(), g.f, a, dzn, 0, cols)
			col2im(g, cols, o[n*inSize:(n+1)*inSize])
			continue
		}
		im2col(g, a[n*inSize:(n+1)*inSize], cols) // a is x
		gemm(false, true, g.f, g.ckk(), g.ohw(), dzn, cols, 1, o)
	}
}

func (op *convGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *convGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *convGradOp) String() string {
	if op.input {
		return fmt.Sprintf("Conv2DInputGrad{%v}", op.geo)
	}
	return fmt.Sprintf("Conv2DKernelGrad{%v}", op.geo)
}

// addConst sets d[i] = s[i] + c, then max(d[i], 0) when relu: a channel's
// bias over one plane (or row) of a convolution's output, in one call where
// addBias would take each element as a row. vec.Affine with m = 0 and s =
// g = 1 computes 1·((v − 0)·1) + c, which is v + c bit for bit.
func addConst[T float](d, s []T, c T, relu bool) {
	vec.Affine(d, s, 0, 1, 1, c, relu)
}
