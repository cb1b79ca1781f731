package layers

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/vec"
)

// AvgPool2D returns the mean of every size window of x (N, C, H, W),
// windows stride apart (a zero stride is the window's size), without
// padding: shape (N, C, (H − size)/stride + 1, (W − size)/stride + 1), as
// gorgonia's G.AveragePool2D with zero padding. The gradient spreads each
// output's evenly over its window.
//
// An optional format, at most one, is the order of x's dimensions and the
// output's: NCHW (the default) or NHWC, x (N, H, W, C) and the output (N,
// OH, OW, C).
func AvgPool2D(x *G.Node, size, stride [2]int, format ...Format) (*G.Node, error) {
	const op = "layers.AvgPool2D"
	f, err := formatArg(op, format)
	if err != nil {
		return nil, err
	}
	s, stride, err := poolArgs(op, x, size, stride, f)
	if err != nil {
		return nil, err
	}
	n, c, h, w := f.dims(s)
	return applyAvgPool(op, x, avgPoolGeom{n: n, c: c, h: h, w: w, kh: size[0], kw: size[1], sh: stride[0], sw: stride[1], f: f})
}

// GlobalAvgPool2D returns the mean of every channel of x (N, C, H, W) over
// its positions, of shape (N, C): the global average pooling before a
// ResNet's classifier. An optional format, at most one, is the order of
// x's dimensions: NCHW (the default) or NHWC, x (N, H, W, C); the output
// is (N, C) in both.
func GlobalAvgPool2D(x *G.Node, format ...Format) (*G.Node, error) {
	const op = "layers.GlobalAvgPool2D"
	f, err := formatArg(op, format)
	if err != nil {
		return nil, err
	}
	s, err := poolInput(op, x, f)
	if err != nil {
		return nil, err
	}
	n, c, h, w := f.dims(s)
	return applyAvgPool(op, x, avgPoolGeom{n: n, c: c, h: h, w: w, kh: h, kw: w, sh: 1, sw: 1, global: true, f: f})
}

func applyAvgPool(op string, x *G.Node, g avgPoolGeom) (*G.Node, error) {
	g.oh, g.ow = (g.h-g.kh)/g.sh+1, (g.w-g.kw)/g.sw+1
	out, err := G.ApplyOp(&avgPoolOp{geo: g}, x)
	if err != nil {
		return nil, fmt.Errorf("%s(%s): %w", op, x.Name(), err)
	}
	return out, nil
}

// avgPoolGeom is the shapes of an average pooling; a global one's output
// is (N, C) rather than (N, C, 1, 1).
type avgPoolGeom struct {
	n, c, h, w int
	kh, kw     int
	sh, sw     int
	oh, ow     int
	global     bool
	f          Format
}

func (g avgPoolGeom) in() tensor.Shape { return g.f.shape(g.n, g.c, g.h, g.w) }
func (g avgPoolGeom) res() tensor.Shape {
	if g.global {
		return tensor.Shape{g.n, g.c}
	}
	return g.f.shape(g.n, g.c, g.oh, g.ow)
}

func (g avgPoolGeom) String() string {
	in := fmt.Sprintf("%v", g.in())
	if g.f == NHWC {
		in += " NHWC"
	}
	if g.global {
		return fmt.Sprintf("%s, global", in)
	}
	return fmt.Sprintf("%s, window (%d, %d), stride (%d, %d)", in, g.kh, g.kw, g.sh, g.sw)
}

// avgPoolOp is the windowed mean.
type avgPoolOp struct {
	forwardOp
	geo avgPoolGeom
	out buffer
	par any // []T: the global pooling's zero shifts and second sums, with channels last
}

func (op *avgPoolOp) Arity() int { return 1 }

func (op *avgPoolOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tensorType(4, a), tensorType(len(op.geo.res()), a))
}

func (op *avgPoolOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.geo.res(), nil }

func (op *avgPoolOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(in))
	}
	if !in[0].Shape().Eq(op.geo.in()) {
		return nil, fmt.Errorf("%v: input has shape %v, want %v", op, in[0].Shape(), op.geo.in())
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return avgPoolDo[float32](op, in[0]) },
		func() (G.Value, error) { return avgPoolDo[float64](op, in[0]) })
}

func avgPoolDo[T float](op *avgPoolOp, in G.Value) (G.Value, error) {
	x, err := backing[T]("input", in)
	if err != nil {
		return nil, err
	}
	g := op.geo
	out := op.out.get(in.Dtype(), g.res())
	o := data[T](out)
	inv := 1 / T(g.kh*g.kw)
	if g.f == NHWC {
		avgPoolRows(op, x, o, inv)
		return out, nil
	}
	k := 0
	for p := range g.n * g.c {
		base := p * g.h * g.w
		for oy := range g.oh {
			top := base + oy*g.sh*g.w
			for ox := range g.ow {
				start := top + ox*g.sw
				var s T
				for i := range g.kh {
					for _, v := range x[start+i*g.w : start+i*g.w+g.kw] {
						s += v
					}
				}
				o[k] = s * inv
				k++
			}
		}
	}
	return out, nil
}

