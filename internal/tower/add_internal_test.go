package tower

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestTensorAddsRunInAKeptBuffer: gorgonia's addition of two tensors (what
// symbolic differentiation adds where a node feeds two others) runs in a
// buffer the program keeps, with gorgonia's result, the same buffer on
// every run; other additions (of a scalar) run as gorgonia's op.
func TestTensorAddsRunInAKeptBuffer(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		t.Run(dt.String(), func(t *testing.T) {
			g := G.NewGraph()
			a := G.NewMatrix(g, dt, G.WithShape(2, 3), G.WithName("a"), G.WithInit(G.RangedFrom(1)))
			b := G.NewMatrix(g, dt, G.WithShape(2, 3), G.WithName("b"), G.WithInit(G.RangedFrom(10)))
			sum := G.Must(G.Add(a, b))
			var one any = 1.0
			if dt == tensor.Float32 {
				one = float32(1)
			}
			shifted := G.Must(G.Add(sum, G.NewConstant(one)))
			p, err := newProgram(g, G.Nodes{shifted}, []*G.Node{sum, shifted})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.ops) != 1 {
				t.Fatalf("%d additions run in kept buffers, want 1 (the tensors' sum)", len(p.ops))
			}
			var first G.Value
			for run := range 2 {
				if err := p.run(); err != nil {
					t.Fatal(err)
				}
				v, _ := p.value(sum)
				got, _ := G.CloneValue(v)
				want := []float64{11, 13, 15, 17, 19, 21}
				if dt == tensor.Float32 {
					if diff := cmp.Diff([]float32{11, 13, 15, 17, 19, 21}, got.Data()); diff != "" {
						t.Errorf("run %d: sum (-want +got):\n%s", run, diff)
					}
				} else if diff := cmp.Diff(want, got.Data()); diff != "" {
					t.Errorf("run %d: sum (-want +got):\n%s", run, diff)
				}
				if run == 0 {
					first = v
				} else if v != first {
					t.Errorf("run %d: the sum is a new tensor, not the kept buffer", run)
				}
			}
		})
	}
}
