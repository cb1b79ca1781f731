package tower

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/towers"
)

// residualRun builds a residual block in dt on a fresh tower (a
// normalization with ReLU, a convolution of its output, and a
// normalization adding that output back: the gradient with respect to the
// first normalization's output is a sum), channels last with c channels
// (the first normalization's gradient takes the sum as its two terms
// unless tape), runs it twice on random images and returns the watched
// values (output, loss, every variable's gradient) of both runs and how
// many sums the program handed to their readers.
func residualRun(t *testing.T, dt tensor.Dtype, c int, tape bool) ([][][]float64, int) {
	t.Helper()
	shape := tensor.Shape{2, 9, 10, c} // 180 rows: more than one block of 16 or 32 channels
	block := func(t *testing.T, tw *Tower) []*G.Node {
		x, err := tw.Input("x", dt, shape)
		if err != nil {
			t.Fatal(err)
		}
		y, err := tw.Input("y", dt, shape)
		if err != nil {
			t.Fatal(err)
		}
		cfg := layers.BatchNormConfig{Activation: layers.ReLU, Format: layers.NHWC}
		h := G.Must(layers.BatchNorm(tw.Scope, "bn0", x, true, cfg))
		k := tw.MustVariable("k", dt, tensor.Shape{c, c, 3, 3}, towers.GlorotUniform())
		conv := G.Must(layers.Conv2D(h, k, nil, layers.Conv{Padding: [2]int{1, 1}, Format: layers.NHWC}))
		out := G.Must(layers.BatchNormAdd(tw.Scope, "bn1", conv, h, true, cfg))
		loss := G.Must(layers.MeanSquaredError(out, y))
		names := []string{"k", "bn0/gamma", "bn0/beta", "bn1/gamma", "bn1/beta"}
		gs, err := tw.Gradients(loss, names)
		if err != nil {
			t.Fatal(err)
		}
		nodes := []*G.Node{out, loss}
		for _, name := range names {
			nodes = append(nodes, gs[name])
		}
		return nodes
	}
	r := rand.New(rand.NewPCG(uint64(c), 3))
	images := func(t *testing.T, tw *Tower, _ int) {
		for _, name := range []string{"x", "y"} {
			data := make([]float64, shape.TotalSize())
			for i := range data {
				data[i] = r.NormFloat64()*2 + 0.5
			}
			v := tensor.New(tensor.Of(dt), tensor.WithShape(shape...))
			if err := numeric.SetFloat64s(v.Data(), data); err != nil {
				t.Fatal(err)
			}
			if err := tw.Feed(name, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	runs, prog := runTower(t, block, tape, images)
	fused := 0
	if prog != nil {
		fused = len(prog.sums)
	}
	return runs, fused
}

// TestSumsFusedIntoReaders: a gradient sum whose one reader takes it as
// two terms (towers.SumInput: batch norm's input gradient with channels
// last) is not made; the reader gets its terms and computes what it
// computes from the sum, bit for bit (the tape machine, which adds, is
// the reference), in float32 (whole vectors of channels, 16 and 32 of
// them, and a tail) and float64.
func TestSumsFusedIntoReaders(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		for _, c := range []int{16, 32, 11} {
			t.Run(fmt.Sprintf("%v/%d channels", dt, c), func(t *testing.T) {
				want, _ := residualRun(t, dt, c, true)
				got, fused := residualRun(t, dt, c, false)
				if fused != 1 {
					t.Errorf("%d sums handed to their readers, want 1", fused)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("values (-tape machine +program):\n%s", diff)
				}
			})
		}
	}
}

// termsOp is fnOp taking its input as a sum's terms (towers.SumInput)
// when arg is 0: DoSum records them and returns do of their sum.
type termsOp struct {
	fnOp
	arg   int
	terms *[][]float64
}

func (o termsOp) SumsInput() int { return o.arg }

func (o termsOp) DoSum(b G.Value, in ...G.Value) (G.Value, error) {
	a := in[0].Data().([]float64)
	*o.terms = append(*o.terms, append(append([]float64(nil), a...), b.Data().([]float64)...))
	sum := make([]float64, len(a))
	for i := range a {
		sum[i] = a[i] + b.Data().([]float64)[i]
	}
	return o.do(tensor.New(tensor.WithShape(in[0].Shape()...), tensor.WithBacking(sum)))
}

// TestSumFusion: the program hands an addition of two tensors to its
// reader as terms only where the reader takes them (SumsInput 0 here),
// it is the addition's one reader and the addition is not watched; the
// values are the same either way.
func TestSumFusion(t *testing.T) {
	double := func(v G.Value) (G.Value, error) {
		d := v.Data().([]float64)
		out := make([]float64, len(d))
		for i, x := range d {
			out[i] = 2 * x
		}
		return tensor.New(tensor.WithShape(v.Shape()...), tensor.WithBacking(out)), nil
	}
	for _, tc := range []struct {
		name         string
		arg          int
		watchSum     bool
		secondReader bool
		fused        bool
	}{
		{"fused", 0, false, false, true},
		{"reader takes no sum", -1, false, false, false},
		{"sum watched", 0, true, false, false},
		{"two readers", 0, false, true, false},
		{"reader takes another input as terms", 1, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := G.NewGraph()
			a := G.NewVector(g, tensor.Float64, G.WithShape(3), G.WithName("a"), G.WithInit(G.RangedFrom(1)))
			b := G.NewVector(g, tensor.Float64, G.WithShape(3), G.WithName("b"), G.WithInit(G.RangedFrom(10)))
			sum := G.Must(G.Add(a, b))
			var terms [][]float64
			r := G.Must(G.ApplyOp(termsOp{fnOp: fnOp{name: "double", do: double}, arg: tc.arg, terms: &terms}, sum))
			roots, watched := G.Nodes{r}, []*G.Node{r}
			if tc.watchSum {
				watched = append(watched, sum)
			}
			if tc.secondReader {
				roots = append(roots, G.Must(G.Neg(sum)))
			}
			p, err := newProgram(g, roots, watched)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.run(); err != nil {
				t.Fatal(err)
			}
			v, _ := p.value(r)
			if diff := cmp.Diff([]float64{22, 26, 30}, v.Data()); diff != "" {
				t.Errorf("reader's value (-want +got):\n%s", diff)
			}
			var want [][]float64
			if tc.fused {
				want = [][]float64{{1, 2, 3, 10, 11, 12}}
			}
			if diff := cmp.Diff(want, terms); diff != "" {
				t.Errorf("terms handed to the reader (-want +got):\n%s", diff)
			}
			if got, _ := p.value(sum); tc.fused != (got == nil) {
				t.Errorf("sum's value %v, fused %t", got, tc.fused)
			}
		})
	}
}
