package parallel

import (
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFor(t *testing.T) {
	tests := []struct {
		name      string
		work      int
		wantCalls int // in order, the sequential path stops at the first error
	}{
		{"sequential", 10, 8},
		{"parallel", MinWork, 50},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			calls := map[int]int{}
			err := For(50, tc.work, func(j int) error {
				mu.Lock()
				calls[j]++
				mu.Unlock()
				if j == 7 || j == 30 {
					return fmt.Errorf("fail %d", j)
				}
				return nil
			})
			if diff := cmp.Diff("fail 7", fmt.Sprint(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			want := map[int]int{}
			for j := range tc.wantCalls {
				want[j] = 1
			}
			if diff := cmp.Diff(want, calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestForChunks: every element of every item is covered exactly once, in
// ranges of at most Chunk, with no call for an empty item.
func TestForChunks(t *testing.T) {
	for _, sizes := range [][]int{
		{},
		{0, 5, 0},
		{Chunk, Chunk + 1, 3 * Chunk, 7},
		{10 * Chunk},
	} {
		t.Run(fmt.Sprint(sizes), func(t *testing.T) {
			var mu sync.Mutex
			covered := make([][]int, len(sizes))
			for i, n := range sizes {
				covered[i] = make([]int, n)
			}
			err := ForChunks(sizes, func(i, lo, hi int) error {
				if hi <= lo || hi-lo > Chunk {
					return fmt.Errorf("item %d: range [%d, %d)", i, lo, hi)
				}
				mu.Lock()
				defer mu.Unlock()
				for k := lo; k < hi; k++ {
					covered[i][k]++
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			want := make([][]int, len(sizes))
			for i, n := range sizes {
				want[i] = make([]int, n)
				for k := range want[i] {
					want[i][k] = 1
				}
			}
			if diff := cmp.Diff(want, covered); diff != "" {
				t.Errorf("coverage (-want +got):\n%s", diff)
			}
		})
	}
}
