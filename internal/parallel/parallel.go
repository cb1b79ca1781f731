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

// Chunk is the most elements ForChunks hands one call: small enough that
// one large variable is spread over the cores, large enough that a call
// costs little next to its loop.
const Chunk = 1 << 14

// ForChunks calls fn(i, lo, hi) for consecutive ranges [lo, hi) of at most
// Chunk elements covering every item i of sizes[i] elements (an empty item
// gets no call), spread as For spreads its calls. Calls on one item touch
// disjoint ranges; elementwise work on an item's elements may run in them
// concurrently.
func ForChunks(sizes []int, fn func(i, lo, hi int) error) error {
	type span struct{ i, lo, hi int }
	var spans []span
	total := 0
	for i, n := range sizes {
		total += n
		for lo := 0; lo < n; lo += Chunk {
			spans = append(spans, span{i, lo, min(lo+Chunk, n)})
		}
	}
	return For(len(spans), total, func(k int) error {
		s := spans[k]
		return fn(s.i, s.lo, s.hi)
	})
}
