package estimator

import (
	"context"
	"fmt"
	"time"

	"github.com/towerflow/towerflow/model"
)

// EvalOption limits an Evaluate call.
type EvalOption func(*evalOptions)

type evalOptions struct{ steps int64 }

// EvalSteps evaluates at most n batches.
func EvalSteps(n int64) EvalOption { return func(o *evalOptions) { o.steps = n } }

// Evaluate runs the model in Eval mode over input and returns every eval
// metric by name, "loss" (the mean over batches of the reduced batch loss,
// as TensorFlow reports it) and "global_step". Metrics start from zero on
// every call. A model directory without a checkpoint is an error wrapping
// ErrNotTrained.
func (e *Estimator) Evaluate(ctx context.Context, input InputFn, opts ...EvalOption) (map[string]float64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var o evalOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := e.restoreTrained(true); err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	return e.evaluate(ctx, input, o.steps)
}

// evaluate runs an evaluation with the Estimator locked and records it in
// the model directory's eval history.
func (e *Estimator) evaluate(ctx context.Context, input InputFn, steps int64) (map[string]float64, error) {
	if input == nil {
		return nil, fmt.Errorf("evaluate: nil input function")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e.eng.ResetMetrics()
	var lossSum float64
	var batches int64
	readAhead, _ := prefetch(ctx, input(ctx), false)
	for batch, err := range readAhead {
		if err != nil {
			return nil, fmt.Errorf("evaluate: input at batch %d: %w", batches, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("evaluate: %w", err)
		}
		loss, err := e.eng.EvalStep(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("evaluate: batch %d: %w", batches, err)
		}
		if batch.Release != nil {
			batch.Release()
		}
		lossSum += loss
		batches++
		if steps > 0 && batches >= steps {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	if batches == 0 {
		return nil, fmt.Errorf("evaluate: input yielded no batches")
	}
	out, err := e.eng.Metrics()
	if err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	out["loss"] = lossSum / float64(batches)
	out[model.GlobalStepName] = float64(e.eng.Step())
	if e.cfg.ModelDir != "" {
		rec := EvalRecord{Step: e.eng.Step(), Time: time.Now().UTC(), Metrics: map[string]float64{}}
		for k, v := range out {
			if finite(v) {
				rec.Metrics[k] = v
			}
		}
		if err := appendJSONLine(e.cfg.ModelDir, EvalHistoryFile, rec); err != nil {
			return nil, fmt.Errorf("evaluate: %w", err)
		}
	}
	return out, nil
}
