package layers_test

import (
	"fmt"
	"math"
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

// dropoutNet is a tower with y = Dropout(x) and the loss Σ y ⊙ w.
type dropoutNet struct {
	tw      *tower.Tower
	store   *towers.Store
	y, grad *G.Node
	shape   tensor.Shape
	dt      tensor.Dtype
}

// newDropoutNet builds tower index of count over a new store with seed.
func newDropoutNet(t *testing.T, seed uint64, name string, index, count int, dt tensor.Dtype, shape tensor.Shape, rate float64) *dropoutNet {
	t.Helper()
	store := towers.NewStore(towers.StoreConfig{Seed: seed})
	sc := towers.NewScope(0, count, towers.CPU(0), store, nil)
	if index > 0 {
		sc = towers.NewScope(index, count, towers.CPU(index), store, sc)
	}
	n := &dropoutNet{tw: tower.New(sc, nil), store: store, shape: shape, dt: dt}
	x, err := n.tw.Input("x", dt, shape)
	if err != nil {
		t.Fatal(err)
	}
	w, err := n.tw.Input("w", dt, shape)
	if err != nil {
		t.Fatal(err)
	}
	if n.y, err = layers.Dropout(n.tw.Scope, name, x, rate, true); err != nil {
		t.Fatal(err)
	}
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(n.y, w))))
	grads, err := G.Grad(loss, x)
	if err != nil {
		t.Fatal(err)
	}
	n.grad = grads[0]
	for _, o := range []*G.Node{n.y, n.grad} {
		if err := n.tw.Watch(o); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.tw.Compile(); err != nil {
		t.Fatal(err)
	}
	return n
}

// run sets the global step, feeds x and w and returns y and the gradient
// with respect to x.
func (n *dropoutNet) run(t *testing.T, step int64, x, w []float64) (y, dx []float64) {
	t.Helper()
	gs, err := n.store.Lookup(towers.GlobalStepName)
	if err != nil {
		t.Fatal(err)
	}
	gs.Data().([]int64)[0] = step
	if err := n.tw.Feed("x", tensorOf(n.dt, n.shape, x)); err != nil {
		t.Fatal(err)
	}
	if err := n.tw.Feed("w", tensorOf(n.dt, n.shape, w)); err != nil {
		t.Fatal(err)
	}
	if err := n.tw.Run(); err != nil {
		t.Fatal(err)
	}
	var out [][]float64
	for _, o := range []*G.Node{n.y, n.grad} {
		v, err := n.tw.Value(o)
		if err != nil {
			t.Fatal(err)
		}
		f, err := numeric.Float64s(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out[0], out[1]
}

func ramp(n int, a, b float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = a + b*float64(i%97)
	}
	return v
}

// TestDropout: each element is zeroed or scaled by 1/(1 − rate), about
// rate of them zeroed; the gradient passes exactly where the element was
// kept, scaled alike; the mask depends on the step at run time.
func TestDropout(t *testing.T) {
	shape := tensor.Shape{50, 4, 5, 5}
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		for _, rate := range []float64{0.1, 0.5, 0.9} {
			t.Run(fmt.Sprintf("%v/rate %v", dt, rate), func(t *testing.T) {
				net := newDropoutNet(t, 1, "drop", 0, 1, dt, shape, rate)
				size := shape.TotalSize()
				x, w := ramp(size, 1, 0.25), ramp(size, -2, 0.5)
				y, dx := net.run(t, 3, x, w)
				scale := 1 / (1 - rate)
				if dt == tensor.Float32 {
					scale = float64(float32(1 / (1 - rate)))
				}
				var wantDX []float64
				zeros := 0
				for i, v := range y {
					switch {
					case v == 0:
						zeros++
						wantDX = append(wantDX, 0)
					case v == roundTo(dt, x[i]*scale):
						wantDX = append(wantDX, roundTo(dt, w[i]*scale))
					default:
						t.Fatalf("y[%d] = %v, want 0 or %v", i, v, x[i]*scale)
					}
				}
				if diff := cmp.Diff(wantDX, dx); diff != "" {
					t.Errorf("gradient (-mask ⊙ w +got):\n%s", diff)
				}
				// A binomial count: 5 standard deviations either way.
				sd := math.Sqrt(float64(size) * rate * (1 - rate))
				if d := math.Abs(float64(zeros) - rate*float64(size)); d > 5*sd {
					t.Errorf("%d of %d zeroed, want about %v", zeros, size, rate*float64(size))
				}
				// Neighbours are drawn independently: both zeroed in
				// about rate² of the pairs.
				both := 0
				for i := 0; i+1 < len(y); i += 2 {
					if y[i] == 0 && y[i+1] == 0 {
						both++
					}
				}
				pairs, p := float64(size/2), rate*rate
				if d := math.Abs(float64(both) - p*pairs); d > 5*math.Sqrt(pairs*p*(1-p)) {
					t.Errorf("%d of %v pairs both zeroed, want about %v", both, pairs, p*pairs)
				}
				y2, _ := net.run(t, 3, x, w)
				if diff := cmp.Diff(y, y2); diff != "" {
					t.Errorf("same step again (-first +second):\n%s", diff)
				}
				if y4, _ := net.run(t, 4, x, w); cmp.Equal(y, y4) {
					t.Errorf("steps 3 and 4 drew the same mask")
				}
			})
		}
	}
}

