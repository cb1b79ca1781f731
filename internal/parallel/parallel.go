// Package parallel spreads work over the cores: the towers of a step
// (Gang) and independent per-variable work (For, ForChunks: summing tower
// gradients, applying an optimizer) when there is enough of it to pay for
// the hand-off.
//
// The goroutines doing it are a team started once and kept: an idle member
// spins for SpinFor, then parks. Handing work to a goroutine already
// running costs a store; waking one goes through the Go scheduler, which
// can leave it waiting for milliseconds while the processors are inside
// BLAS (cgo) calls.
package parallel

import (
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
)

// Gang calls fn(0..n-1) each on its own goroutine, all at the same time,
// fn(0) on the calling one, and returns when every call has returned. The
// others run on the shared team when it is free, else on new goroutines
// (a Gang inside a Gang, or two at once). A panic in any call is raised
// again on the calling goroutine once all have returned.
func Gang(n int, fn func(i int)) {
	if n < 1 {
		return
	}
	var first atomic.Pointer[any]
	call := func(i int) {
		defer func() {
			if r := recover(); r != nil {
				first.CompareAndSwap(nil, &r)
			}
		}()
		fn(i)
	}
	if !shared.run(n, call) {
		var wg sync.WaitGroup
		for i := 1; i < n; i++ {
			wg.Go(func() { call(i) })
		}
		call(0)
		wg.Wait()
	}
	if r := first.Load(); r != nil {
		panic(*r)
	}
}

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
	// The error of the lowest index that failed, without a slot per index.
	var mu sync.Mutex
	lowest, lowestErr := n, error(nil)
	var next atomic.Int64
	Gang(workers, func(int) {
		for j := int(next.Add(1) - 1); j < n; j = int(next.Add(1) - 1) {
			if err := fn(j); err != nil {
				mu.Lock()
				if j < lowest {
					lowest, lowestErr = j, err
				}
				mu.Unlock()
			}
		}
	})
	return lowestErr
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
	// first[i] is the number of item i's first chunk; chunk k is chunk
	// k-first[i] of the item whose range holds k. Nothing is allocated per
	// chunk: the work per step stays the same however large the items.
	first := make([]int, len(sizes)+1)
	total := 0
	for i, n := range sizes {
		total += n
		first[i+1] = first[i] + (n+Chunk-1)/Chunk
	}
	return For(first[len(sizes)], total, func(k int) error {
		i := sort.Search(len(sizes), func(i int) bool { return first[i+1] > k })
		lo := (k - first[i]) * Chunk
		return fn(i, lo, min(lo+Chunk, sizes[i]))
	})
}
