package towers

import (
	"errors"
	"fmt"

	"github.com/towerflow/towerflow/internal/numeric"
)

// SumGradients sets dst to the weighted sum over towers of parts, in tower
// order: dst = Σ weights[i]·parts[i]. A nil part (a tower without that
// gradient) contributes nothing. dst and every part are []float32 or
// []float64 slices of one length; with unit weights the sum is the plain
// float sum.
func SumGradients(dst any, parts []any, weights []float64) error {
	return sumGradients(numeric.WeightedSum(dst, parts, weights))
}

// SumGradientsRange is SumGradients over elements [lo, hi) only, so that
// goroutines can each sum their own range of one gradient; it allocates
// nothing for up to 8 towers.
func SumGradientsRange(dst any, parts []any, weights []float64, lo, hi int) error {
	return sumGradients(numeric.WeightedSumRange(dst, parts, weights, lo, hi))
}

// sumGradients names the tower of a part that failed.
func sumGradients(err error) error {
	if err != nil {
		if pe, ok := errors.AsType[*numeric.PartError](err); ok {
			return fmt.Errorf("sum gradients: tower %d: %w", pe.Part, pe.Err)
		}
		return fmt.Errorf("sum gradients: %w", err)
	}
	return nil
}