func roundTo(dt tensor.Dtype, v float64) float64 {
	if dt == tensor.Float32 {
		return float64(float32(v))
	}
	return v
}

// TestDropoutSeeds: the mask is a function of the store's seed, the name,
// the tower's index and the step: equal when all four are, different when
// any one differs.
func TestDropoutSeeds(t *testing.T) {
	shape := tensor.Shape{8, 16}
	x, w := ramp(shape.TotalSize(), 1, 0), ramp(shape.TotalSize(), 1, 0)
	mask := func(seed uint64, name string, tower int, step int64) []float64 {
		y, _ := newDropoutNet(t, seed, name, tower, 2, tensor.Float64, shape, 0.5).run(t, step, x, w)
		return y
	}
	base := mask(7, "drop", 1, 10)
	if diff := cmp.Diff(base, mask(7, "drop", 1, 10)); diff != "" {
		t.Errorf("same seed, name, tower and step (-first +second):\n%s", diff)
	}
	for _, c := range []struct {
		what string
		y    []float64
	}{
		{"store seed", mask(8, "drop", 1, 10)},
		{"name", mask(7, "drop2", 1, 10)},
		{"tower", mask(7, "drop", 0, 10)},
		{"step", mask(7, "drop", 1, 11)},
	} {
		if cmp.Equal(base, c.y) {
			t.Errorf("another %s drew the same mask", c.what)
		}
	}
}

// TestDropoutIdentity: not training, or at rate 0, Dropout is x itself.
func TestDropoutIdentity(t *testing.T) {
	s := towers.NewScope(0, 1, towers.CPU(0), towers.NewStore(towers.StoreConfig{}), nil)
	x := G.NewMatrix(s.Graph(), tensor.Float32, G.WithShape(3, 4), G.WithName("x"))
	for _, c := range []struct {
		rate     float64
		training bool
	}{{0.5, false}, {0, true}} {
		y, err := layers.Dropout(s, "drop", x, c.rate, c.training)
		if err != nil {
			t.Fatal(err)
		}
		if y != x {
			t.Errorf("rate %v training %v: got node %v, want x itself", c.rate, c.training, y)
		}
	}
}

func TestDropoutErrors(t *testing.T) {
	s := towers.NewScope(0, 1, towers.CPU(0), towers.NewStore(towers.StoreConfig{}), nil)
	g := s.Graph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(3, 4), G.WithName("x"))
	ints := G.NewMatrix(g, tensor.Int, G.WithShape(3, 4), G.WithName("ints"))
	scalar := G.NewScalar(g, tensor.Float32, G.WithName("sc"))
	for _, c := range []struct {
		name string
		do   func() (*G.Node, error)
		want []string
	}{
		{"nil scope", func() (*G.Node, error) { return layers.Dropout(nil, "d", x, 0.5, true) }, []string{"layers.Dropout", `"d"`, "nil scope"}},
		{"nil input", func() (*G.Node, error) { return layers.Dropout(s, "d", nil, 0.5, true) }, []string{"nil input"}},
		{"rate 1", func() (*G.Node, error) { return layers.Dropout(s, "d", x, 1, true) }, []string{"rate 1", "[0, 1)"}},
		{"negative rate", func() (*G.Node, error) { return layers.Dropout(s, "d", x, -0.1, false) }, []string{"rate -0.1"}},
		{"NaN rate", func() (*G.Node, error) { return layers.Dropout(s, "d", x, math.NaN(), true) }, []string{"rate NaN"}},
		{"int input", func() (*G.Node, error) { return layers.Dropout(s, "d", ints, 0.5, true) }, []string{"ints", "int"}},
		{"scalar", func() (*G.Node, error) { return layers.Dropout(s, "d", scalar, 0.5, true) }, []string{"sc", "scalar"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.do()
			wanterr.Mentions(t, err, c.want...)
		})
	}
}
