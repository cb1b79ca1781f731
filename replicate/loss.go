package replicate

import (
	"fmt"

	"github.com/towerflow/towerflow/internal/numeric"
)

// lossWeights returns the factor each tower's loss, and so its gradients,
// is multiplied by before summing, for shards of the given rows: TensorFlow's
// _get_loss_towers scaling, with BATCH_MEAN added.
func lossWeights(r LossReduction, rows []int) []float64 {
	return lossWeightsOf(r, rows, sumRows(rows), len(rows))
}

// lossWeightsOf is lossWeights for towers of the given rows that are some
// of a step's towers, which hold total rows on towers towers in all (the
// micro-batches of one update: TrainMicroBatches).
func lossWeightsOf(r LossReduction, rows []int, total, towers int) []float64 {
	w := make([]float64, len(rows))
	for i, n := range rows {
		switch r {
		case Mean:
			w[i] = 1 / float64(towers)
		case BatchMean:
			w[i] = float64(n) / float64(total)
		default:
			w[i] = 1
		}
	}
	return w
}

// loss returns the towers' losses of the last run, reduced with the
// build's loss weights.
func (b *build) loss() (float64, error) {
	total := 0.0
	for i, s := range b.specs {
		lv, err := b.towers[i].Value(s.Loss)
		if err != nil {
			return 0, fmt.Errorf("read loss: %w", err)
		}
		v, err := numeric.Float64s(lv)
		if err != nil || len(v) != 1 {
			return 0, fmt.Errorf("%v: read loss: %v", b.towers[i], err)
		}
		total += b.weights[i] * v[0]
	}
	return total, nil
}
