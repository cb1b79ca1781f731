package layers

import (
	"fmt"
	"math"
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

// TestConvTapsAgainstDirectSums: the tap products (forward, kernel gradient,
// input gradient) equal the convolution's sums written out term by term,
// for random stride-1 geometries (padding up to 4 on either axis, wider
// than the kernel too; kernels up to the padded image; batches of 1 to 6,
// so several chunks and a partial last one where the images are large),
// with every scratch buffer full of NaNs before each run: an element read
// before it is written would show.
func TestConvTapsAgainstDirectSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	chunked := 0
	for trial := range 60 {
		c, f := 1+rng.IntN(8), 1+rng.IntN(8)
		h, w := 1+rng.IntN(30), 1+rng.IntN(30)
		ph, pw := rng.IntN(5), rng.IntN(5)
		kh, kw := 1+rng.IntN(min(h+2*ph, 5)), 1+rng.IntN(min(w+2*pw, 5))
		n := 1 + rng.IntN(6)
		g, err := newConvGeom(tensor.Shape{n, c, h, w}, tensor.Shape{f, c, kh, kw}, Conv{Padding: [2]int{ph, pw}})
		if err != nil {
			t.Fatal(err)
		}
		if g.chunk(8) < n {
			chunked++
		}
		x, k, dz := randoms(rng, n*c*h*w), randoms(rng, f*c*kh*kw), randoms(rng, n*f*g.ohw())
		wantY, wantDK, wantDX := directConv(g, x, k, dz)
		y, dk, dx := make([]float64, len(wantY)), make([]float64, len(k)), make([]float64, len(x))
		poisonScratch(g)
		convTaps(g, x, k, nil, y, false)
		poisonScratch(g)
		convTapsKernelGrad(g, x, dz, dk)
		poisonScratch(g)
		convTapsInputGrad(g, k, dz, dx)
		approx := cmpopts.EquateApprox(1e-12, 1e-12)
		for _, r := range []struct {
			what      string
			got, want []float64
		}{{"output", y, wantY}, {"kernel gradient", dk, wantDK}, {"input gradient", dx, wantDX}} {
			if diff := cmp.Diff(r.want, r.got, approx); diff != "" {
				t.Errorf("trial %d, %v, %d images a chunk: %s (-direct +taps):\n%s", trial, g, g.chunk(8), r.what, diff)
			}
		}
	}
	if chunked < 10 {
		t.Errorf("%d of the geometries ran in several chunks, want 10 at least", chunked)
	}
}

func randoms(rng *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = rng.NormFloat64()
	}
	return s
}

// poisonScratch fills the float64 scratch buffers a convolution of g
// borrows with NaNs.
func poisonScratch(g convGeom) {
	b := borrowTaps[float64](g)
	for _, s := range [][]float64{b.w, b.in, b.out} {
		for i := range s[:cap(s)] {
			s[:cap(s)][i] = math.NaN()
		}
	}
	b.giveBack()
}

// directConv returns y = x ⋆ k, the kernel's gradient Σ dz·x and the
// input's Σ dz·k, each as the sum over its terms, for any stride.
func directConv(g convGeom, x, k, dz []float64) (y, dk, dx []float64) {
	y, dk, dx = make([]float64, g.n*g.f*g.ohw()), make([]float64, len(k)), make([]float64, len(x))
	for n := range g.n {
		for f := range g.f {
			for oy := range g.oh {
				for ox := range g.ow {
					o := ((n*g.f+f)*g.oh+oy)*g.ow + ox
					for c := range g.c {
						for i := range g.kh {
							for j := range g.kw {
								iy, ix := oy*g.sh-g.ph+i, ox*g.sw-g.pw+j
								if iy < 0 || iy >= g.h || ix < 0 || ix >= g.w {
									continue
								}
								xi := ((n*g.c+c)*g.h+iy)*g.w + ix
								ki := ((f*g.c+c)*g.kh+i)*g.kw + j
								y[o] += x[xi] * k[ki]
								dk[ki] += dz[o] * x[xi]
								dx[xi] += dz[o] * k[ki]
							}
						}
					}
				}
			}
		}
	}
	return y, dk, dx
}
