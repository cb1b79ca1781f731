package layers_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/layers"
)

// TestConv2DNHWCAgainstNCHW: Conv2D with Format NHWC gives the output and
// the gradients of x and the kernel that Conv2D in NCHW gives on the
// transposed batch, transposed back: bit for bit in this package's own code
// (the NCHW code runs on transposed copies), within float32's precision in
// oneDNN (-tags dnnl; it computes on NHWC in place, in other kernels). The
// bias's gradient sums over (N, OH, OW) in another order than NCHW's sum
// over planes: within the dtype's precision. The loss is Σ y ⊙ t, whose
// gradient with respect to y is t exactly, and with respect to t is y: the
// gradients carry the output, and the ReLU's mask, bit for bit.
func TestConv2DNHWCAgainstNCHW(t *testing.T) {
	type geometry struct {
		name                  string
		n, c, h, w, f, kh, kw int
		conv                  layers.Conv
		bias                  bool
	}
	relu := layers.ReLU
	geoms := []geometry{
		{"3x3 same, bias, ReLU", 3, 4, 6, 5, 5, 3, 3, layers.Conv{Padding: [2]int{1, 1}, Activation: relu}, true},
		{"3x3 stride 2", 2, 3, 8, 7, 4, 3, 3, layers.Conv{Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}, false},
		{"1x1 stride 2 projection", 2, 6, 8, 8, 8, 1, 1, layers.Conv{Stride: [2]int{2, 2}}, false},
		{"1x1, bias, ReLU", 2, 5, 4, 3, 3, 1, 1, layers.Conv{Activation: relu}, true},
		{"ResNet's first layer, C=3", 2, 3, 32, 32, 16, 3, 3, layers.Conv{Padding: [2]int{1, 1}}, false},
		{"16 channels, bias", 2, 16, 8, 8, 16, 3, 3, layers.Conv{Padding: [2]int{1, 1}}, true},
		{"2x3 kernel, strides (1, 2), padding (2, 0), ReLU", 2, 2, 7, 6, 3, 2, 3, layers.Conv{Stride: [2]int{1, 2}, Padding: [2]int{2, 0}, Activation: relu}, true},
		{"no padding, bias", 1, 2, 5, 5, 2, 3, 3, layers.Conv{}, true},
		{"more channels than positions, bias", 2, 40, 6, 6, 40, 3, 3, layers.Conv{Padding: [2]int{1, 1}}, true},
	}
	// The backends of float32 convolutions: this package's own code, and
	// oneDNN where it is built (and on by default).
	built := layers.UseOneDNN(true) == nil
	defer layers.UseOneDNN(built)
	backends := []bool{false}
	if built {
		backends = append(backends, true)
	}
	for _, ge := range geoms {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			for _, oneDNN := range backends {
				if oneDNN && dt == tensor.Float64 {
					continue // float64 runs in this package's code always
				}
				t.Run(fmt.Sprintf("%s/%v/oneDNN=%t", ge.name, dt, oneDNN), func(t *testing.T) {
					if err := layers.UseOneDNN(oneDNN); err != nil {
						t.Fatal(err)
					}
					oh := (ge.h+2*ge.conv.Padding[0]-ge.kh)/max(ge.conv.Stride[0], 1) + 1
					ow := (ge.w+2*ge.conv.Padding[1]-ge.kw)/max(ge.conv.Stride[1], 1) + 1
					rng := rand.New(rand.NewPCG(3, 4))
					x, k, tg, b := randomFloats(rng, ge.n*ge.c*ge.h*ge.w), randomFloats(rng, ge.f*ge.c*ge.kh*ge.kw), randomFloats(rng, ge.n*ge.f*oh*ow), randomFloats(rng, ge.f)
					run := func(f layers.Format, x, tg []float64) [][]float64 {
						shapes := []tensor.Shape{imagesShape(f, ge.n, ge.c, ge.h, ge.w), {ge.f, ge.c, ge.kh, ge.kw}, imagesShape(f, ge.n, ge.f, oh, ow)}
						vals := []*tensor.Dense{tensorOf(dt, shapes[0], x), tensorOf(dt, shapes[1], k), tensorOf(dt, shapes[2], tg)}
						if ge.bias {
							shapes = append(shapes, tensor.Shape{ge.f})
							vals = append(vals, tensorOf(dt, shapes[3], b))
						}
						c := ge.conv
						c.Format = f
						n := build(t, dt, shapes, func(in []*G.Node) (*G.Node, error) {
							var bias *G.Node
							if ge.bias {
								bias = in[3]
							}
							y, err := layers.Conv2D(in[0], in[1], bias, c)
							if err != nil {
								return nil, err
							}
							return G.Sum(G.Must(G.HadamardProd(y, in[2])))
						})
						return n.run(t, vals)[1:] // dx, dk, y, db
					}
					nchw := run(layers.NCHW, x, tg)
					nhwc := run(layers.NHWC, toNHWC(x, ge.n, ge.c, ge.h, ge.w), toNHWC(tg, ge.n, ge.f, oh, ow))
					nhwc[0] = fromNHWC(nhwc[0], ge.n, ge.c, ge.h, ge.w)
					nhwc[2] = fromNHWC(nhwc[2], ge.n, ge.f, oh, ow)
					exact := []cmp.Option{}
					if oneDNN {
						exact = append(exact, cmpopts.EquateApprox(1e-4, 1e-4))
					}
					for i, what := range []string{"input gradient", "kernel gradient", "output"} {
						if diff := cmp.Diff(nchw[i], nhwc[i], exact...); diff != "" {
							t.Errorf("%s (-NCHW +NHWC, transposed):\n%s", what, diff)
						}
					}
					if ge.bias {
						tol := cmpopts.EquateApprox(1e-12, 1e-12)
						if dt == tensor.Float32 {
							tol = cmpopts.EquateApprox(1e-5, 1e-5)
						}
						if diff := cmp.Diff(nchw[3], nhwc[3], tol); diff != "" {
							t.Errorf("bias gradient (-NCHW +NHWC):\n%s", diff)
						}
					}
				})
			}
		}
	}
}

