package layers_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/layers"
)

// poolCase is a pooling of x (N, C, H, W), window and stride, in either
// order; a zero window is the global average pooling.
type poolCase struct {
	kind           string // "max", "avg" or "global"
	n, c, h, w     int
	size, stride   [2]int
	ties           bool // values from a few integers: equal maxima in windows
	outH, outW     int
	pool           func(x *G.Node, f layers.Format) (*G.Node, error)
	outNCHW, outNH tensor.Shape
}

func newPoolCase(kind string, n, c, h, w int, size, stride [2]int, ties bool) poolCase {
	p := poolCase{kind: kind, n: n, c: c, h: h, w: w, size: size, stride: stride, ties: ties}
	if stride == ([2]int{}) {
		stride = size
	}
	switch kind {
	case "max":
		p.pool = func(x *G.Node, f layers.Format) (*G.Node, error) { return layers.MaxPool2D(x, size, stride, f) }
	case "avg":
		p.pool = func(x *G.Node, f layers.Format) (*G.Node, error) { return layers.AvgPool2D(x, size, stride, f) }
	case "global":
		p.pool = func(x *G.Node, f layers.Format) (*G.Node, error) { return layers.GlobalAvgPool2D(x, f) }
		p.outNCHW, p.outNH = tensor.Shape{n, c}, tensor.Shape{n, c}
		return p
	}
	p.outH, p.outW = (h-size[0])/stride[0]+1, (w-size[1])/stride[1]+1
	p.outNCHW, p.outNH = tensor.Shape{n, c, p.outH, p.outW}, tensor.Shape{n, p.outH, p.outW, c}
	return p
}

// TestPoolsNHWC: each pooling with format NHWC on the transposed input
// gives the bits of NCHW on the input, transposed: its output (read as
// the gradient of Σ w ⊙ pool(x) with respect to w) and its gradient with
// respect to x, in float32 and float64, with channels that fill no
// vector, one, and one and a part, and with ties in the windows of the
// maximum. The loss, Σ w ⊙ pool(x), adds in another order: within
// rounding.
func TestPoolsNHWC(t *testing.T) {
	cases := []poolCase{
		newPoolCase("max", 2, 3, 6, 8, [2]int{2, 2}, [2]int{}, false),
		newPoolCase("max", 1, 5, 7, 5, [2]int{3, 2}, [2]int{2, 1}, false),
		newPoolCase("max", 2, 16, 4, 4, [2]int{2, 2}, [2]int{1, 1}, true),
		newPoolCase("max", 2, 19, 5, 6, [2]int{3, 3}, [2]int{2, 2}, true),
		newPoolCase("avg", 2, 3, 6, 8, [2]int{2, 2}, [2]int{}, false),
		newPoolCase("avg", 1, 5, 7, 5, [2]int{3, 2}, [2]int{2, 1}, false),
		newPoolCase("avg", 2, 16, 5, 5, [2]int{2, 2}, [2]int{1, 1}, false),
		newPoolCase("avg", 2, 19, 4, 6, [2]int{3, 3}, [2]int{1, 2}, false),
		newPoolCase("global", 2, 3, 4, 5, [2]int{}, [2]int{}, false),
		newPoolCase("global", 3, 5, 1, 1, [2]int{}, [2]int{}, false),
		newPoolCase("global", 2, 16, 8, 8, [2]int{}, [2]int{}, false),
		newPoolCase("global", 2, 67, 9, 7, [2]int{}, [2]int{}, false),
	}
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		for _, pc := range cases {
			in := tensor.Shape{pc.n, pc.c, pc.h, pc.w}
			t.Run(fmt.Sprintf("%v/%s %v window %v stride %v ties=%t", dt, pc.kind, in, pc.size, pc.stride, pc.ties), func(t *testing.T) {
				body := func(f layers.Format) func(in []*G.Node) (*G.Node, error) {
					return func(in []*G.Node) (*G.Node, error) {
						p, err := pc.pool(in[0], f)
						if err != nil {
							return nil, err
						}
						return G.Sum(G.Must(G.HadamardProd(p, in[1])))
					}
				}
				first := build(t, dt, []tensor.Shape{in, pc.outNCHW}, body(layers.NCHW))
				last := build(t, dt, []tensor.Shape{{pc.n, pc.h, pc.w, pc.c}, pc.outNH}, body(layers.NHWC))
				r := rand.New(rand.NewPCG(uint64(pc.c), 3))
				for run := range 2 {
					x, w := make([]float64, in.TotalSize()), make([]float64, pc.outNCHW.TotalSize())
					for i := range x {
						x[i] = r.NormFloat64()
						if pc.ties {
							x[i] = math.Round(x[i])
						}
					}
					for i := range w {
						w[i] = r.NormFloat64()
					}
					wLast := w
					if pc.kind != "global" {
						wLast = toNHWC(w, pc.n, pc.c, pc.outH, pc.outW)
					}
					want := first.run(t, []*tensor.Dense{tensorOf(dt, in, x), tensorOf(dt, pc.outNCHW, w)})
					got := last.run(t, []*tensor.Dense{tensorOf(dt, tensor.Shape{pc.n, pc.h, pc.w, pc.c}, toNHWC(x, pc.n, pc.c, pc.h, pc.w)), tensorOf(dt, pc.outNH, wLast)})
					got[1] = fromNHWC(got[1], pc.n, pc.c, pc.h, pc.w)
					if pc.kind != "global" {
						got[2] = fromNHWC(got[2], pc.n, pc.c, pc.outH, pc.outW)
					}
					if diff := cmp.Diff(want[1:], got[1:]); diff != "" {
						t.Errorf("run %d: gradients wrt x and w (the output) (-NCHW +NHWC):\n%s", run, diff)
					}
					if diff := cmp.Diff(want[0], got[0], cmpopts.EquateApprox(1e-5, 1e-5)); diff != "" {
						t.Errorf("run %d: loss (-NCHW +NHWC):\n%s", run, diff)
					}
				}
			})
		}
	}
}

