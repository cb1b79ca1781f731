//go:build !openblas

package bf16

// HasGemm is false without OpenBLAS (-tags openblas): gonum's BLAS has no
// bfloat16 matrix product.
func HasGemm() bool { return false }

// Gemm is not available without OpenBLAS; it must only be called where
// HasGemm reports true.
func Gemm(transA, transB bool, m, n, k int, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	panic("bf16.Gemm without OpenBLAS's cblas_sbgemm (HasGemm is false)")
}
