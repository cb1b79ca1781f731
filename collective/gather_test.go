package collective_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/collective"
)

// contribution is rank r's data in TestAllGather: lens(r) values that name
// the rank and the position.
func contribution[T collective.Gatherable](r, n int) []T {
	d := make([]T, n)
	for i := range d {
		d[i] = T(100*r + i)
	}
	return d
}

// gatherAll runs AllGather of every type on rank c with lens(rank)
// elements and returns what it got, as float64s by type and rank.
func gatherAll(c collective.Comm, lens func(r int) int) (map[string][][]float64, error) {
	got := map[string][][]float64{}
	n := lens(c.Rank())
	var err error
	if got["int64"], err = gatherAs(c, contribution[int64](c.Rank(), n)); err != nil {
		return nil, err
	}
	if got["float32"], err = gatherAs(c, contribution[float32](c.Rank(), n)); err != nil {
		return nil, err
	}
	if got["float64"], err = gatherAs(c, contribution[float64](c.Rank(), n)); err != nil {
		return nil, err
	}
	return got, nil
}

func gatherAs[T collective.Gatherable](c collective.Comm, data []T) ([][]float64, error) {
	parts, err := collective.AllGather(context.Background(), c, data)
	if err != nil {
		return nil, err
	}
	out := make([][]float64, len(parts))
	for r, p := range parts {
		out[r] = []float64{}
		for _, x := range p {
			out[r] = append(out[r], float64(x))
		}
	}
	return out, nil
}

// TestAllGather: every rank gets every rank's contribution, in rank
// order, whatever their lengths; ranks that contribute nothing, even all of
// them, are no special case.
func TestAllGather(t *testing.T) {
	tests := []struct {
		name string
		lens func(r int) int
	}{
		{"equal", func(r int) int { return 3 }},
		{"different", func(r int) int { return r*2 + 1 }},
		{"rank 0 empty", func(r int) int { return r }},
		{"the last rank empty", func(r int) int { return (r + 1) % 4 * 2 }},
		{"every other rank empty", func(r int) int { return r % 2 * 5 }},
		{"all empty", func(r int) int { return 0 }},
	}
	for _, tc := range tests {
		for n := 1; n <= 4; n++ {
			t.Run(fmt.Sprintf("%s/%d", tc.name, n), func(t *testing.T) {
				got := make([]map[string][][]float64, n)
				errs := onRanks(n, func(c collective.Comm) (err error) {
					got[c.Rank()], err = gatherAll(c, tc.lens)
					return err
				})
				parts := make([][]float64, n)
				for r := range n {
					parts[r] = append([]float64{}, contribution[float64](r, tc.lens(r))...)
				}
				want := map[string][][]float64{"int64": parts, "float32": parts, "float64": parts}
				for r := range n {
					if errs[r] != nil {
						t.Fatalf("rank %d: %v", r, errs[r])
					}
					if d := cmp.Diff(want, got[r]); d != "" {
						t.Errorf("rank %d (-want +got):\n%s", r, d)
					}
				}
			})
		}
	}
}

// TestAllGatherErrors: arguments that do not fit the group are an error
// on the rank that passes them; ranks that pass different counts, or one
// that leaves, break the group.
func TestAllGatherErrors(t *testing.T) {
	tests := []struct {
		name  string
		fn    func(c collective.Comm) error
		want  [2]string
		broke bool
	}{
		{"a count per rank", func(c collective.Comm) error {
			return c.AllGatherFloat64(context.Background(), make([]float64, 2), []int{2})
		}, [2]string{"all-gather float64 with 1 counts in a group of 2", "all-gather float64 with 1 counts in a group of 2"}, false},
		{"a negative count", func(c collective.Comm) error {
			return c.AllGatherInt64(context.Background(), make([]int64, 1), []int{2, -1})
		}, [2]string{"rank 1's count -1 is negative", "rank 1's count -1 is negative"}, false},
		{"a buffer of the counts' sum", func(c collective.Comm) error {
			return c.AllGatherFloat32(context.Background(), make([]float32, 4), []int{2, 1})
		}, [2]string{"a buffer of 4 elements, the counts [2 1] add up to 3", "a buffer of 4 elements, the counts [2 1] add up to 3"}, false},
		{"counts differ", func(c collective.Comm) error {
			counts := []int{1 + c.Rank(), 2 - c.Rank()}
			return c.AllGatherInt64(context.Background(), make([]int64, 3), counts)
		}, [2]string{"every rank must pass the same counts", "every rank must pass the same counts"}, true},
		{"rank 1 cancelled", func(c collective.Comm) error {
			ctx := context.Background()
			if c.Rank() == 1 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				cancel()
			}
			_, err := collective.AllGather(ctx, c, []float64{1})
			return err
		}, [2]string{"rank 1 left all-gather int64: context canceled", "rank 1 left all-gather int64: context canceled"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := make([]error, 2)
			agains := onRanks(2, func(c collective.Comm) error {
				errs[c.Rank()] = tc.fn(c)
				return c.AllReduceFloat64(context.Background(), []float64{1})
			})
			for r, err := range errs {
				if err == nil || !strings.Contains(err.Error(), tc.want[r]) {
					t.Errorf("rank %d: %v, want an error containing %q", r, err, tc.want[r])
				}
				again := agains[r]
				if broke := again != nil; broke != tc.broke {
					t.Errorf("rank %d: a later all-reduce gave %v, want the group broken: %v", r, again, tc.broke)
				}
			}
		})
	}
}
