package layers

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Conv configures Conv2D: the stride and the zero padding along height and
// width, and the activation. A zero stride is 1.
type Conv struct {
	Stride     [2]int
	Padding    [2]int
	Activation Activation
}

// Conv2D returns act(x ⋆ kernel + bias), the 2-D cross-correlation gorgonia's
// G.Conv2d computes (no dilation), for a batch x of shape (N, C, H, W), a
// kernel of shape (F, C, KH, KW) and a bias of shape (F) or nil, as one op
// with the bias and activation fused. The output has shape (N, F, OH, OW)
// with OH = (H + 2·padding − KH)/stride + 1, likewise OW.
//
// Each image is unfolded (im2col) into a buffer the op keeps, and
// multiplied by the kernel in one BLAS call, which writes the image's output
// channels in place: nothing is allocated per run, where G.Conv2d allocates
// the unfolded batch, the product and a transposed copy every run.
func Conv2D(x, kernel, bias *G.Node, c Conv) (*G.Node, error) {
	const op = "layers.Conv2D"
	if x == nil || kernel == nil {
		return nil, fmt.Errorf("%s: nil input or kernel", op)
	}
	if c.Activation != Linear && c.Activation != ReLU {
		return nil, fmt.Errorf("%s: unknown activation %v", op, c.Activation)
	}
	ins := G.Nodes{x, kernel}
	if bias != nil {
		ins = append(ins, bias)
	}
	if err := checkFloat(op, ins...); err != nil {
		return nil, err
	}
	geo, err := newConvGeom(x.Shape(), kernel.Shape(), c)
	if err != nil {
		return nil, fmt.Errorf("%s(%s, %s): %w", op, x.Name(), kernel.Name(), err)
	}
	if bias != nil && !bias.Shape().Eq(tensor.Shape{geo.f}) {
		return nil, fmt.Errorf("%s(%s, %s): bias %s has shape %v, want (%d)", op, x.Name(), kernel.Name(), bias.Name(), bias.Shape(), geo.f)
	}
	out, err := G.ApplyOp(&convOp{geo: geo, act: c.Activation, bias: bias != nil}, ins...)
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
}

func newConvGeom(x, k tensor.Shape, c Conv) (convGeom, error) {
	if len(x) != 4 {
		return convGeom{}, fmt.Errorf("input has shape %v, want (N, C, H, W)", x)
	}
	if len(k) != 4 {
		return convGeom{}, fmt.Errorf("kernel has shape %v, want (F, C, KH, KW)", k)
	}
	if x[1] != k[1] {
		return convGeom{}, fmt.Errorf("input has shape %v but kernel has %v: %d input channels ≠ %d", x, k, x[1], k[1])
	}
	g := convGeom{n: x[0], c: x[1], h: x[2], w: x[3], f: k[0], kh: k[2], kw: k[3],
		sh: max(c.Stride[0], 1), sw: max(c.Stride[1], 1), ph: c.Padding[0], pw: c.Padding[1]}
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

func (g convGeom) in() tensor.Shape     { return tensor.Shape{g.n, g.c, g.h, g.w} }
func (g convGeom) kernel() tensor.Shape { return tensor.Shape{g.f, g.c, g.kh, g.kw} }
func (g convGeom) out() tensor.Shape    { return tensor.Shape{g.n, g.f, g.oh, g.ow} }
func (g convGeom) ckk() int             { return g.c * g.kh * g.kw }
func (g convGeom) ohw() int             { return g.oh * g.ow }
func (g convGeom) String() string {
	return fmt.Sprintf("%v⋆%v stride (%d, %d) padding (%d, %d)", g.in(), g.kernel(), g.sh, g.sw, g.ph, g.pw)
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
				for oy := range g.oh {
					dst := row[oy*g.ow : (oy+1)*g.ow]
					iy := oy*g.sh - g.ph + i
					if iy < 0 || iy >= g.h {
						clear(dst)
						continue
					}
					src := plane[iy*g.w : (iy+1)*g.w]
					if g.sw == 1 {
						// ix = ox − pw + j is in the image for ox in [lo, hi).
						lo := min(max(g.pw-j, 0), g.ow)
						hi := max(min(g.w+g.pw-j, g.ow), lo)
						clear(dst[:lo])
						if hi > lo {
							copy(dst[lo:hi], src[lo-g.pw+j:hi-g.pw+j])
						}
						clear(dst[hi:])
						continue
					}
					for ox := range dst {
						if ix := ox*g.sw - g.pw + j; ix >= 0 && ix < g.w {
							dst[ox] = src[ix]
						} else {
							dst[ox] = 0
						}
					}
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
				for oy := range g.oh {
					iy := oy*g.sh - g.ph + i
					if iy < 0 || iy >= g.h {
						continue
					}
					src := row[oy*g.ow : (oy+1)*g.ow]
					dst := plane[iy*g.w : (iy+1)*g.w]
					if g.sw == 1 {
						lo := min(max(g.pw-j, 0), g.ow)
						hi := max(min(g.w+g.pw-j, g.ow), lo)
						d := dst[lo-g.pw+j : hi-g.pw+j]
						for k, v := range src[lo:hi] {
							d[k] += v
						}
						continue
					}
					for ox, v := range src {
						if ix := ox*g.sw - g.pw + j; ix >= 0 && ix < g.w {
							dst[ix] += v
						}
					}
				}
			}
		}
	}
}

