//go:build openblas

// Built with -tags openblas, towerflow's graphs do their linear algebra in
// OpenBLAS (through gonum.org/v1/netlib/blas/netlib and cgo) instead of
// gonum's pure-Go BLAS. Debian/Ubuntu: apt-get install libopenblas-dev.
// This file links -lopenblas itself, so no CGO_LDFLAGS are needed; with
// OpenBLAS installed elsewhere, point CGO_CFLAGS / CGO_LDFLAGS at it (-L).
//
// OpenBLAS starts limited to one thread: towers, one per core, are what use
// the cores; a multi-threaded BLAS under every tower would oversubscribe
// them. With fewer towers than cores, SetBLASThreads gives each call more.

package towers

/*
#cgo LDFLAGS: -lopenblas
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
char *openblas_get_corename(void);
*/
import "C"

import (
	"gonum.org/v1/netlib/blas/netlib"
	G "gorgonia.org/gorgonia"
)

func init() {
	C.openblas_set_num_threads(1)
	G.Use(netlib.Implementation{})
}

// blasName names OpenBLAS and the CPU whose kernels it runs: the one it
// detected, or the one OPENBLAS_CORETYPE names (README, Performance: on the
// development VM's AMD CPU OpenBLAS 0.3.21 detects Cooperlake, whose
// AVX-512 kernels do ResNet's convolution products 1.7–2.2 times as fast
// as the Haswell ones its environment asks for).
func blasName() string {
	return "OpenBLAS (" + C.GoString(C.openblas_get_corename()) + " kernels)"
}

func setBLASThreads(n int) error {
	C.openblas_set_num_threads(C.int(n))
	return nil
}

func blasThreads() int { return int(C.openblas_get_num_threads()) }
