package collective

import (
	"context"
	"fmt"
)

// Average replaces vec on every rank with the elementwise mean of every
// rank's vec: an all-reduce divided by the number of ranks. It is weight
// averaging's one collective: each worker passes its weights as one
// vector (towers.Store.Flat) and sets them from the result.
func Average(ctx context.Context, c Comm, vec []float64) error {
	if err := c.AllReduceFloat64(ctx, vec); err != nil {
		return fmt.Errorf("average %d values over %d ranks: %w", len(vec), c.Size(), err)
	}
	if n := float64(c.Size()); n > 1 {
		for i := range vec {
			vec[i] /= n
		}
	}
	return nil
}
