package layers_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/reference"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/layers"
)

// net is one graph under test: its inputs, and the loss and gradients read
// as they are computed.
type net struct {
	g      *G.ExprGraph
	inputs []*G.Node
	reads  []*G.Value
	vm     G.VM
}

// build makes a graph with the given inputs (all differentiated), the loss
// from body, and its gradients with respect to every input.
func build(t *testing.T, dt tensor.Dtype, shapes []tensor.Shape, body func(in []*G.Node) (*G.Node, error)) *net {
	t.Helper()
	n := &net{g: G.NewGraph()}
	for i, s := range shapes {
		n.inputs = append(n.inputs, G.NewTensor(n.g, dt, len(s), G.WithShape(s...), G.WithName(fmt.Sprintf("in%d", i))))
	}
	loss, err := body(n.inputs)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	grads, err := G.Grad(loss, n.inputs...)
	if err != nil {
		t.Fatalf("grad: %v", err)
	}
	for _, o := range append(G.Nodes{loss}, grads...) {
		v := new(G.Value)
		G.Read(o, v)
		n.reads = append(n.reads, v)
	}
	n.vm = G.NewTapeMachine(n.g)
	t.Cleanup(func() { n.vm.Close() })
	return n
}

// run feeds values and returns the loss and the gradients as float64s.
func (n *net) run(t *testing.T, values []*tensor.Dense) [][]float64 {
	t.Helper()
	n.vm.Reset()
	for i, v := range values {
		if err := G.Let(n.inputs[i], v); err != nil {
			t.Fatalf("let %d: %v", i, err)
		}
	}
	if err := n.vm.RunAll(); err != nil {
		t.Fatalf("run: %v", err)
	}
	out := make([][]float64, len(n.reads))
	for i, r := range n.reads {
		f, err := numeric.Float64s(*r)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		out[i] = f
	}
	return out
}

// randomValues returns tensors of the shapes with normal entries.
func randomValues(rng *rand.Rand, dt tensor.Dtype, shapes []tensor.Shape) []*tensor.Dense {
	var vs []*tensor.Dense
	for _, s := range shapes {
		f := make([]float64, s.TotalSize())
		for i := range f {
			f[i] = rng.NormFloat64()
		}
		var back any = f
		if dt == tensor.Float32 {
			f32 := make([]float32, len(f))
			for i, x := range f {
				f32[i] = float32(x)
			}
			back = f32
		}
		vs = append(vs, tensor.New(tensor.WithShape(s.Clone()...), tensor.WithBacking(back)))
	}
	return vs
}

// gorgoniaDense is the oracle: act(x·k + b) with gorgonia's own ops.
func gorgoniaDense(x, k, b *G.Node, act layers.Activation) (*G.Node, error) {
	return reference.Dense(x, k, b, act == layers.ReLU)
}

