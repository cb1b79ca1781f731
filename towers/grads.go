package towers

import (
	"fmt"

	"github.com/towerflow/towerflow/internal/numeric"
)

// SumGradients sets dst to the weighted sum over towers of parts, in tower
// order: dst = Σ weights[i]·parts[i]. A nil part (a tower without that
// gradient) contributes nothing. dst and every part are []float32 or
// []float64 slices of one length; with unit weights the sum is the plain
// float sum.
func SumGradients(dst any, parts []any, weights []float64) error {
	if len(parts) != len(weights) {
		return fmt.Errorf("sum gradients: %d parts, %d weights", len(parts), len(weights))
	}
	numeric.Zero(dst)
	for i, p := range parts {
		if p == nil {
			continue
		}
		if err := numeric.AddScaled(dst, p, weights[i]); err != nil {
			return fmt.Errorf("sum gradients: tower %d: %w", i, err)
		}
	}
	return nil
}
