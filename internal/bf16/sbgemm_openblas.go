//go:build openblas

package bf16

/*
#cgo LDFLAGS: -lopenblas -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>

// OpenBLAS's cblas_sbgemm, looked up at run time: Debian's OpenBLAS 0.3.21
// declares it in cblas.h but is built without it (BUILD_BFLOAT16 off), so
// linking against it by name would fail there.
typedef void (*sbgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
	const uint16_t *a, int lda, const uint16_t *b, int ldb, float beta, float *c, int ldc);

static sbgemm_fn sbgemm;

static int tf_sbgemm_find(void) {
	sbgemm = (sbgemm_fn)dlsym(RTLD_DEFAULT, "cblas_sbgemm");
	return sbgemm != 0;
}

// 101: CblasRowMajor; 111, 112: CblasNoTrans, CblasTrans.
static void tf_sbgemm(int ta, int tb, int m, int n, int k, const uint16_t *a, int lda,
	const uint16_t *b, int ldb, float beta, float *c, int ldc) {
	sbgemm(101, ta ? 112 : 111, tb ? 112 : 111, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}
*/
import "C"

import "sync"

var sbgemmFound = sync.OnceValue(func() bool { return C.tf_sbgemm_find() != 0 })

// HasGemm says whether the BLAS has a bfloat16 matrix product: OpenBLAS's
// cblas_sbgemm, in a build with -tags openblas whose OpenBLAS was built
// with it.
func HasGemm() bool { return sbgemmFound() }

// Gemm sets c = op(a)·op(b) + beta·c for row-major matrices of bfloat16
// bits (op(a) m×k, op(b) k×n; op a transpose where the flag says so),
// multiplying in bfloat16 and summing in float32, into the float32 c (m×n,
// rows ldc apart). It must only be called where HasGemm reports true.
func Gemm(transA, transB bool, m, n, k int, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	ta, tb := C.int(0), C.int(0)
	if transA {
		ta = 1
	}
	if transB {
		tb = 1
	}
	var pa, pb *C.uint16_t
	if len(a) > 0 {
		pa = (*C.uint16_t)(&a[0])
	}
	if len(b) > 0 {
		pb = (*C.uint16_t)(&b[0])
	}
	C.tf_sbgemm(ta, tb, C.int(m), C.int(n), C.int(k), pa, C.int(lda), pb, C.int(ldb), C.float(beta), (*C.float)(&c[0]), C.int(ldc))
}
