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

// TestPositions: the order of a stable sort by id, by each of the ways
// Positions sorts (radix in one pass and in two, packed keys, pairs),
// one Sorter reused from case to case.
func TestPositions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s idsort.Sorter
	for _, tc := range []struct {
		name   string
		n, max int
	}{
		{"empty", 0, 1},
		{"one", 1, 1},
		{"few, packed", 200, 1 << 20},
		{"radix one pass", 3000, 1 << 11},
		{"radix two passes", 5000, 1 << 22},
		{"radix repeats", 4000, 50},
		{"packed, wide ids", 1000, 1 << 30},
		{"pairs, large ids", 300, 1 << 62},
		{"fewer after more", 300, 1 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids := make([]int, tc.n)
			for i := range ids {
				ids[i] = rng.IntN(tc.max)
			}
			if tc.n > 1 {
				ids[1] = ids[0] // a repeat
			}
			want := make([]int, tc.n)
			for i := range want {
				want[i] = i
			}
			slices.SortStableFunc(want, func(a, b int) int { return cmp.Compare(ids[a], ids[b]) })
			if diff := gocmp.Diff(want, s.Positions(ids), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Positions (-want +got):\n%s", diff)
			}
		})
	}
}