// convOp is act(x ⋆ kernel + bias).
type convOp struct {
	opBase
	geo  convGeom
	act  Activation
	bias bool
	out  buffer
	cols buffer
}

func (op *convOp) Arity() int {
	if op.bias {
		return 3
	}
	return 2
}

func (op *convOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	t4 := tensorType(4, a)
	if op.bias {
		return hm.NewFnType(t4, t4, tensorType(1, a), t4)
	}
	return hm.NewFnType(t4, t4, t4)
}

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
	return dispatch(op.String(), in[0].Dtype(),
		func() (G.Value, error) { return convDo[float32](op, in) },
		func() (G.Value, error) { return convDo[float64](op, in) })
}

func convDo[T float](op *convOp, in []G.Value) (G.Value, error) {
	g := op.geo
	x, err := backing[T]("input", in[0])
	if err != nil {
		return nil, err
	}
	k, err := backing[T]("kernel", in[1])
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
	o := out.Data().([]T)
	cols := op.cols.get(in[0].Dtype(), tensor.Shape{g.ckk(), g.ohw()}).Data().([]T)
	inSize, outSize, ohw := g.c*g.h*g.w, g.f*g.ohw(), g.ohw()
	for n := range g.n {
		im2col(g, x[n*inSize:(n+1)*inSize], cols)
		on := o[n*outSize : (n+1)*outSize]
		gemm(false, false, g.f, ohw, g.ckk(), k, cols, 0, on)
		switch {
		case op.bias:
			for f := range g.f {
				addBias(on[f*ohw:(f+1)*ohw], b[f:f+1], op.act == ReLU)
			}
		case op.act == ReLU:
			rectify(on, on)
		}
	}
	return out, nil
}

func (op *convOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *convOp) Hashcode() uint32      { return hashOf(op) }
func (op *convOp) String() string {
	return fmt.Sprintf("Conv2D{%v, %v, bias=%t}", op.geo, op.act, op.bias)
}

func (op *convOp) DiffWRT(n int) []bool {
	d := make([]bool, n)
	for i := range d {
		d[i] = true
	}
	return d
}

// SymDiff: with dz = grad ⊙ act′(z), the kernel's gradient sums dz_n ·
// im2col(x_n)ᵀ over images, the bias's sums dz over images and positions,
// and the input's folds kernelᵀ·dz_n back (col2im).
func (op *convOp) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(in), op.Arity())
	}
	dz := grad
	if op.act == ReLU {
		var err error
		if dz, err = G.ApplyOp(&reluGradOp{dims: 4}, output, grad); err != nil {
			return nil, fmt.Errorf("%v: relu gradient: %w", op, err)
		}
	}
	dx, err := G.ApplyOp(&convInputGradOp{geo: op.geo}, in[1], dz)
	if err != nil {
		return nil, fmt.Errorf("%v: input gradient: %w", op, err)
	}
	dk, err := G.ApplyOp(&convKernelGradOp{geo: op.geo}, in[0], dz)
	if err != nil {
		return nil, fmt.Errorf("%v: kernel gradient: %w", op, err)
	}
	grads := G.Nodes{dx, dk}
	if op.bias {
		db, err := G.ApplyOp(&channelSumOp{}, dz)
		if err != nil {
			return nil, fmt.Errorf("%v: bias gradient: %w", op, err)
		}
		grads = append(grads, db)
	}
	return grads, nil
}

// convKernelGradOp is Σ_n dz_n · im2col(x_n)ᵀ, reshaped as the kernel:
// inputs x and dz.
type convKernelGradOp struct {
	gradOp
	geo  convGeom
	out  buffer
	cols buffer
}

func (op *convKernelGradOp) Arity() int { return 2 }

func (op *convKernelGradOp) Type() hm.Type {
	t4 := tensorType(4, hm.TypeVariable('a'))
	return hm.NewFnType(t4, t4, t4)
}

func (op *convKernelGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return op.geo.kernel(), nil
}

func (op *convKernelGradOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", op, len(in))
	}
	if err := op.geo.check([]tensor.Shape{in[0].Shape(), in[1].Shape()}, op.geo.in(), op.geo.out()); err != nil {
		return nil, err
	}
	return dispatch(op.String(), in[0].Dtype(),
		func() (G.Value, error) { return convKernelGradDo[float32](op, in) },
		func() (G.Value, error) { return convKernelGradDo[float64](op, in) })
}