// avgPoolRows is avgPoolDo with channels last: each output row of C
// channels adds its window's rows in the order avgPoolDo adds each
// channel's window, and so gives the same bits.
func avgPoolRows[T float](op *avgPoolOp, x, o []T, inv T) {
	g := op.geo
	c := g.c
	if g.global {
		// Each channel's sum over an image's rows, in order.
		par := channelScratch[T](&op.par, 2*c)
		zero, ss := par[:c], par[c:]
		clear(zero)
		hw := g.h * g.w
		for i := range g.n {
			s := o[i*c : (i+1)*c]
			vec.SumsAboutRows(x[i*hw*c:(i+1)*hw*c], zero, s, ss)
			for ch := range s {
				s[ch] *= inv
			}
		}
		return
	}
	k := 0
	for i := range g.n {
		for oy := range g.oh {
			for ox := range g.ow {
				start := ((i*g.h+oy*g.sh)*g.w + ox*g.sw) * c
				s := o[k : k+c]
				clear(s)
				for ky := range g.kh {
					for kx := range g.kw {
						r := start + (ky*g.w+kx)*c
						vec.Add(s, s, x[r:r+c], false)
					}
				}
				for ch := range s {
					s[ch] *= inv
				}
				k += c
			}
		}
	}
}

func (op *avgPoolOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *avgPoolOp) Hashcode() uint32      { return hashOf(op) }
func (op *avgPoolOp) String() string        { return fmt.Sprintf("AvgPool2D{%v}", op.geo) }

func (op *avgPoolOp) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	d, err := G.ApplyOp(&avgPoolGradOp{geo: op.geo}, grad)
	if err != nil {
		return nil, fmt.Errorf("%v: gradient: %w", op, err)
	}
	return G.Nodes{d}, nil
}

// avgPoolGradOp adds each output gradient, over the window's size, to
// every input element of its window.
type avgPoolGradOp struct {
	gradOp
	geo avgPoolGeom
	out buffer
	par any // []T: an output row's gradient over the window's size, with channels last
}

func (op *avgPoolGradOp) Arity() int { return 1 }

func (op *avgPoolGradOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tensorType(len(op.geo.res()), a), tensorType(4, a))
}

func (op *avgPoolGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.geo.in(), nil }

func (op *avgPoolGradOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(in))
	}
	if !in[0].Shape().Eq(op.geo.res()) {
		return nil, fmt.Errorf("%v: gradient has shape %v, want %v", op, in[0].Shape(), op.geo.res())
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return avgPoolGradDo[float32](op, in[0]) },
		func() (G.Value, error) { return avgPoolGradDo[float64](op, in[0]) })
}

func avgPoolGradDo[T float](op *avgPoolGradOp, in G.Value) (G.Value, error) {
	dy, err := backing[T]("gradient", in)
	if err != nil {
		return nil, err
	}
	g := op.geo
	out := op.out.get(in.Dtype(), g.in())
	o := data[T](out)
	inv := 1 / T(g.kh*g.kw)
	if g.f == NHWC {
		avgPoolGradRows(op, dy, o, inv)
		return out, nil
	}
	clear(o)
	k := 0
	for p := range g.n * g.c {
		base := p * g.h * g.w
		for oy := range g.oh {
			top := base + oy*g.sh*g.w
			for ox := range g.ow {
				start := top + ox*g.sw
				v := T(dy[k] * inv) // T(…): rounded, not fused into the additions (GOAMD64=v3)
				k++
				for i := range g.kh {
					row := o[start+i*g.w : start+i*g.w+g.kw]
					for j := range row {
						row[j] += v
					}
				}
			}
		}
	}
	return out, nil
}

// avgPoolGradRows is avgPoolGradDo with channels last: each output row's
// gradient over the window's size is added to its window's rows, in the
// order avgPoolGradDo adds each channel's; a global pooling's is every
// row of its image.
func avgPoolGradRows[T float](op *avgPoolGradOp, dy, o []T, inv T) {
	g := op.geo
	c := g.c
	v := channelScratch[T](&op.par, c)
	if g.global {
		hw := g.h * g.w
		for i := range g.n {
			for ch := range v {
				v[ch] = dy[i*c+ch] * inv
			}
			for r := i * hw; r < (i+1)*hw; r++ {
				copy(o[r*c:(r+1)*c], v)
			}
		}
		return
	}
	clear(o)
	k := 0
	for i := range g.n {
		for oy := range g.oh {
			for ox := range g.ow {
				for ch := range v {
					v[ch] = dy[k+ch] * inv
				}
				k += c
				start := ((i*g.h+oy*g.sh)*g.w + ox*g.sw) * c
				for ky := range g.kh {
					for kx := range g.kw {
						r := start + (ky*g.w+kx)*c
						vec.Add(o[r:r+c], o[r:r+c], v, false)
					}
				}
			}
		}
	}
}

func (op *avgPoolGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *avgPoolGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *avgPoolGradOp) String() string        { return fmt.Sprintf("AvgPool2DGrad{%v}", op.geo) }
