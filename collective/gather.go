package collective

import (
	"context"
	"fmt"
)

// checkGather checks an all-gather's arguments on one rank: one count per
// rank, none negative, and a buffer of their sum. A failed check runs no
// collective and breaks nothing (the other ranks are left waiting in it
// unless they fail the same check).
func checkGather(kind string, size, n int, counts []int) error {
	if len(counts) != size {
		return fmt.Errorf("collective: %s with %d counts in a group of %d", kind, len(counts), size)
	}
	total := 0
	for r, c := range counts {
		if c < 0 {
			return fmt.Errorf("collective: %s: rank %d's count %d is negative", kind, r, c)
		}
		total += c
	}
	if n != total {
		return fmt.Errorf("collective: %s of a buffer of %d elements, the counts %v add up to %d", kind, n, counts, total)
	}
	return nil
}

// Gatherable is what an all-gather moves: the element types of the Comm's
// AllGather methods.
type Gatherable interface {
	int64 | float32 | float64
}

// AllGatherInto is the Comm's all-gather for T: AllGatherInt64,
// AllGatherFloat32 or AllGatherFloat64.
func AllGatherInto[T Gatherable](ctx context.Context, c Comm, buf []T, counts []int) error {
	switch b := any(buf).(type) {
	case []int64:
		return c.AllGatherInt64(ctx, b, counts)
	case []float32:
		return c.AllGatherFloat32(ctx, b, counts)
	case []float64:
		return c.AllGatherFloat64(ctx, b, counts)
	}
	return fmt.Errorf("collective: cannot all-gather a %T", buf)
}

// AllGather returns every rank's data, in rank order: got[r] is rank r's
// contribution, whatever its length; a rank may contribute nothing. The
// lengths go first, in an all-gather of one count per rank, then the data
// in one all-gather of variable size (MPI_Iallgatherv), so that no rank
// ever receives more or less than it expects. The parts are consecutive
// slices of one array of every rank's data. Errors are the Comm's.
func AllGather[T Gatherable](ctx context.Context, c Comm, data []T) ([][]T, error) {
	n, rank := c.Size(), c.Rank()
	lens := make([]int64, n)
	lens[rank] = int64(len(data))
	ones := make([]int, n)
	for r := range ones {
		ones[r] = 1
	}
	if err := c.AllGatherInt64(ctx, lens, ones); err != nil {
		return nil, err
	}
	counts := make([]int, n)
	total, at := 0, 0
	for r, l := range lens {
		counts[r] = int(l)
		if r == rank {
			at = total
		}
		total += int(l)
	}
	all := make([]T, total)
	copy(all[at:], data)
	if err := AllGatherInto(ctx, c, all, counts); err != nil {
		return nil, err
	}
	got := make([][]T, n)
	off := 0
	for r, k := range counts {
		got[r] = all[off : off+k : off+k]
		off += k
	}
	return got, nil
}
