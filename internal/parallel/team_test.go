package parallel

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// barrier returns a function that returns only once n goroutines have
// called it: calls made one after another, not at the same time, never
// return (and the test times out).
func barrier(n int) func() {
	var in atomic.Int64
	return func() {
		in.Add(1)
		for in.Load() < int64(n) {
			runtime.Gosched()
		}
	}
}

// TestGang: every index is called once, all at the same time, for gangs
// larger and smaller than earlier ones (the team grows and lends only part
// of itself), run on the team, nested in a gang, and from several
// goroutines at once.
func TestGang(t *testing.T) {
	gang := func(n int) []int {
		calls := make([]int, n)
		var mu sync.Mutex
		wait := barrier(n)
		Gang(n, func(i int) {
			wait()
			mu.Lock()
			calls[i]++
			mu.Unlock()
		})
		return calls
	}
	ones := func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = 1
		}
		return s
	}
	for _, c := range []struct {
		name string
		run  func() [][]int
		want [][]int
	}{
		{"one", func() [][]int { return [][]int{gang(1)} }, [][]int{ones(1)}},
		{"grow then shrink", func() [][]int { return [][]int{gang(2), gang(5), gang(3), gang(2)} }, [][]int{ones(2), ones(5), ones(3), ones(2)}},
		{"nested", func() [][]int {
			out := make([][]int, 3)
			Gang(3, func(i int) { out[i] = gang(4) })
			return out
		}, [][]int{ones(4), ones(4), ones(4)}},
		{"concurrent", func() [][]int {
			out := make([][]int, 4)
			var wg sync.WaitGroup
			for i := range out {
				wg.Go(func() { out[i] = gang(3) })
			}
			wg.Wait()
			return out
		}, [][]int{ones(3), ones(3), ones(3), ones(3)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, c.run()); diff != "" {
				t.Errorf("calls per index (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGangAfterWorkersPark: workers that have spun out their SpinFor and
// parked are woken for the next gang.
func TestGangAfterWorkersPark(t *testing.T) {
	for round := range 3 {
		var calls atomic.Int64
		wait := barrier(3)
		Gang(3, func(int) {
			wait()
			calls.Add(1)
		})
		if got := calls.Load(); got != 3 {
			t.Fatalf("round %d: %d calls, want 3", round, got)
		}
		for !allParked() {
			runtime.Gosched()
		}
	}
}

func allParked() bool {
	if !shared.busy.TryLock() {
		return false
	}
	defer shared.busy.Unlock()
	for _, w := range shared.workers {
		if !w.parked.Load() {
			return false
		}
	}
	return true
}

// TestGangRaisesPanicOnCaller: a panic on a worker comes back on the
// goroutine that called Gang, after every call has returned, and the team
// still works afterwards.
func TestGangRaisesPanicOnCaller(t *testing.T) {
	for _, who := range []int{0, 2} {
		t.Run(fmt.Sprint("index ", who), func(t *testing.T) {
			var returned atomic.Int64
			got := func() (r any) {
				defer func() { r = recover() }()
				Gang(3, func(i int) {
					if i == who {
						panic(fmt.Sprintf("boom %d", i))
					}
					returned.Add(1)
				})
				return nil
			}()
			if diff := cmp.Diff(fmt.Sprintf("boom %d", who), got); diff != "" {
				t.Errorf("recovered (-want +got):\n%s", diff)
			}
			if n := returned.Load(); n != 2 {
				t.Errorf("%d other calls returned before the panic was raised, want 2", n)
			}
			var after atomic.Int64
			Gang(3, func(int) { after.Add(1) })
			if n := after.Load(); n != 3 {
				t.Errorf("after the panic, a gang made %d calls, want 3", n)
			}
		})
	}
}
