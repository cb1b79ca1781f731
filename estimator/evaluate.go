package estimator

import (
	"context"
	"fmt"
	"time"

	"github.com/towerflow/towerflow/model"
)

// EvalOption limits an Evaluate call.
type EvalOption func(*evalOptions)

type evalOptions struct {
	steps int64
	name  string
}

// EvalSteps evaluates at most n batches.
func EvalSteps(n int64) EvalOption { return func(o *evalOptions) { o.steps = n } }

// EvalName names the evaluation, as tf.estimator's evaluate(name=...):
// its TensorBoard summaries go to the model directory's EvalDir(name),
// eval_<name>, instead of eval, so that evaluations on different data (a
// validation and a test set) are separate runs in TensorBoard. The name is
// also recorded in the eval history. A name may not hold a path separator.
func EvalName(name string) EvalOption { return func(o *evalOptions) { o.name = name } }

// Evaluate runs the model in Eval mode over input and returns every eval
// metric by name, "loss" (the mean over batches of the reduced batch loss,
// as TensorFlow reports it) and "global_step". Metrics start from zero on
// every call. A model directory without a checkpoint is an error wrapping
// ErrNotTrained. Across processes every process evaluates its own part of
// the data and gets the metrics of the whole (see processes.go); "loss" is
// then the mean over the examples, which is the mean over batches when
// they are of one size. When the metrics are computed but cannot be
// recorded in the model directory (the eval history or the TensorBoard
// summary cannot be written, as on a read-only directory), Evaluate
// returns them together with the error: both are non-nil. Like Train, it
// keeps one Go processor spare while CPU towers fill the cores in cgo
// kernels (replicate.Engine.HoldProcessors).
func (e *Estimator) Evaluate(ctx context.Context, input InputFn, opts ...EvalOption) (_ map[string]float64, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.checkOpen("evaluate"); err != nil {
		return nil, err
	}
	var o evalOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkEvalName(o.name); err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	e.eng.Open()
	defer func() { err = e.leave(ctx, "evaluate", err) }()
	defer e.eng.HoldProcessors()()
	if err := e.restoreTrained(true); err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	if err := e.eng.SyncFromRoot(ctx); err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	return e.evaluate(ctx, input, o)
}

// evaluate runs an evaluation with the Estimator locked, logs its results
// and records them in the model directory's eval history and TensorBoard
// summaries.
func (e *Estimator) evaluate(ctx context.Context, input InputFn, o evalOptions) (map[string]float64, error) {
	if input == nil {
		return nil, fmt.Errorf("evaluate: nil input function")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e.eng.ResetMetrics()
	var lossSum float64
	var batches int64
	var lossRows, examples float64 // across processes
	src, late := readInput(ctx, input)
	readAhead, _ := prefetch(ctx, src, false)
	for batch, err := range readAhead {
		if err != nil {
			return nil, fmt.Errorf("evaluate: input at batch %d: %w", batches, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("evaluate: %w", err)
		}
		rows, _ := batch.Rows()
		loss, err := e.eng.EvalStep(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("evaluate: batch %d: %w", batches, err)
		}
		lossRows += loss * float64(rows)
		examples += float64(rows)
		if batch.Release != nil {
			batch.Release()
		}
		lossSum += loss
		batches++
		if o.steps > 0 && batches >= o.steps {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	if err := late(); err != nil {
		return nil, fmt.Errorf("evaluate: input at batch %d: %w", batches, err)
	}
	if batches == 0 {
		return nil, fmt.Errorf("evaluate: %w", ErrNoBatches)
	}
	meanLoss := lossSum / float64(batches)
	if e.procs > 1 {
		// Each process's batch loss is over its part of the batch: the
		// loss of the whole evaluation is their mean over the examples
		// (the mean over batches when the batches are of one size).
		sums := []float64{lossRows, examples}
		if err := e.eng.ReduceMetrics(ctx, sums); err != nil {
			return nil, fmt.Errorf("evaluate: %w", err)
		}
		meanLoss = sums[0] / sums[1]
	}
	out, err := e.eng.Metrics()
	if err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	out["loss"] = meanLoss
	out[model.GlobalStepName] = float64(e.eng.Step())
	e.logEvaluation(o.name, out)
	if e.cfg.ModelDir != "" {
		rec := EvalRecord{Step: e.eng.Step(), Name: o.name, Time: time.Now().UTC(), Metrics: map[string]float64{}}
		for k, v := range out {
			if finite(v) {
				rec.Metrics[k] = v
			}
		}
		// The metrics are computed: a record that cannot be written is
		// an error, but the metrics are returned with it.
		if err := appendJSONLine(e.cfg.ModelDir, EvalHistoryFile, rec); err != nil {
			return out, fmt.Errorf("evaluate: %w", err)
		}
		if err := e.writeEvalSummary(o.name, out); err != nil {
			return out, fmt.Errorf("evaluate: %w", err)
		}
	}
	return out, nil
}
