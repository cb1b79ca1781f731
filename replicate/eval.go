package replicate

import (
	"context"
	"fmt"
	"maps"
	"slices"

	G "gorgonia.org/gorgonia"

	"github.com/towerflow/towerflow/internal/tower"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/sharding"
)

// EvalStep runs one evaluation step, TensorFlow's _eval_spec: each tower
// folds its shard into its own metric states (read with Metrics). It
// returns the reduced loss.
func (e *Engine) EvalStep(ctx context.Context, batch sharding.Batch) (float64, error) {
	b, err := e.prepare(model.Eval, batch)
	if err != nil {
		return 0, fmt.Errorf("eval: %w", err)
	}
	if err := e.ensureMetrics(b); err != nil {
		return 0, err
	}
	err = tower.RunAll(ctx, b.towers, func(t *tower.Tower) error {
		if err := t.Run(); err != nil {
			return err
		}
		i := t.Index()
		for _, name := range slices.Sorted(maps.Keys(b.specs[i].EvalMetrics)) {
			bound := b.specs[i].EvalMetrics[name]
			vals := make([]G.Value, len(bound.Inputs))
			for j, n := range bound.Inputs {
				v, err := t.Value(n)
				if err != nil {
					return fmt.Errorf("metric %q: %w", name, err)
				}
				vals[j] = v
			}
			if err := metrics.UpdateValues(e.metrics[i][name], vals); err != nil {
				return fmt.Errorf("%v: metric %q: %w", t, name, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("eval: %w", err)
	}
	return b.loss()
}

// ensureMetrics makes the metric states a build's towers update.
func (e *Engine) ensureMetrics(b *build) error {
	for len(e.metrics) < len(b.towers) {
		e.metrics = append(e.metrics, map[string]metrics.Metric{})
	}
	for i, s := range b.specs {
		for name, bound := range s.EvalMetrics {
			m := bound.New()
			old, ok := e.metrics[i][name]
			if !ok {
				e.metrics[i][name] = m
				continue
			}
			if old.Kind() != m.Kind() || len(old.State()) != len(m.State()) {
				return fmt.Errorf("%v: metric %q is %s[%d] here but %s[%d] in an earlier batch of this evaluation",
					b.towers[i], name, m.Kind(), len(m.State()), old.Kind(), len(old.State()))
			}
		}
	}
	return nil
}

// ResetMetrics zeroes every metric state: an evaluation starts afresh.
func (e *Engine) ResetMetrics() { e.metrics = nil }

// Metrics reduces the metric states into tower 0 (TensorFlow's
// _reduce_metric_variables: every replica's state is added into tower 0's
// and zeroed, so reading twice gives the same values) and returns tower
// 0's values by name.
func (e *Engine) Metrics() (map[string]float64, error) {
	if len(e.metrics) == 0 {
		return map[string]float64{}, nil
	}
	if err := metrics.ReduceIntoFirst(e.metrics); err != nil {
		return nil, err
	}
	return metrics.Results(e.metrics[0]), nil
}
