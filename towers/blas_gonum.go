//go:build !openblas

package towers

import "errors"

const blasName = "gonum"

func setBLASThreads(int) error {
	return errors.New("gonum's pure-Go BLAS has no thread setting: it uses GOMAXPROCS goroutines for a large product (build with -tags openblas for OpenBLAS)")
}

func blasThreads() int { return 0 }
