package tower

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/towers"
)

// TestDifferentiateAgain: a loss differentiated after another one that
// went through the same nodes gets its own gradients, on the tower's
// program and on gorgonia's tape machine; where the record gorgonia keeps
// of the first differentiation could not be cleared, the second is an
// error naming the node, not a wrong gradient.
func TestDifferentiateAgain(t *testing.T) {
	tests := []struct {
		name    string
		tape    bool
		known   bool // whether gorgonia's Node.deriv is known
		wantErr []string
	}{
		{name: "program", known: true},
		{name: "tape", tape: true, known: true},
		{name: "deriv unknown", known: false, wantErr: []string{"cannot differentiate", "was differentiated before"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tapeOnly, derivKnown = tt.tape, tt.known
			defer func() { tapeOnly, derivKnown = false, true }()
			tw := New(towers.NewScope(0, 1, towers.CPU(0), towers.NewStore(towers.StoreConfig{}), nil), nil)
			defer tw.Close()
			x := input(t, tw, "x", 4, 1)
			a := tw.MustVariable("a", tensor.Float64, nil, towers.Constant(2))
			// l = Σ x·a², l3 = 3·l over l's nodes: d/da 2a·Σx = 40 and 120.
			l := G.Must(G.Sum(G.Must(G.Mul(x, G.Must(G.Mul(a, a))))))
			l3 := G.Must(G.Add(G.Must(G.Add(l, l)), l))
			var grads []*G.Node
			for _, loss := range []*G.Node{l, l3} {
				gs, err := tw.Gradients(loss, []string{"a"})
				if err != nil {
					if tt.wantErr == nil {
						t.Fatal(err)
					}
					wanterr.Mentions(t, err, tt.wantErr...)
					return
				}
				grads = append(grads, gs["a"])
			}
			if tt.wantErr != nil {
				t.Fatalf("no error, want one mentioning %q", tt.wantErr)
			}
			for _, g := range grads {
				if err := tw.Watch(g); err != nil {
					t.Fatal(err)
				}
			}
			if err := tw.Compile(); err != nil {
				t.Fatal(err)
			}
			if err := tw.Feed("x", tensor.New(tensor.WithShape(4, 1), tensor.WithBacking([]float64{1, 2, 3, 4}))); err != nil {
				t.Fatal(err)
			}
			if err := tw.Run(); err != nil {
				t.Fatal(err)
			}
			var got []float64
			for _, g := range grads {
				v, err := tw.Value(g)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, v.Data().(float64))
			}
			if diff := cmp.Diff([]float64{40, 120}, got); diff != "" {
				t.Errorf("gradients of l and 3·l (-want +got):\n%s", diff)
			}
		})
	}
}
