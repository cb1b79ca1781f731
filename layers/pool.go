package layers

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// MaxPool2D returns the maximum of every size window of x (N, C, H, W),
// windows stride apart (a zero stride is the window's size), without
// padding: shape (N, C, (H − size)/stride + 1, (W − size)/stride + 1), as
// gorgonia's G.MaxPool2D with zero padding. The op keeps its output and
// where each maximum came from between runs; the gradient goes to that
// element (the first of equal ones).
//
// An optional format, at most one, is the order of x's dimensions and the
// output's: NCHW (the default) or NHWC, x (N, H, W, C) and the output (N,
// OH, OW, C).
func MaxPool2D(x *G.Node, size, stride [2]int, format ...Format) (*G.Node, error) {
	const op = "layers.MaxPool2D"
	f, err := formatArg(op, format)
	if err != nil {
		return nil, err
	}
	s, stride, err := poolArgs(op, x, size, stride, f)
	if err != nil {
		return nil, err
	}
	n, c, h, w := f.dims(s)
	p := &maxPoolOp{n: n, c: c, h: h, w: w, kh: size[0], kw: size[1], sh: stride[0], sw: stride[1], f: f}
	p.oh, p.ow = (p.h-p.kh)/p.sh+1, (p.w-p.kw)/p.sw+1
	out, err := G.ApplyOp(p, x)
	if err != nil {
		return nil, fmt.Errorf("%s(%s): %w", op, x.Name(), err)
	}
	return out, nil
}

// poolInput checks a pooling's input: float, of 4 dimensions in order f.
func poolInput(op string, x *G.Node, f Format) (tensor.Shape, error) {
	if x == nil {
		return nil, fmt.Errorf("%s: nil input", op)
	}
	if err := checkFloat(op, x); err != nil {
		return nil, err
	}
	s := x.Shape()
	if len(s) != 4 {
		return nil, fmt.Errorf("%s(%s): input has shape %v, want %s", op, x.Name(), s, f.want())
	}
	return s, nil
}

// poolArgs checks a windowed pooling's input, in order f, and window, and
// returns the input's shape and the stride (a zero stride is the window's
// size).
func poolArgs(op string, x *G.Node, size, stride [2]int, f Format) (tensor.Shape, [2]int, error) {
	s, err := poolInput(op, x, f)
	if err != nil {
		return nil, stride, err
	}
	if stride[0] == 0 && stride[1] == 0 {
		stride = size
	}
	_, _, h, w := f.dims(s)
	if size[0] < 1 || size[1] < 1 || stride[0] < 1 || stride[1] < 1 || size[0] > h || size[1] > w {
		return nil, stride, fmt.Errorf("%s(%s): window %v, stride %v on input %v: want positive sizes no larger than the input", op, x.Name(), size, stride, s)
	}
	return s, stride, nil
}

// maxPoolOp is the windowed maximum; arg holds, for every output element,
// the index in x of the element it was taken from, for the gradient.
type maxPoolOp struct {
	forwardOp
	n, c, h, w int
	kh, kw     int
	sh, sw     int
	oh, ow     int
	f          Format
	out        buffer
	arg        []int32
}

func (op *maxPoolOp) in() tensor.Shape  { return op.f.shape(op.n, op.c, op.h, op.w) }
func (op *maxPoolOp) res() tensor.Shape { return op.f.shape(op.n, op.c, op.oh, op.ow) }

func (op *maxPoolOp) Arity() int { return 1 }

func (op *maxPoolOp) Type() hm.Type {
	t4 := tensorType(4, hm.TypeVariable('a'))
	return hm.NewFnType(t4, t4)
}

func (op *maxPoolOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.res(), nil }

func (op *maxPoolOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(in))
	}
	if !in[0].Shape().Eq(op.in()) {
		return nil, fmt.Errorf("%v: input has shape %v, want %v", op, in[0].Shape(), op.in())
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return maxPoolDo[float32](op, in[0]) },
		func() (G.Value, error) { return maxPoolDo[float64](op, in[0]) })
}