// TestAgainstGorgonia checks losses and every gradient (inputs included)
// of models written with layers against the same models written with
// gorgonia's ops, over two runs with different values: each op keeps its
// output between runs, so the second run must not see the first's.
func TestAgainstGorgonia(t *testing.T) {
	type model struct {
		name   string
		shapes []tensor.Shape
		ours   func(in []*G.Node) (*G.Node, error)
		theirs func(in []*G.Node) (*G.Node, error)
	}
	denseModel := func(act layers.Activation, bias bool, rows, in, units int) model {
		shapes := []tensor.Shape{{rows, in}, {in, units}, {rows, units}}
		if bias {
			shapes = append(shapes, tensor.Shape{units})
		}
		f := func(dense func(x, k, b *G.Node, act layers.Activation) (*G.Node, error), mse func(p, l *G.Node) (*G.Node, error)) func(in []*G.Node) (*G.Node, error) {
			return func(in []*G.Node) (*G.Node, error) {
				var b *G.Node
				if bias {
					b = in[3]
				}
				y, err := dense(in[0], in[1], b, act)
				if err != nil {
					return nil, err
				}
				return mse(y, in[2])
			}
		}
		return model{
			name:   fmt.Sprintf("dense %v bias=%t %dx%d→%d", act, bias, rows, in, units),
			shapes: shapes,
			ours:   f(layers.Dense, layers.MeanSquaredError),
			theirs: f(gorgoniaDense, reference.MeanSquaredError),
		}
	}
	convModel := func(c layers.Conv, bias bool, n, ch, h, w, f, kh, kw int) model {
		sh, sw := max(c.Stride[0], 1), max(c.Stride[1], 1)
		oh, ow := (h+2*c.Padding[0]-kh)/sh+1, (w+2*c.Padding[1]-kw)/sw+1
		shapes := []tensor.Shape{{n, ch, h, w}, {f, ch, kh, kw}, {n, f, oh, ow}}
		if bias {
			shapes = append(shapes, tensor.Shape{f})
		}
		bias3 := func(in []*G.Node) *G.Node {
			if bias {
				return in[3]
			}
			return nil
		}
		return model{
			name:   fmt.Sprintf("conv %v bias=%t %v⋆%v", c, bias, shapes[0], shapes[1]),
			shapes: shapes,
			ours: func(in []*G.Node) (*G.Node, error) {
				y, err := layers.Conv2D(in[0], in[1], bias3(in), c)
				if err != nil {
					return nil, err
				}
				return layers.MeanSquaredError(y, in[2])
			},
			theirs: func(in []*G.Node) (*G.Node, error) {
				y, err := reference.Conv2D(in[0], in[1], bias3(in), [2]int{sh, sw}, c.Padding, c.Activation == layers.ReLU)
				if err != nil {
					return nil, err
				}
				return reference.MeanSquaredError(y, in[2])
			},
		}
	}
	poolModel := func(n, ch, h, w int, size, stride [2]int) model {
		if stride == ([2]int{}) {
			stride = size
		}
		oh, ow := (h-size[0])/stride[0]+1, (w-size[1])/stride[1]+1
		return model{
			name:   fmt.Sprintf("max pool %v stride %v on (%d, %d, %d, %d)", size, stride, n, ch, h, w),
			shapes: []tensor.Shape{{n, ch, h, w}, {n, ch, oh, ow}},
			ours: func(in []*G.Node) (*G.Node, error) {
				p, err := layers.MaxPool2D(in[0], size, stride)
				if err != nil {
					return nil, err
				}
				return layers.MeanSquaredError(p, in[1])
			},
			theirs: func(in []*G.Node) (*G.Node, error) {
				p, err := reference.MaxPool2D(in[0], size, stride)
				if err != nil {
					return nil, err
				}
				return reference.MeanSquaredError(p, in[1])
			},
		}
	}
	avgPoolModel := func(n, ch, h, w int, size, stride [2]int) model {
		if stride == ([2]int{}) {
			stride = size
		}
		oh, ow := (h-size[0])/stride[0]+1, (w-size[1])/stride[1]+1
		return model{
			name:   fmt.Sprintf("avg pool %v stride %v on (%d, %d, %d, %d)", size, stride, n, ch, h, w),
			shapes: []tensor.Shape{{n, ch, h, w}, {n, ch, oh, ow}},
			ours: func(in []*G.Node) (*G.Node, error) {
				p, err := layers.AvgPool2D(in[0], size, stride)
				if err != nil {
					return nil, err
				}
				return layers.MeanSquaredError(p, in[1])
			},
			theirs: func(in []*G.Node) (*G.Node, error) {
				p, err := reference.AvgPool2D(in[0], size, stride)
				if err != nil {
					return nil, err
				}
				return reference.MeanSquaredError(p, in[1])
			},
		}
	}
	models := []model{
		denseModel(layers.ReLU, true, 6, 5, 4),
		denseModel(layers.ReLU, false, 6, 5, 4),
		denseModel(layers.Linear, true, 6, 5, 4),
		denseModel(layers.Linear, false, 1, 7, 3),
		denseModel(layers.ReLU, true, 1, 1, 1),
		{
			name:   "two layers",
			shapes: []tensor.Shape{{8, 4}, {4, 6}, {6}, {6, 3}, {3}, {8, 3}},
			ours: func(in []*G.Node) (*G.Node, error) {
				h, err := layers.Dense(in[0], in[1], in[2], layers.ReLU)
				if err != nil {
					return nil, err
				}
				y, err := layers.Dense(h, in[3], in[4], layers.Linear)
				if err != nil {
					return nil, err
				}
				return layers.MeanSquaredError(y, in[5])
			},
			theirs: func(in []*G.Node) (*G.Node, error) {
				h, err := gorgoniaDense(in[0], in[1], in[2], layers.ReLU)
				if err != nil {
					return nil, err
				}
				y, err := gorgoniaDense(h, in[3], in[4], layers.Linear)
				if err != nil {
					return nil, err
				}
				return reference.MeanSquaredError(y, in[5])
			},
		},
		{
			name:   "rectify rank 3",
			shapes: []tensor.Shape{{2, 3, 4}, {2, 3, 4}},
			ours: func(in []*G.Node) (*G.Node, error) {
				r, err := layers.Rectify(in[0])
				if err != nil {
					return nil, err
				}
				return layers.MeanSquaredError(r, in[1])
			},
			theirs: func(in []*G.Node) (*G.Node, error) {
				r, err := G.Rectify(in[0])
				if err != nil {
					return nil, err
				}
				return reference.MeanSquaredError(r, in[1])
			},
		},
		convModel(layers.Conv{Activation: layers.ReLU, Padding: [2]int{1, 1}}, true, 2, 3, 6, 5, 4, 3, 3),
		convModel(layers.Conv{Activation: layers.Linear}, false, 2, 1, 5, 5, 2, 3, 2),
		// Stride 1 runs as one product per tap over a padded layout whose
		// rows and images share their padding: padding wider than the
		// kernel (the output outgrows the padded rows), a 1×1 kernel, one
		// image.
		convModel(layers.Conv{Padding: [2]int{2, 0}}, true, 3, 2, 4, 6, 3, 1, 3),
		convModel(layers.Conv{Activation: layers.ReLU, Padding: [2]int{0, 3}}, false, 2, 2, 3, 4, 2, 2, 2),
		convModel(layers.Conv{}, true, 1, 4, 5, 5, 3, 1, 1),
		// Large enough to be laid out in chunks of images (two and a
		// partial one in float32, one at a time in float64), whose kernel
		// gradients add up.
		convModel(layers.Conv{Activation: layers.ReLU, Padding: [2]int{1, 1}}, true, 5, 8, 26, 27, 8, 3, 3),
		convModel(layers.Conv{Activation: layers.ReLU, Stride: [2]int{2, 2}, Padding: [2]int{1, 0}}, true, 3, 2, 7, 6, 3, 3, 3),
		convModel(layers.Conv{Activation: layers.Linear, Stride: [2]int{1, 2}, Padding: [2]int{2, 2}}, true, 1, 2, 4, 5, 2, 2, 3),
		// ResNet on 32×32: a strided 3×3 "same" convolution and the 1×1
		// strided projection of option B.
		convModel(layers.Conv{Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}, false, 2, 3, 8, 8, 4, 3, 3),
		convModel(layers.Conv{Stride: [2]int{2, 2}}, false, 2, 3, 8, 8, 4, 1, 1),
		{
			name:   "residual add relu, global average pool",
			shapes: []tensor.Shape{{2, 3, 4, 5}, {2, 3, 4, 5}, {2, 3}},
			ours: func(in []*G.Node) (*G.Node, error) {
				a, err := layers.Add(in[0], in[1], layers.ReLU)
				if err != nil {
					return nil, err
				}
				p, err := layers.GlobalAvgPool2D(a)
				if err != nil {
					return nil, err
				}
				return layers.MeanSquaredError(p, in[2])
			},
			theirs: func(in []*G.Node) (*G.Node, error) {
				a := G.Must(G.Rectify(G.Must(G.Add(in[0], in[1]))))
				p := G.Must(G.Mean(G.Must(G.Mean(a, 3)), 2))
				return reference.MeanSquaredError(p, in[2])
			},
		},
		{
			name:   "residual add linear",
			shapes: []tensor.Shape{{3, 4}, {3, 4}, {3, 4}},
			ours: func(in []*G.Node) (*G.Node, error) {
				a, err := layers.Add(in[0], in[1], layers.Linear)
				if err != nil {
					return nil, err
				}
				return layers.MeanSquaredError(a, in[2])
			},
			theirs: func(in []*G.Node) (*G.Node, error) {
				return reference.MeanSquaredError(G.Must(G.Add(in[0], in[1])), in[2])
			},
		},
		avgPoolModel(2, 3, 6, 8, [2]int{2, 2}, [2]int{0, 0}),
		avgPoolModel(1, 2, 7, 5, [2]int{3, 2}, [2]int{2, 1}),
		avgPoolModel(2, 2, 5, 5, [2]int{2, 2}, [2]int{1, 1}),
		poolModel(2, 3, 6, 8, [2]int{2, 2}, [2]int{0, 0}),
		poolModel(1, 2, 7, 5, [2]int{3, 2}, [2]int{2, 1}),
		{
			name:   "small cnn",
			shapes: []tensor.Shape{{4, 3, 8, 8}, {5, 3, 3, 3}, {5}, {5 * 4 * 4, 2}, {2}, {4, 2}},
			ours: func(in []*G.Node) (*G.Node, error) {
				c, err := layers.Conv2D(in[0], in[1], in[2], layers.Conv{Padding: [2]int{1, 1}, Activation: layers.ReLU})
				if err != nil {
					return nil, err
				}
				p, err := layers.MaxPool2D(c, [2]int{2, 2}, [2]int{})
				if err != nil {
					return nil, err
				}
				flat, err := G.Reshape(p, tensor.Shape{4, 5 * 4 * 4})
				if err != nil {
					return nil, err
				}
				y, err := layers.Dense(flat, in[3], in[4], layers.Linear)
				if err != nil {
					return nil, err
				}
				return layers.MeanSquaredError(y, in[5])
			},
			theirs: func(in []*G.Node) (*G.Node, error) {
				c, err := reference.Conv2D(in[0], in[1], in[2], [2]int{1, 1}, [2]int{1, 1}, true)
				if err != nil {
					return nil, err
				}
				p, err := reference.MaxPool2D(c, [2]int{2, 2}, [2]int{2, 2})
				if err != nil {
					return nil, err
				}
				flat, err := G.Reshape(p, tensor.Shape{4, 5 * 4 * 4})
				if err != nil {
					return nil, err
				}
				y, err := reference.Dense(flat, in[3], in[4], false)
				if err != nil {
					return nil, err
				}
				return reference.MeanSquaredError(y, in[5])
			},
		},
		{
			name:   "mse of vectors",
			shapes: []tensor.Shape{{9}, {9}},
			ours:   func(in []*G.Node) (*G.Node, error) { return layers.MeanSquaredError(in[0], in[1]) },
			theirs: func(in []*G.Node) (*G.Node, error) { return reference.MeanSquaredError(in[0], in[1]) },
		},
	}
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		// float32 sums of many products (a kernel's gradient) round
		// differently in another order: a margin, beside the fraction.
		frac, margin := 1e-12, 1e-12
		if dt == tensor.Float32 {
			frac, margin = 2e-5, 1e-3
		}
		for _, m := range models {
			t.Run(fmt.Sprintf("%v/%s", dt, m.name), func(t *testing.T) {
				ours := build(t, dt, m.shapes, m.ours)
				theirs := build(t, dt, m.shapes, m.theirs)
				rng := rand.New(rand.NewPCG(1, 2))
				for run := range 2 {
					vals := randomValues(rng, dt, m.shapes)
					want := theirs.run(t, vals)
					got := ours.run(t, vals)
					if diff := cmp.Diff(want, got, cmpopts.EquateApprox(frac, margin)); diff != "" {
						t.Errorf("run %d: loss and gradients (-gorgonia +layers):\n%s", run, diff)
					}
				}
			})
		}
	}
}

