package idsort_test

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/internal/idsort"
)

// TestPositions: the order of a stable sort by id, for ids packed into
// one integer and for ids too large to pack, reusing the buffers given.
func TestPositions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var order []int
	var keys []uint64
	for _, tc := range []struct {
		name   string
		n, max int
	}{
		{"empty", 0, 1},
		{"one", 1, 1},
		{"repeats", 500, 20},
		{"spread", 1000, 1 << 20},
		{"large ids", 300, 1 << 62},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids := make([]int, tc.n)
			for i := range ids {
				ids[i] = rng.IntN(tc.max)
			}
			if tc.n > 1 && tc.max == 1<<62 {
				ids[1] = ids[0] // a repeat among large ids
			}
			want := make([]int, tc.n)
			for i := range want {
				want[i] = i
			}
			slices.SortStableFunc(want, func(a, b int) int { return cmp.Compare(ids[a], ids[b]) })
			order, keys = idsort.Positions(ids, order, keys)
			if diff := gocmp.Diff(want, order, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Positions (-want +got):\n%s", diff)
			}
		})
	}
}
