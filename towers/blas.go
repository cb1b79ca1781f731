package towers

import "fmt"

// SetBLASThreads sets how many threads one BLAS call (a matrix product in
// any tower) may use. It applies to the whole process. Only OpenBLAS (the
// openblas build tag) has the setting; it starts at 1, one thread per
// tower, which is right when there are as many towers as cores. gonum's
// pure-Go BLAS, the default, spreads a large product over GOMAXPROCS
// goroutines by itself, and SetBLASThreads returns an error there.
func SetBLASThreads(n int) error {
	if n < 1 {
		return fmt.Errorf("BLAS threads: %d, want at least 1", n)
	}
	if err := setBLASThreads(n); err != nil {
		return fmt.Errorf("BLAS threads: %w", err)
	}
	return nil
}

// BLAS names the BLAS towers use and the threads one call may use (0 when
// the BLAS has no such setting): "OpenBLAS", 1.
func BLAS() (name string, threads int) { return blasName, blasThreads() }
