//go:build !openblas

package towers

import (
	"sync/atomic"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	G "gorgonia.org/gorgonia"
)

func blasName() string { return "gonum" }

// gonumThreads is the BLAS thread setting of the pure-Go build: 1 (the
// default) splits every matrix product into panels small enough that gonum
// computes each on the calling goroutine; more lets gonum spread a large
// product over GOMAXPROCS goroutines.
var gonumThreads atomic.Int64

func init() {
	gonumThreads.Store(1)
	G.Use(panelGonum{})
}

func setBLASThreads(n int) error {
	gonumThreads.Store(int64(n))
	return nil
}

func blasThreads() int { return int(gonumThreads.Load()) }

// panelGonum is gonum's BLAS whose matrix products, with one thread, run on
// the calling goroutine: towers, one per core, use the cores, where gonum
// on its own would start GOMAXPROCS goroutines under every tower. (On the
// 2-core development VM this made one tower no slower and two towers a
// third faster.)
type panelGonum struct{ gonum.Implementation }

// gonum multiplies serially when C has fewer than 4 blocks of 64×64; a
// panel of 64×192 has 3.
const panelRows, panelCols = 64, 192

func (p panelGonum) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	panels(tA, tB, m, n, k, lda, ldb, ldc, func(mi, nj, ai, bj, cij int) {
		p.Implementation.Sgemm(tA, tB, mi, nj, k, alpha, a[ai:], lda, b[bj:], ldb, beta, c[cij:], ldc)
	}, func() {
		p.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	})
}

func (p panelGonum) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	panels(tA, tB, m, n, k, lda, ldb, ldc, func(mi, nj, ai, bj, cij int) {
		p.Implementation.Dgemm(tA, tB, mi, nj, k, alpha, a[ai:], lda, b[bj:], ldb, beta, c[cij:], ldc)
	}, func() {
		p.Implementation.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	})
}

// panels calls panel for every panelRows×panelCols block of the m×n
// product C, with its size and the offsets of its rows of op(A), its
// columns of op(B) and its corner in C; or whole once, when more than one
// thread is allowed, k is 0 (only C's scaling), or the product is one panel
// anyway.
func panels(tA, tB blas.Transpose, m, n, k, lda, ldb, ldc int, panel func(mi, nj, ai, bj, cij int), whole func()) {
	if gonumThreads.Load() > 1 || k == 0 || (m <= panelRows && n <= panelCols) {
		whole()
		return
	}
	for i := 0; i < m; i += panelRows {
		ai := i * lda // rows i… of A
		if tA != blas.NoTrans {
			ai = i // columns i… of the stored Aᵀ
		}
		for j := 0; j < n; j += panelCols {
			bj := j // columns j… of B
			if tB != blas.NoTrans {
				bj = j * ldb // rows j… of the stored Bᵀ
			}
			panel(min(panelRows, m-i), min(panelCols, n-j), ai, bj, i*ldc+j)
		}
	}
}