// TestPoolFormatErrors: an unknown format, more than one, an input of
// another rank or a window larger than the format's height or width is
// an error naming the op, the input and what is wrong; the format's
// absence is NCHW.
func TestPoolFormatErrors(t *testing.T) {
	g := G.NewGraph()
	f32 := func(name string, s ...int) *G.Node {
		return G.NewTensor(g, tensor.Float32, len(s), G.WithShape(s...), G.WithName(name))
	}
	// (N, H, W, C) = (2, 8, 3, 4): the window 2×4 fits NCHW's 3×4 only.
	x := f32("im", 2, 8, 3, 4)
	for _, tc := range []struct {
		name string
		do   func() (*G.Node, error)
		want []string
	}{
		{"max unknown", func() (*G.Node, error) { return layers.MaxPool2D(x, [2]int{2, 2}, [2]int{}, layers.Format(5)) }, []string{"layers.MaxPool2D", "unknown data format Format(5)"}},
		{"avg two", func() (*G.Node, error) {
			return layers.AvgPool2D(x, [2]int{2, 2}, [2]int{}, layers.NHWC, layers.NHWC)
		}, []string{"layers.AvgPool2D", "2 formats given, want at most one"}},
		{"global unknown", func() (*G.Node, error) { return layers.GlobalAvgPool2D(x, layers.Format(-2)) }, []string{"layers.GlobalAvgPool2D", "Format(-2)"}},
		{"global rank", func() (*G.Node, error) { return layers.GlobalAvgPool2D(f32("flat", 2, 8), layers.NHWC) }, []string{"flat", "(2, 8)", "want (N, H, W, C)"}},
		{"max window", func() (*G.Node, error) { return layers.MaxPool2D(x, [2]int{2, 4}, [2]int{}, layers.NHWC) }, []string{"im", "window [2 4]"}},
		{"avg window", func() (*G.Node, error) { return layers.AvgPool2D(x, [2]int{9, 1}, [2]int{}, layers.NHWC) }, []string{"im", "window [9 1]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.do()
			wanterr.Mentions(t, err, tc.want...)
		})
	}
	for _, tc := range []struct {
		name string
		do   func(...layers.Format) (*G.Node, error)
		want tensor.Shape
	}{
		{"max", func(f ...layers.Format) (*G.Node, error) { return layers.MaxPool2D(x, [2]int{2, 2}, [2]int{}, f...) }, tensor.Shape{2, 8, 1, 2}},
		{"avg", func(f ...layers.Format) (*G.Node, error) { return layers.AvgPool2D(x, [2]int{2, 2}, [2]int{}, f...) }, tensor.Shape{2, 8, 1, 2}},
		{"max NHWC", func(...layers.Format) (*G.Node, error) {
			return layers.MaxPool2D(x, [2]int{2, 2}, [2]int{}, layers.NHWC)
		}, tensor.Shape{2, 4, 1, 4}},
		{"global NHWC", func(...layers.Format) (*G.Node, error) { return layers.GlobalAvgPool2D(x, layers.NHWC) }, tensor.Shape{2, 4}},
		{"global", func(f ...layers.Format) (*G.Node, error) { return layers.GlobalAvgPool2D(x, f...) }, tensor.Shape{2, 8}},
	} {
		t.Run(tc.name+" shape", func(t *testing.T) {
			p, err := tc.do()
			if err != nil {
				t.Fatal(err)
			}
			if !p.Shape().Eq(tc.want) {
				t.Errorf("output shape %v, want %v", p.Shape(), tc.want)
			}
		})
	}
}
