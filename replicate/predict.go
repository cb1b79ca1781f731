package replicate

import (
	"context"
	"fmt"
	"maps"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/tower"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/sharding"
)

// Outputs is one predict step's results, each concatenated along
// dimension 0 in tower order.
type Outputs struct {
	// Predictions by name.
	Predictions map[string]*tensor.Dense
	// ExportOutputs by signature key, then output name.
	ExportOutputs map[string]map[string]*tensor.Dense
}

// PredictStep runs one prediction step, TensorFlow's _predict_spec: the
// towers run at the same time on their shards, and the predictions and the
// export outputs are concatenated in tower order.
func (e *Engine) PredictStep(ctx context.Context, batch sharding.Batch) (Outputs, error) {
	b, err := e.prepare(model.Predict, batch)
	if err != nil {
		return Outputs{}, fmt.Errorf("predict: %w", err)
	}
	if err := tower.RunAll(ctx, b.towers, (*tower.Tower).Run); err != nil {
		return Outputs{}, fmt.Errorf("predict: %w", err)
	}
	e.lastPredict = b
	out := Outputs{Predictions: map[string]*tensor.Dense{}, ExportOutputs: map[string]map[string]*tensor.Dense{}}
	for _, k := range slices.Sorted(maps.Keys(b.specs[0].Predictions)) {
		if out.Predictions[k], err = concatTowers(b, fmt.Sprintf("prediction %q", k), true, func(s *model.Spec) *G.Node { return s.Predictions[k] }); err != nil {
			return Outputs{}, fmt.Errorf("predict: %w", err)
		}
	}
	for _, sig := range slices.Sorted(maps.Keys(b.specs[0].ExportOutputs)) {
		out.ExportOutputs[sig] = map[string]*tensor.Dense{}
		for _, name := range slices.Sorted(maps.Keys(b.specs[0].ExportOutputs[sig].Nodes())) {
			what := fmt.Sprintf("export output %q of signature %q", name, sig)
			if out.ExportOutputs[sig][name], err = concatTowers(b, what, true, func(s *model.Spec) *G.Node { return s.ExportOutputs[sig].Nodes()[name] }); err != nil {
				return Outputs{}, fmt.Errorf("predict: %w", err)
			}
		}
	}
	return out, nil
}

// concatTowers reads one output of every tower of the last run of b and
// concatenates them along dimension 0 in tower order, TensorFlow's
// _concat_tensor_dicts. With perRow, each tower's part must have its
// shard's rows (predictions and export outputs must).
func concatTowers(b *build, what string, perRow bool, pick func(*model.Spec) *G.Node) (*tensor.Dense, error) {
	parts := make([]*tensor.Dense, len(b.towers))
	for i, s := range b.specs {
		pv, err := b.towers[i].Value(pick(s))
		if err != nil {
			return nil, err
		}
		v, err := numeric.Dense(pv)
		if err != nil {
			return nil, fmt.Errorf("%v: %s: %w", b.towers[i], what, err)
		}
		if perRow && (v.Dims() == 0 || v.Shape()[0] != b.rows[i]) {
			return nil, fmt.Errorf("%v: %s has shape %v for a shard of %d rows; predictions need the batch along dimension 0", b.towers[i], what, v.Shape(), b.rows[i])
		}
		parts[i] = v
	}
	v, err := sharding.Concat(parts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

// PredictSpec returns what the latest predict step's model declared: its
// export outputs, and the variables tower 0 asked for; false before any
// predict step. It is for a run loop that exports (the estimator's Export
// runs one predict step, then asks).
func (e *Engine) PredictSpec() (outputs map[string]model.ExportOutput, variables []string, ok bool) {
	if e.lastPredict == nil {
		return nil, nil, false
	}
	return e.lastPredict.specs[0].ExportOutputs, e.lastPredict.towers[0].VariableNames(), true
}

// Fetch reads named values after a training step: variables of the store,
// else predictions of the latest step's towers concatenated in tower order.
func (e *Engine) Fetch(names []string) (map[string]*tensor.Dense, error) {
	out := make(map[string]*tensor.Dense, len(names))
	for _, name := range names {
		if v, err := e.store.Value(name); err == nil {
			out[name] = v
			continue
		}
		if e.last == nil || e.last.specs[0].Predictions[name] == nil {
			return nil, fmt.Errorf("fetch %q: neither a variable nor a prediction of the model", name)
		}
		v, err := concatTowers(e.last, fmt.Sprintf("fetch %q", name), false, func(s *model.Spec) *G.Node { return s.Predictions[name] })
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, nil
}