// TestConv2DLayerNHWC: an owned convolution with Format NHWC has the
// variables of the NCHW one of the same name (the same nodes: a model's
// checkpoints hold the same tensors in either order) and gives its
// output and input gradient, transposed, bit for bit (float64: this
// package's own code in every build).
func TestConv2DLayerNHWC(t *testing.T) {
	s, store := scope()
	m := layers.NewModule(s, "net")
	cfg := layers.Conv2DConfig{In: 3, Filters: 4, Size: [2]int{3, 3}, Dtype: tensor.Float64,
		Conv: layers.Conv{Stride: [2]int{2, 2}, Padding: [2]int{1, 1}, Activation: layers.ReLU, Format: layers.NHWC}}
	nhwc, err := layers.NewConv2D(m, "conv", cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Format = layers.NCHW
	nchw, err := layers.NewConv2D(m, "conv", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if nhwc.Kernel() != nchw.Kernel() || nhwc.Bias() != nchw.Bias() {
		t.Fatalf("the NHWC and NCHW layers of one name have different variables")
	}
	if diff := cmp.Diff([]string{"net/conv/kernel", "net/conv/bias"}, store.Names()); diff != "" {
		t.Errorf("store's variables (-want +got):\n%s", diff)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	const n, c, h, w, f, oh, ow = 2, 3, 7, 6, 4, 4, 3
	x, tg := randomFloats(rng, n*c*h*w), randomFloats(rng, n*f*oh*ow)
	g := s.Graph()
	xs := []*G.Node{
		constant(g, "x_nchw", tensorOf(tensor.Float64, tensor.Shape{n, c, h, w}, x)),
		constant(g, "x_nhwc", tensorOf(tensor.Float64, tensor.Shape{n, h, w, c}, toNHWC(x, n, c, h, w))),
	}
	ts := []*G.Node{
		constant(g, "t_nchw", tensorOf(tensor.Float64, tensor.Shape{n, f, oh, ow}, tg)),
		constant(g, "t_nhwc", tensorOf(tensor.Float64, tensor.Shape{n, oh, ow, f}, toNHWC(tg, n, f, oh, ow))),
	}
	var loss *G.Node
	ys := make([]*G.Node, 2)
	for i, l := range []*layers.Conv2DLayer{nchw, nhwc} {
		if ys[i], err = l.Apply(xs[i]); err != nil {
			t.Fatal(err)
		}
		li := G.Must(G.Sum(G.Must(G.HadamardProd(ys[i], ts[i]))))
		if loss == nil {
			loss = li
		} else {
			loss = G.Must(G.Add(loss, li))
		}
	}
	if diff := cmp.Diff(tensor.Shape{n, oh, ow, f}, ys[1].Shape()); diff != "" {
		t.Errorf("NHWC output shape (-want +got):\n%s", diff)
	}
	// The gradients with respect to t are the outputs.
	got := gradients(t, g, loss, xs[0], xs[1], ts[0], ts[1])
	got[1] = fromNHWC(got[1], n, c, h, w)
	got[3] = fromNHWC(got[3], n, f, oh, ow)
	if diff := cmp.Diff(got[0], got[1]); diff != "" {
		t.Errorf("input gradient (-NCHW +NHWC, transposed):\n%s", diff)
	}
	if diff := cmp.Diff(got[2], got[3]); diff != "" {
		t.Errorf("output (-NCHW +NHWC, transposed):\n%s", diff)
	}
}
