//go:build !openblas

package towers

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// TestPanelGonumIsGonum: the product split into panels equals gonum's,
// element for element, for every transpose, sizes that are and are not
// multiples of a panel, padded leading dimensions, and beta 0, 1 and 0.5.
func TestPanelGonumIsGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	randoms := func(n int) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = rng.NormFloat64()
		}
		return s
	}
	for _, c := range []struct{ m, n, k int }{
		{64, 192, 10}, {65, 193, 7}, {150, 400, 9}, {1, 700, 5}, {700, 1, 5}, {130, 400, 0}, {0, 9, 4},
	} {
		for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
				for _, beta := range []float64{0, 1, 0.5} {
					t.Run(fmt.Sprintf("%dx%dx%d/%c%c/beta%v", c.m, c.n, c.k, tA, tB, beta), func(t *testing.T) {
						ar, ac := c.m, c.k
						if tA != blas.NoTrans {
							ar, ac = c.k, c.m
						}
						br, bc := c.k, c.n
						if tB != blas.NoTrans {
							br, bc = c.n, c.k
						}
						lda, ldb, ldc := ac+3, bc+1, c.n+2
						a, b := randoms(max(ar*lda, 1)), randoms(max(br*ldb, 1))
						want := randoms(max(c.m*ldc, 1))
						got := append([]float64(nil), want...)
						gonum.Implementation{}.Dgemm(tA, tB, c.m, c.n, c.k, 1.5, a, lda, b, ldb, beta, want, ldc)
						panelGonum{}.Dgemm(tA, tB, c.m, c.n, c.k, 1.5, a, lda, b, ldb, beta, got, ldc)
						if !slices.Equal(want, got) {
							t.Errorf("C (-gonum +panels):\n%s", cmp.Diff(want, got))
						}
						a32, b32 := f32(a), f32(b)
						want32, got32 := f32(want), f32(want)
						gonum.Implementation{}.Sgemm(tA, tB, c.m, c.n, c.k, 1.5, a32, lda, b32, ldb, float32(beta), want32, ldc)
						panelGonum{}.Sgemm(tA, tB, c.m, c.n, c.k, 1.5, a32, lda, b32, ldb, float32(beta), got32, ldc)
						if !slices.Equal(want32, got32) {
							t.Errorf("float32 C (-gonum +panels):\n%s", cmp.Diff(want32, got32))
						}
					})
				}
			}
		}
	}
}

func f32(s []float64) []float32 {
	out := make([]float32, len(s))
	for i, v := range s {
		out[i] = float32(v)
	}
	return out
}
