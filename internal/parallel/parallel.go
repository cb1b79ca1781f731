// Package parallel spreads work over the cores: the towers of a step
// (Gang) and independent per-variable work (ForChunks: summing tower
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

// Align is the granularity of ForChunks' cuts in elements: a 64-byte cache
// line of float32s, so that two goroutines write one line only where an
// item does not start on a line.
const Align = 16

// Chunk is the size of the ranges ForChunks cuts a share into: small
// enough that a goroutine done with its own share takes over the rest of a
// late one's in useful pieces, large enough that a call costs little next
// to its loop. The last range of a share takes the rest, up to twice that.
const Chunk = 1 << 14

// ForChunks calls fn(i, lo, hi) for ranges [lo, hi) that together cover
// every item i of sizes[i] elements; an empty range gets no call. When the
// items hold MinWork elements or more in all, each item is cut into one
// share per processor (Cores, the goroutines of a Gang) at multiples
// of Align, or, when it holds fewer than Chunk elements a processor, is
// one share, item i going to goroutine i mod Cores. Each goroutine
// runs its shares in item order, in ranges of Chunk (see Chunk). On the
// shared team (see Gang) the same sizes give the same goroutine the same
// shares on every call, so passes over the same items one after another
// (a step's gradient sums, then its update, then the next step's) find
// what each goroutine last wrote in its own core's cache. A goroutine done
// with its shares takes the ranges of the others that have not started on
// them yet, so one that starts late (its processor busy elsewhere) delays
// the call by no more than a range. Fewer elements than MinWork get one
// call per item, in order, on this goroutine. Calls on one item touch
// disjoint ranges; elementwise work on an item's elements may run in them
// concurrently. A goroutine stops at its first error; ForChunks returns
// the error of the lowest item that failed.
func ForChunks(sizes []int, fn func(i, lo, hi int) error) error {
	total := 0
	for _, n := range sizes {
		total += n
	}
	workers := Cores()
	if workers <= 1 || total < MinWork {
		for i, n := range sizes {
			if n == 0 {
				continue
			}
			if err := fn(i, 0, n); err != nil {
				return err
			}
		}
		return nil
	}
	// first[k][i] is the number of share k's first range in item i (ranges
	// numbered per share); next[k] the next range of share k to claim.
	first := make([][]int, workers)
	next := make([]atomic.Int64, workers)
	for k := range first {
		first[k] = make([]int, len(sizes)+1)
		for i, n := range sizes {
			lo, hi := share(i, n, k, workers)
			first[k][i+1] = first[k][i] + pieces(hi-lo)
		}
	}
	var mu sync.Mutex
	lowest, lowestErr := len(sizes), error(nil)
	Gang(workers, func(me int) {
		for d := range workers {
			k := (me + d) % workers
			starts := first[k]
			for r := int(next[k].Add(1) - 1); r < starts[len(sizes)]; r = int(next[k].Add(1) - 1) {
				i := sort.Search(len(sizes), func(i int) bool { return starts[i+1] > r })
				lo, hi := share(i, sizes[i], k, workers)
				if j := r - starts[i]; j < starts[i+1]-starts[i]-1 {
					lo, hi = lo+j*Chunk, lo+(j+1)*Chunk
				} else {
					lo += j * Chunk // the last range takes the rest
				}
				if err := fn(i, lo, hi); err != nil {
					mu.Lock()
					if i < lowest {
						lowest, lowestErr = i, err
					}
					mu.Unlock()
					return
				}
			}
		}
	})
	return lowestErr
}

// pieces is the number of ranges ForChunks cuts n elements of one share
// into: ranges of Chunk, the last one up to twice that.
func pieces(n int) int {
	if n == 0 {
		return 0
	}
	return max(1, n/Chunk)
}

// share is the range [lo, hi) of item i, of n elements, that goes to the
// k-th of parts goroutines: the whole item for goroutine i mod parts when
// it holds fewer than Chunk elements a goroutine; else the k-th of parts
// ranges of about n/parts elements cut at multiples of Align (the last
// ends at n).
func share(i, n, k, parts int) (lo, hi int) {
	if n < parts*Chunk {
		if i%parts == k {
			return 0, n
		}
		return 0, 0
	}
	at := func(k int) int {
		if k == parts {
			return n
		}
		return n * k / parts / Align * Align
	}
	return at(k), at(k + 1)
}