func TestErrors(t *testing.T) {
	g := G.NewGraph()
	f32 := func(name string, s ...int) *G.Node {
		return G.NewTensor(g, tensor.Float32, len(s), G.WithShape(s...), G.WithName(name))
	}
	x, k, b := f32("x", 4, 3), f32("k", 3, 2), f32("b", 2)
	ints := G.NewTensor(g, tensor.Int, 2, G.WithShape(4, 3), G.WithName("ints"))
	f64 := G.NewTensor(g, tensor.Float64, 2, G.WithShape(3, 2), G.WithName("k64"))
	for _, c := range []struct {
		name string
		do   func() (*G.Node, error)
		want []string // substrings of the error
	}{
		{"inner dims", func() (*G.Node, error) { return layers.Dense(x, f32("k2", 4, 2), b, layers.ReLU) }, []string{"layers.Dense", "x", "(4, 3)", "(4, 2)"}},
		{"bias shape", func() (*G.Node, error) { return layers.Dense(x, k, f32("b3", 3), layers.Linear) }, []string{"bias", "(3)"}},
		{"input rank", func() (*G.Node, error) { return layers.Dense(f32("v", 3), k, b, layers.Linear) }, []string{"input has shape (3)"}},
		{"int input", func() (*G.Node, error) { return layers.Dense(ints, k, b, layers.Linear) }, []string{"ints", "int"}},
		{"mixed dtypes", func() (*G.Node, error) { return layers.Dense(x, f64, nil, layers.Linear) }, []string{"k64", "float64", "float32"}},
		{"activation", func() (*G.Node, error) { return layers.Dense(x, k, b, layers.Activation(9)) }, []string{"Activation(9)"}},
		{"nil kernel", func() (*G.Node, error) { return layers.Dense(x, nil, b, layers.Linear) }, []string{"nil"}},
		{"mse shapes", func() (*G.Node, error) { return layers.MeanSquaredError(x, f32("y", 4, 2)) }, []string{"x", "(4, 3)", "y", "(4, 2)"}},
		{"rectify int", func() (*G.Node, error) { return layers.Rectify(ints) }, []string{"ints"}},
		{"conv channels", func() (*G.Node, error) {
			return layers.Conv2D(f32("im", 2, 3, 8, 8), f32("kc", 4, 2, 3, 3), nil, layers.Conv{})
		}, []string{"layers.Conv2D", "im", "(2, 3, 8, 8)", "(4, 2, 3, 3)", "3 input channels ≠ 2"}},
		{"conv kernel too big", func() (*G.Node, error) {
			return layers.Conv2D(f32("im2", 1, 1, 2, 2), f32("kb", 1, 1, 3, 3), nil, layers.Conv{})
		}, []string{"does not fit"}},
		{"conv bias", func() (*G.Node, error) {
			return layers.Conv2D(f32("im3", 1, 1, 4, 4), f32("k3", 2, 1, 3, 3), f32("b5", 5), layers.Conv{})
		}, []string{"b5", "(5)", "want (2)"}},
		{"conv rank", func() (*G.Node, error) { return layers.Conv2D(x, f32("k4", 2, 3, 1, 1), nil, layers.Conv{}) }, []string{"want (N, C, H, W)"}},
		{"conv NHWC channels", func() (*G.Node, error) {
			return layers.Conv2D(f32("imh", 2, 8, 8, 3), f32("kh", 4, 8, 3, 3), nil, layers.Conv{Format: layers.NHWC})
		}, []string{"layers.Conv2D", "imh", "(2, 8, 8, 3)", "(N, H, W, C)", "3 input channels ≠ 8"}},
		{"conv no channels", func() (*G.Node, error) {
			return layers.Conv2D(f32("im0", 1, 4, 4, 0), f32("k0", 2, 0, 3, 3), nil, layers.Conv{Format: layers.NHWC})
		}, []string{"im0", "0 input channels, 2 filters"}},
		{"conv no filters", func() (*G.Node, error) {
			return layers.Conv2D(f32("imf", 1, 1, 4, 4), f32("kf", 0, 1, 3, 3), nil, layers.Conv{})
		}, []string{"imf", "1 input channels, 0 filters"}},
		{"conv NHWC rank", func() (*G.Node, error) {
			return layers.Conv2D(x, f32("k6", 2, 3, 1, 1), nil, layers.Conv{Format: layers.NHWC})
		}, []string{"want (N, H, W, C)"}},
		{"conv format", func() (*G.Node, error) {
			return layers.Conv2D(f32("im7", 1, 1, 4, 4), f32("k7", 1, 1, 3, 3), nil, layers.Conv{Format: layers.Format(7)})
		}, []string{"layers.Conv2D", "im7", "Format(7)"}},
		{"conv stride", func() (*G.Node, error) {
			return layers.Conv2D(f32("im5", 1, 1, 4, 4), f32("k5", 1, 1, 3, 3), nil, layers.Conv{Stride: [2]int{-1, 1}})
		}, []string{"no negative"}},
		{"pool rank", func() (*G.Node, error) { return layers.MaxPool2D(x, [2]int{2, 2}, [2]int{}) }, []string{"layers.MaxPool2D", "want (N, C, H, W)"}},
		{"pool window", func() (*G.Node, error) { return layers.MaxPool2D(f32("im6", 1, 1, 4, 4), [2]int{5, 2}, [2]int{}) }, []string{"window [5 2]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.do()
			wanterr.Mentions(t, err, c.want...)
		})
	}
}
