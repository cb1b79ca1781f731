package layers_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/reference"
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
		{
			name:   "mse of vectors",
			shapes: []tensor.Shape{{9}, {9}},
			ours:   func(in []*G.Node) (*G.Node, error) { return layers.MeanSquaredError(in[0], in[1]) },
			theirs: func(in []*G.Node) (*G.Node, error) { return reference.MeanSquaredError(in[0], in[1]) },
		},
	}
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		tol := 1e-12
		if dt == tensor.Float32 {
			tol = 2e-5
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
					if diff := cmp.Diff(want, got, cmpopts.EquateApprox(tol, tol)); diff != "" {
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
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.do()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
