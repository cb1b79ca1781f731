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
