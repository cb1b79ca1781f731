package parallel

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/internal/testwait"
)

// withProcs runs the test with GOMAXPROCS set to n, so that the parallel
// path runs on any machine.
func withProcs(t *testing.T, n int) {
	t.Helper()
	old := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
}

// goroutine is the calling goroutine's number, from its stack's header.
func goroutine() int {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf = bytes.TrimPrefix(buf, []byte("goroutine "))
	id, err := strconv.Atoi(string(buf[:bytes.IndexByte(buf, ' ')]))
	if err != nil {
		panic(err)
	}
	return id
}

type span struct{ Item, Lo, Hi int }

// chunks runs ForChunks over sizes and returns the goroutine that ran
// each range.
func chunks(sizes []int) map[span]int {
	var mu sync.Mutex
	got := map[span]int{}
	err := ForChunks(sizes, func(i, lo, hi int) error {
		mu.Lock()
		defer mu.Unlock()
		got[span{i, lo, hi}] = goroutine()
		return nil
	})
	if err != nil {
		panic(err)
	}
	return got
}

// TestForChunks: the ranges that cover the items: below MinWork one per
// item; above it one share per processor (four here), cut at multiples of
// Align, in ranges of Chunk, the last of a share taking the rest; an item
// of fewer than Chunk elements a processor is one share.
func TestForChunks(t *testing.T) {
	withProcs(t, 4)
	for _, c := range []struct {
		sizes []int
		want  []span
	}{
		{sizes: []int{}, want: []span{}},
		{sizes: []int{0, 5, 0}, want: []span{{1, 0, 5}}},
		{sizes: []int{MinWork - 8, 7}, want: []span{{0, 0, MinWork - 8}, {1, 0, 7}}},
		{sizes: []int{MinWork + 3, 0, 7, 100}, want: []span{
			{0, 0, 16384}, {0, 16384, 32768}, {0, 32768, 49152}, {0, 49152, MinWork + 3},
			{3, 0, 100},
			{2, 0, 7},
		}},
		{sizes: []int{4*Chunk - 1, 10}, want: []span{{0, 0, 16384}, {0, 16384, 32768}, {0, 32768, 4*Chunk - 1}, {1, 0, 10}}},
		{sizes: []int{10*Chunk + 5}, want: []span{ // shares of 2.5 ranges
			{0, 0, 16384}, {0, 16384, 40960}, {0, 40960, 57344}, {0, 57344, 81920},
			{0, 81920, 98304}, {0, 98304, 122880}, {0, 122880, 139264}, {0, 139264, 163845},
		}},
	} {
		t.Run(fmt.Sprint(c.sizes), func(t *testing.T) {
			got := chunks(c.sizes)
			var spans []span
			for s := range got {
				spans = append(spans, s)
			}
			less := func(a, b span) bool { return a.Item < b.Item || a.Item == b.Item && a.Lo < b.Lo }
			if diff := cmp.Diff(c.want, spans, cmpopts.SortSlices(less), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ranges (-want +got):\n%s", diff)
			}
		})
	}
}

// TestForChunksSameGoroutine: below MinWork every range runs on the
// calling goroutine. Above it each goroutine starts on its own share (the
// k-th of each item), and share k goes to the same goroutine on every
// call, one goroutine per processor, even after a larger gang has grown
// the team. (Which goroutine runs the rest of a share depends on who
// finishes first; the test holds each goroutine's first range until all
// have begun, so none can take another's first.)
func TestForChunksSameGoroutine(t *testing.T) {
	withProcs(t, 4)
	t.Run("sequential", func(t *testing.T) {
		me := goroutine()
		for s, g := range chunks([]int{100, 7}) {
			if g != me {
				t.Errorf("range %v ran on goroutine %d, not the caller's %d", s, g, me)
			}
		}
	})
	t.Run("parallel", func(t *testing.T) {
		// 196608 elements: shares of 49152, in ranges of Chunk.
		sizes := []int{3 * MinWork, 10, MinWork / 2}
		starts := []span{{0, 0, 16384}, {0, 49152, 65536}, {0, 98304, 114688}, {0, 147456, 163840}}
		firsts := func() map[span]int {
			var mu sync.Mutex
			got := map[span]int{} // a goroutine's first range: the goroutine
			seen := map[int]bool{}
			wait := barrier(4)
			err := ForChunks(sizes, func(i, lo, hi int) error {
				g := goroutine()
				mu.Lock()
				first := !seen[g]
				if first {
					seen[g] = true
					got[span{i, lo, hi}] = g
				}
				mu.Unlock()
				if first {
					wait()
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		want := firsts()
		var ranges []span
		for s := range want {
			ranges = append(ranges, s)
		}
		less := func(a, b span) bool { return a.Lo < b.Lo }
		if diff := cmp.Diff(starts, ranges, cmpopts.SortSlices(less)); diff != "" {
			t.Fatalf("the goroutines' first ranges (-want +got):\n%s", diff)
		}
		for round := range 20 {
			if round == 10 {
				Gang(7, func(int) {})
			}
			if diff := cmp.Diff(want, firsts()); diff != "" {
				t.Fatalf("call %d: goroutine per share (-first call +now):\n%s", round+2, diff)
			}
		}
	})
}

// TestForChunksTakesOverLateShares: a goroutine held up on the first range
// of its share does not hold up the rest of it: the other goroutine, done
// with its own share, runs the held one's remaining ranges.
func TestForChunksTakesOverLateShares(t *testing.T) {
	withProcs(t, 2)
	guard := testwait.Guard(t)
	var done atomic.Int64
	var released string
	err := ForChunks([]int{6 * Chunk}, func(i, lo, hi int) error { // shares of 3 ranges
		if lo == 3*Chunk { // share 1's first range
			released = "the other five ranges done"
			for done.Load() < 5 {
				select {
				case <-guard:
					released = "the test's deadline"
					return nil
				default:
					runtime.Gosched()
				}
			}
		}
		done.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("the other five ranges done", released); diff != "" {
		t.Errorf("the held range went on after (-want +got):\n%s", diff)
	}
}

// TestForChunksError: the error of the lowest item that failed comes
// back, on both paths; the sequential path stops at it.
func TestForChunksError(t *testing.T) {
	withProcs(t, 4)
	for _, c := range []struct {
		name      string
		sizes     []int
		wantCalls []int // items called, sequential path only
	}{
		{"sequential", []int{10, 10, 10, 10}, []int{0, 1}},
		{"parallel", []int{MinWork, MinWork, MinWork, MinWork}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var calls []int
			err := ForChunks(c.sizes, func(i, lo, hi int) error {
				mu.Lock()
				calls = append(calls, i)
				mu.Unlock()
				if i == 1 || i == 3 {
					return fmt.Errorf("fail %d", i)
				}
				return nil
			})
			if diff := cmp.Diff("fail 1", fmt.Sprint(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if c.wantCalls != nil {
				if diff := cmp.Diff(c.wantCalls, calls); diff != "" {
					t.Errorf("items called (-want +got):\n%s", diff)
				}
			}
		})
	}
}
