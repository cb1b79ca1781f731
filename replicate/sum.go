package replicate

import (
	"errors"
	"fmt"

	"github.com/towerflow/towerflow/internal/numeric"
)

// sumGradients sets elements [lo, hi) of dst to the weighted sum over
// towers of parts, in tower order: dst = Σ weights[i]·parts[i], TensorFlow's
// _compute_sum_on_device. A nil part (a tower without that gradient)
// contributes nothing. dst and every part are []float32 or []float64 slices
// of one length; with unit weights the sum is the plain float sum. Summing
// a range lets goroutines each sum their own part of one gradient; it
// allocates nothing for up to 8 towers. An error names the tower.
func sumGradients(dst any, parts []any, weights []float64, lo, hi int) error {
	err := numeric.WeightedSumRange(dst, parts, weights, lo, hi)
	if err != nil {
		if pe, ok := errors.AsType[*numeric.PartError](err); ok {
			return fmt.Errorf("sum gradients: tower %d: %w", pe.Part, pe.Err)
		}
		return fmt.Errorf("sum gradients: %w", err)
	}
	return nil
}
