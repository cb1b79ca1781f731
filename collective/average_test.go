package collective_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/internal/wanterr"
)

func TestAverage(t *testing.T) {
	tests := []struct {
		// vecs is each rank's vector; want the mean every rank ends with.
		vecs [][]float64
		want []float64
	}{
		{[][]float64{{1, -2, 3}}, []float64{1, -2, 3}},
		{[][]float64{{1, 2}, {3, 6}}, []float64{2, 4}},
		{[][]float64{{0, 1.5}, {3, 1.5}, {6, -3}}, []float64{3, 0}},
		{[][]float64{{}, {}}, []float64{}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(len(tc.vecs), tc.vecs), func(t *testing.T) {
			got := make([][]float64, len(tc.vecs))
			errs := onRanks(len(tc.vecs), func(c collective.Comm) error {
				v := append([]float64{}, tc.vecs[c.Rank()]...)
				got[c.Rank()] = v
				return collective.Average(context.Background(), c, v)
			})
			for r := range tc.vecs {
				if errs[r] != nil {
					t.Fatalf("rank %d: %v", r, errs[r])
				}
				if diff := cmp.Diff(tc.want, got[r]); diff != "" {
					t.Errorf("rank %d (-want +got):\n%s", r, diff)
				}
			}
		})
	}
}

// TestAverageError: a rank whose vector differs in length breaks the
// group, and every rank's error says what was averaged.
func TestAverageError(t *testing.T) {
	errs := onRanks(2, func(c collective.Comm) error {
		return collective.Average(context.Background(), c, make([]float64, 2+c.Rank()))
	})
	for r, err := range errs {
		wanterr.Mentions(t, err, fmt.Sprintf("average %d values over 2 ranks", 2+r), "same collectives")
	}
}