func maxPoolDo[T float](op *maxPoolOp, in G.Value) (G.Value, error) {
	x, err := backing[T]("input", in)
	if err != nil {
		return nil, err
	}
	out := op.out.get(in.Dtype(), op.res())
	o := data[T](out)
	if len(op.arg) != len(o) {
		op.arg = make([]int32, len(o))
	}
	if op.f == NHWC {
		maxPoolRows(op, x, o)
		return out, nil
	}
	k := 0
	for plane := range op.n * op.c {
		base := plane * op.h * op.w
		for oy := range op.oh {
			top := base + oy*op.sh*op.w
			for ox := range op.ow {
				start := top + ox*op.sw
				best, m := start, x[start]
				for i := range op.kh {
					r := start + i*op.w
					for j := r; j < r+op.kw; j++ {
						// Without a branch: which element wins is
						// unpredictable, and a mispredicted branch per
						// element cost more than the rest of the loop.
						v := x[j]
						var gt int
						if v > m {
							gt = 1
						}
						best ^= (best ^ j) & -gt
						m = max(m, v)
					}
				}
				o[k], op.arg[k] = m, int32(best)
				k++
			}
		}
	}
	return out, nil
}

// maxPoolRows is maxPoolDo with channels last: each output row of C
// channels starts from its window's first row and takes the others in
// the same order, each channel as maxPoolDo takes its plane's.
func maxPoolRows[T float](op *maxPoolOp, x, o []T) {
	c := op.c
	k := 0
	for i := range op.n {
		for oy := range op.oh {
			for ox := range op.ow {
				start := ((i*op.h+oy*op.sh)*op.w + ox*op.sw) * c
				m, arg := o[k:k+c:k+c], op.arg[k:k+c:k+c]
				copy(m, x[start:start+c])
				for ch := range arg {
					arg[ch] = int32(start + ch)
				}
				for ky := range op.kh {
					for kx := range op.kw {
						r := start + (ky*op.w+kx)*c
						for ch, v := range x[r : r+c : r+c] {
							// Without a branch, as in maxPoolDo.
							var gt int32
							if v > m[ch] {
								gt = 1
							}
							arg[ch] ^= (arg[ch] ^ int32(r+ch)) & -gt
							m[ch] = max(m[ch], v)
						}
					}
				}
				k += c
			}
		}
	}
}

func (op *maxPoolOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", op) }
func (op *maxPoolOp) Hashcode() uint32      { return hashOf(op) }
func (op *maxPoolOp) String() string {
	if op.f == NHWC {
		return fmt.Sprintf("MaxPool2D{%v NHWC, window (%d, %d), stride (%d, %d)}", op.in(), op.kh, op.kw, op.sh, op.sw)
	}
	return fmt.Sprintf("MaxPool2D{%v, window (%d, %d), stride (%d, %d)}", op.in(), op.kh, op.kw, op.sh, op.sw)
}

func (op *maxPoolOp) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	d, err := G.ApplyOp(&maxPoolGradOp{fwd: op}, output, grad)
	if err != nil {
		return nil, fmt.Errorf("%v: gradient: %w", op, err)
	}
	return G.Nodes{d}, nil
}

// maxPoolGradOp routes each output gradient to the input element its
// maximum came from, as its forward op recorded in the same run. The
// forward output is an input only to order the two.
type maxPoolGradOp struct {
	gradOp
	fwd *maxPoolOp
	out buffer
}

func (op *maxPoolGradOp) Arity() int { return 2 }

func (op *maxPoolGradOp) Type() hm.Type {
	t4 := tensorType(4, hm.TypeVariable('a'))
	return hm.NewFnType(t4, t4, t4)
}

func (op *maxPoolGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.fwd.in(), nil }

func (op *maxPoolGradOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", op, len(in))
	}
	if !in[1].Shape().Eq(op.fwd.res()) {
		return nil, fmt.Errorf("%v: gradient has shape %v, want %v", op, in[1].Shape(), op.fwd.res())
	}
	return dispatch(op, in[1].Dtype(),
		func() (G.Value, error) { return maxPoolGradDo[float32](op, in[1]) },
		func() (G.Value, error) { return maxPoolGradDo[float64](op, in[1]) })
}

func maxPoolGradDo[T float](op *maxPoolGradOp, in G.Value) (G.Value, error) {
	g, err := backing[T]("gradient", in)
	if err != nil {
		return nil, err
	}
	if len(op.fwd.arg) != len(g) {
		return nil, fmt.Errorf("%v: the forward op has not run", op)
	}
	out := op.out.get(in.Dtype(), op.fwd.in())
	o := data[T](out)
	clear(o)
	for k, v := range g {
		o[op.fwd.arg[k]] += v
	}
	return out, nil
}

func (op *maxPoolGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "MaxPool2DGrad{%p}", op.fwd) }
func (op *maxPoolGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *maxPoolGradOp) String() string        { return fmt.Sprintf("MaxPool2DGrad{%v}", op.fwd) }
