package layers_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/dnnl"
	"github.com/towerflow/towerflow/layers"
)

// TestPureGoConvolution: a float32 Conv2D is a pure-Go convolution in a
// build without oneDNN; a float64 one, its inputs and other ops never are.
func TestPureGoConvolution(t *testing.T) {
	tests := []struct {
		name string
		dt   tensor.Dtype
		want bool
	}{
		{"float32", tensor.Float32, !dnnl.Built},
		{"float64", tensor.Float64, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewTensor(g, tc.dt, 4, G.WithShape(1, 1, 4, 4), G.WithName("x"))
			k := G.NewTensor(g, tc.dt, 4, G.WithShape(2, 1, 3, 3), G.WithName("k"))
			y, err := layers.Conv2D(x, k, nil, layers.Conv{})
			if err != nil {
				t.Fatal(err)
			}
			sq := G.Must(G.Square(y))
			got := map[string]bool{}
			for _, n := range []*G.Node{x, k, y, sq} {
				got[n.Name()] = layers.PureGoConvolution(n)
			}
			want := map[string]bool{x.Name(): false, k.Name(): false, y.Name(): tc.want, sq.Name(): false}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pure-Go convolutions (-want +got):\n%s", diff)
			}
		})
	}
}
