package towers

import "fmt"

// SetBLASThreads sets how many threads one BLAS call (a matrix product in
// any tower) may use. It applies to the whole process and starts at 1: one
// thread per tower, right when there are as many towers as cores (the
// default devices). With OpenBLAS (the openblas build tag) it is OpenBLAS's
// thread count. With gonum's pure-Go BLAS (the default build), 1 runs each
// product on the calling goroutine and any larger n lets gonum spread a
// large product over GOMAXPROCS goroutines, as gonum does by itself.
func SetBLASThreads(n int) error {
	if n < 1 {
		return fmt.Errorf("BLAS threads: %d, want at least 1", n)
	}
	if err := setBLASThreads(n); err != nil {
		return fmt.Errorf("BLAS threads: %w", err)
	}
	return nil
}

// BLAS names the BLAS towers use, "gonum" or "OpenBLAS (K kernels)" with K
// the CPU whose kernels OpenBLAS runs ("SkylakeX" on a CPU with AVX-512),
// and the threads one call may use, as SetBLASThreads set them.
func BLAS() (name string, threads int) { return blasName(), blasThreads() }
