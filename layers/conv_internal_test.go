package layers

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gorgonia.org/tensor"
)

// TestCol2imIsIm2colsAdjoint: for every geometry, ⟨im2col(x), c⟩ = ⟨x,
// col2im(c)⟩ for random x and c — the property the input gradient of a
// convolution rests on — including strides larger than the kernel and
// padding larger than it (taps that never see the image).
func TestCol2imIsIm2colsAdjoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var geos []convGeom
	for _, c := range []struct {
		x, k            tensor.Shape
		stride, padding [2]int
	}{
		{tensor.Shape{1, 1, 5, 5}, tensor.Shape{1, 1, 3, 3}, [2]int{1, 1}, [2]int{0, 0}},
		{tensor.Shape{1, 2, 6, 7}, tensor.Shape{3, 2, 3, 2}, [2]int{1, 1}, [2]int{1, 1}},
		{tensor.Shape{1, 3, 8, 5}, tensor.Shape{2, 3, 2, 3}, [2]int{2, 3}, [2]int{1, 2}},
		{tensor.Shape{1, 1, 4, 4}, tensor.Shape{1, 1, 1, 1}, [2]int{3, 3}, [2]int{0, 0}},
		{tensor.Shape{1, 2, 3, 3}, tensor.Shape{1, 2, 2, 2}, [2]int{1, 1}, [2]int{3, 3}},
		{tensor.Shape{1, 1, 7, 2}, tensor.Shape{1, 1, 7, 2}, [2]int{1, 1}, [2]int{0, 0}},
	} {
		g, err := newConvGeom(c.x, c.k, Conv{Stride: c.stride, Padding: c.padding})
		if err != nil {
			t.Fatal(err)
		}
		geos = append(geos, g)
	}
	for _, g := range geos {
		t.Run(fmt.Sprint(g), func(t *testing.T) {
			x := make([]float64, g.c*g.h*g.w)
			c := make([]float64, g.ckk()*g.ohw())
			for i := range x {
				x[i] = rng.NormFloat64()
			}
			for i := range c {
				c[i] = rng.NormFloat64()
			}
			cols := make([]float64, len(c))
			im2col(g, x, cols)
			back := make([]float64, len(x))
			col2im(g, c, back)
			var lhs, rhs float64
			for i := range c {
				lhs += cols[i] * c[i]
			}
			for i := range x {
				rhs += x[i] * back[i]
			}
			if diff := cmp.Diff(lhs, rhs, cmpopts.EquateApprox(1e-12, 1e-12)); diff != "" {
				t.Errorf("⟨im2col(x), c⟩ − ⟨x, col2im(c)⟩ (-lhs +rhs):\n%s", diff)
			}
		})
	}
}
