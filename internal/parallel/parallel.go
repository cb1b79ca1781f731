// Package parallel spreads independent per-variable work (summing tower
// gradients, applying an optimizer) over the cores when there is enough of
// it to pay for the goroutines.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// MinWork is the number of elements below which one goroutine beats
// spreading the work.
const MinWork = 1 << 16

// For calls fn(0..n-1), on up to GOMAXPROCS goroutines when work (the
// elements touched in all) is at least MinWork, else in order on this one.
// The calls must be independent. It returns the error of the lowest index
// that failed.
func For(n, work int, fn func(int) error) error {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 || work < MinWork {
		for j := range n {
			if err := fn(j); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := int(next.Add(1) - 1); j < n; j = int(next.Add(1) - 1) {
				errs[j] = fn(j)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
