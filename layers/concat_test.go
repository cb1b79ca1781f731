package layers_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/layers"
)

// TestConcat: layers.Concat of three matrices equals G.Concat(1, ...), in
// its value and in the gradients of a weighted sum of it with respect to
// each input, for float32 and float64.
func TestConcat(t *testing.T) {
	widths := []int{2, 1, 3}
	const rows = 4
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		t.Run(dt.String(), func(t *testing.T) {
			run := func(concat func(xs ...*G.Node) (*G.Node, error)) (out []float64, grads [][]float64) {
				g := G.NewGraph()
				var xs G.Nodes
				for i, k := range widths {
					vals := make([]float64, rows*k)
					for j := range vals {
						vals[j] = float64((i+1)*10+j) / 7
					}
					x := G.NewMatrix(g, dt, G.WithShape(rows, k), G.WithName(string(rune('a'+i))), G.WithValue(floats(dt, []int{rows, k}, vals)))
					xs = append(xs, x)
				}
				c, err := concat(xs...)
				if err != nil {
					t.Fatal(err)
				}
				w := make([]float64, rows*6)
				for j := range w {
					w[j] = float64(j%5) - 1.5
				}
				loss := G.Must(G.Sum(G.Must(G.HadamardProd(c, G.NewMatrix(g, dt, G.WithShape(rows, 6), G.WithName("w"), G.WithValue(floats(dt, []int{rows, 6}, w)))))))
				var cv G.Value
				G.Read(c, &cv)
				if _, err := G.Grad(loss, xs...); err != nil {
					t.Fatal(err)
				}
				vm := G.NewTapeMachine(g)
				defer vm.Close()
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				out = mustFloat64s(t, cv)
				for _, x := range xs {
					gv, err := x.Grad()
					if err != nil {
						t.Fatal(err)
					}
					grads = append(grads, mustFloat64s(t, gv))
				}
				return out, grads
			}
			gotOut, gotGrads := run(layers.Concat)
			wantOut, wantGrads := run(func(xs ...*G.Node) (*G.Node, error) { return G.Concat(1, xs...) })
			if diff := cmp.Diff(wantOut, gotOut); diff != "" {
				t.Errorf("value (-G.Concat +layers.Concat):\n%s", diff)
			}
			if diff := cmp.Diff(wantGrads, gotGrads); diff != "" {
				t.Errorf("gradients (-G.Concat +layers.Concat):\n%s", diff)
			}
		})
	}
}

func TestConcatErrors(t *testing.T) {
	g := G.NewGraph()
	a := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("a"))
	b := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("b"))
	f := G.NewMatrix(g, tensor.Float32, G.WithShape(2, 3), G.WithName("f"))
	v := G.NewVector(g, tensor.Float64, G.WithShape(2), G.WithName("v"))
	for _, c := range []struct {
		name string
		xs   []*G.Node
	}{{"none", nil}, {"nil", []*G.Node{a, nil}}, {"rows", []*G.Node{a, b}}, {"dtypes", []*G.Node{a, f}}, {"vector", []*G.Node{a, v}}} {
		if _, err := layers.Concat(c.xs...); err == nil {
			t.Errorf("%s: nil error, want one", c.name)
		}
	}
}

func floats(dt tensor.Dtype, shape []int, vals []float64) *tensor.Dense {
	if dt == tensor.Float32 {
		f := make([]float32, len(vals))
		for i, v := range vals {
			f[i] = float32(v)
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(f))
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64(nil), vals...)))
}

func mustFloat64s(t *testing.T, v G.Value) []float64 {
	t.Helper()
	f, err := numeric.Float64s(v)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