func convKernelGradDo[T float](op *convKernelGradOp, in []G.Value) (G.Value, error) {
	g := op.geo
	x, err := backing[T]("input", in[0])
	if err != nil {
		return nil, err
	}
	dz, err := backing[T]("gradient", in[1])
	if err != nil {
		return nil, err
	}
	out := op.out.get(in[0].Dtype(), g.kernel())
	o := out.Data().([]T)
	if g.n == 0 {
		clear(o)
	}
	cols := op.cols.get(in[0].Dtype(), tensor.Shape{g.ckk(), g.ohw()}).Data().([]T)
	inSize, outSize := g.c*g.h*g.w, g.f*g.ohw()
	for n := range g.n {
		im2col(g, x[n*inSize:(n+1)*inSize], cols)
		var beta T
		if n > 0 {
			beta = 1
		}
		gemm(false, true, g.f, g.ckk(), g.ohw(), dz[n*outSize:(n+1)*outSize], cols, beta, o)
	}
	return out, nil
}

func (op *convKernelGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *convKernelGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *convKernelGradOp) String() string        { return fmt.Sprintf("Conv2DKernelGrad{%v}", op.geo) }

// convInputGradOp is col2im(kernelᵀ·dz_n) for every image: inputs kernel
// and dz.
type convInputGradOp struct {
	gradOp
	geo  convGeom
	out  buffer
	cols buffer
}

func (op *convInputGradOp) Arity() int { return 2 }

func (op *convInputGradOp) Type() hm.Type {
	t4 := tensorType(4, hm.TypeVariable('a'))
	return hm.NewFnType(t4, t4, t4)
}

func (op *convInputGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return op.geo.in(), nil
}

func (op *convInputGradOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", op, len(in))
	}
	if err := op.geo.check([]tensor.Shape{in[0].Shape(), in[1].Shape()}, op.geo.kernel(), op.geo.out()); err != nil {
		return nil, err
	}
	return dispatch(op.String(), in[0].Dtype(),
		func() (G.Value, error) { return convInputGradDo[float32](op, in) },
		func() (G.Value, error) { return convInputGradDo[float64](op, in) })
}

func convInputGradDo[T float](op *convInputGradOp, in []G.Value) (G.Value, error) {
	g := op.geo
	k, err := backing[T]("kernel", in[0])
	if err != nil {
		return nil, err
	}
	dz, err := backing[T]("gradient", in[1])
	if err != nil {
		return nil, err
	}
	out := op.out.get(in[0].Dtype(), g.in())
	o := out.Data().([]T)
	clear(o)
	cols := op.cols.get(in[0].Dtype(), tensor.Shape{g.ckk(), g.ohw()}).Data().([]T)
	inSize, outSize := g.c*g.h*g.w, g.f*g.ohw()
	for n := range g.n {
		gemm(true, false, g.ckk(), g.ohw(), g.f, k, dz[n*outSize:(n+1)*outSize], 0, cols)
		col2im(g, cols, o[n*inSize:(n+1)*inSize])
	}
	return out, nil
}

func (op *convInputGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *convInputGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *convInputGradOp) String() string        { return fmt.Sprintf("Conv2DInputGrad{%v}", op.geo) }

// channelSumOp sums (N, F, H, W) over all but F: the bias gradient of a
// convolution.
type channelSumOp struct {
	gradOp
	out  buffer
	ones buffer
}

func (op *channelSumOp) Arity() int { return 1 }

func (op *channelSumOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tensorType(4, a), tensorType(1, a))
}

func (op *channelSumOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf("channel sum", in, 0)
	if err != nil {
		return nil, err
	}
	if len(s) != 4 {
		return nil, fmt.Errorf("channel sum: shape %v, want (N, F, H, W)", s)
	}
	return tensor.Shape{s[1]}, nil
}

func (op *channelSumOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(in))
	}
	return dispatch(op.String(), in[0].Dtype(),
		func() (G.Value, error) { return channelSumDo[float32](op, in[0]) },
		func() (G.Value, error) { return channelSumDo[float64](op, in[0]) })
}

func channelSumDo[T float](op *channelSumOp, in G.Value) (G.Value, error) {
	s, err := op.InferShape(in.Shape())
	if err != nil {
		return nil, err
	}
	a, err := backing[T]("input", in)
	if err != nil {
		return nil, err
	}
	sh := in.Shape()
	f, hw := sh[1], sh[2]*sh[3]
	out := op.out.get(in.Dtype(), s)
	o := out.Data().([]T)
	ones := op.ones.get(in.Dtype(), tensor.Shape{hw}).Data().([]T)
	if len(ones) > 0 && ones[0] != 1 {
		for i := range ones {
			ones[i] = 1
		}
	}
	clear(o)
	for n := range sh[0] {
		gemv(false, f, hw, a[n*f*hw:(n+1)*f*hw], ones, 1, o)
	}
	return out, nil
}

func (op *channelSumOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "ChannelSum") }
func (op *channelSumOp) Hashcode() uint32      { return hashOf(op) }
func (op *channelSumOp) String() string        { return "ChannelSum" }
