package layers_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/tower"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/towers"
)

func newTower(t *testing.T) *tower.Tower {
	t.Helper()
	return tower.New(towers.NewScope(0, 1, towers.CPU(0), towers.NewStore(towers.StoreConfig{}), nil), nil)
}

func valueOf(t *testing.T, tw *tower.Tower, n *G.Node) []float64 {
	t.Helper()
	v, err := tw.Value(n)
	if err != nil {
		t.Fatal(err)
	}
	f, err := numeric.Float64s(v)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestReshapeSharesMemory: in a tower, Flatten's value is a header over
// its input's memory, the same header run after run while that memory
// stays (the input an op of this package), with the run's values.
func TestReshapeSharesMemory(t *testing.T) {
	tw := newTower(t)
	x, err := tw.Input("x", tensor.Float64, tensor.Shape{2, 3, 2, 2})
	if err != nil {
		t.Fatal(err)
	}
	r, err := layers.Rectify(x)
	if err != nil {
		t.Fatal(err)
	}
	f, err := layers.Flatten(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []*G.Node{r, f} {
		if err := tw.Watch(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Compile(); err != nil {
		t.Fatal(err)
	}
	var first G.Value
	for run := range 2 {
		vals := make([]float64, 24)
		for i := range vals {
			vals[i] = float64(i*(run+1)) - 5
		}
		if err := tw.Feed("x", tensor.New(tensor.WithShape(2, 3, 2, 2), tensor.WithBacking(vals))); err != nil {
			t.Fatal(err)
		}
		if err := tw.Run(); err != nil {
			t.Fatal(err)
		}
		rv, _ := tw.Value(r)
		fv, _ := tw.Value(f)
		if !fv.Shape().Eq(tensor.Shape{2, 12}) {
			t.Errorf("run %d: shape %v, want (2, 12)", run, fv.Shape())
		}
		if fv.Uintptr() != rv.Uintptr() {
			t.Errorf("run %d: the flattened value does not share its input's memory", run)
		}
		if run == 0 {
			first = fv
		} else if fv != first {
			t.Errorf("run %d: a new header, want the first run's", run)
		}
		for i := range vals {
			vals[i] = max(vals[i], 0)
		}
		if diff := cmp.Diff(vals, valueOf(t, tw, f)); diff != "" {
			t.Errorf("run %d (-want +got):\n%s", run, diff)
		}
	}
}

// TestReshapeWithInPlaceOps: a header followed by a gorgonia op that
// could write its argument in place (G.Add), while the header's input is
// read again afterwards. On gorgonia's tape machine the add writes through
// the header (as after G.Reshape); a tower's program gives every op its
// own result, so the values are right.
func TestReshapeWithInPlaceOps(t *testing.T) {
	tw := newTower(t)
	x, err := tw.Input("x", tensor.Float64, tensor.Shape{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	x2, err := layers.Rectify(x)
	if err != nil {
		t.Fatal(err)
	}
	r, err := layers.Reshape(x2, tensor.Shape{3, 2})
	if err != nil {
		t.Fatal(err)
	}
	c := G.NewConstant(tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{100, 100, 100, 100, 100, 100})))
	a := G.Must(G.Add(r, c))
	back, err := layers.Reshape(a, tensor.Shape{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	z := G.Must(G.HadamardProd(back, x2))
	if err := tw.Watch(z); err != nil {
		t.Fatal(err)
	}
	if err := tw.Compile(); err != nil {
		t.Fatal(err)
	}
	if err := tw.Feed("x", tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))); err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		if err := tw.Run(); err != nil {
			t.Fatal(err)
		}
		want := []float64{101, 204, 309, 416, 525, 636} // (x + 100)·x
		if diff := cmp.Diff(want, valueOf(t, tw, z)); diff != "" {
			t.Errorf("run %d (-want +got):\n%s", run, diff)
		}
	}
}

func TestReshapeErrors(t *testing.T) {
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float32, 3, G.WithShape(2, 3, 4), G.WithName("x"))
	v := G.NewVector(g, tensor.Float32, G.WithShape(5), G.WithName("v"))
	for _, c := range []struct {
		name string
		do   func() (*G.Node, error)
		want []string
	}{
		{"sizes differ", func() (*G.Node, error) { return layers.Reshape(x, tensor.Shape{5, 5}) }, []string{"layers.Reshape", "x", "(2, 3, 4)", "24 elements", "(5, 5)", "25"}},
		{"zero dimension", func() (*G.Node, error) { return layers.Reshape(x, tensor.Shape{24, 0}) }, []string{"non-positive"}},
		{"to a scalar", func() (*G.Node, error) { return layers.Reshape(x, tensor.Shape{}) }, []string{"at least one dimension"}},
		{"nil", func() (*G.Node, error) { return layers.Reshape(nil, tensor.Shape{1}) }, []string{"nil input"}},
		{"flatten a vector", func() (*G.Node, error) { return layers.Flatten(v) }, []string{"layers.Flatten", "v", "(5)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.do()
			wanterr.Mentions(t, err, c.want...)
		})
	}
	if m := G.NewMatrix(g, tensor.Float32, G.WithShape(2, 3)); G.Must(layers.Flatten(m)) != m {
		t.Errorf("Flatten of a matrix is not the matrix itself")
	}
}
