package estimator

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/towerflow/towerflow/model"
)

// TrainSpec is the training half of TrainAndEvaluate.
type TrainSpec struct {
	Input InputFn
	// MaxSteps ends training at this global step (0: when Input ends).
	MaxSteps int64
	// Steps ends training after this many steps from where it starts (a
	// restored checkpoint's step), as Train's Steps; with MaxSteps too,
	// at whichever comes first (0: no such limit).
	Steps int64
	Hooks []Hook
}

// EvalSpec is the evaluation half of TrainAndEvaluate.
type EvalSpec struct {
	Input InputFn
	// Steps evaluates at most this many batches (0: all of Input).
	Steps int64
	// EverySteps evaluates every this many training steps; Every evaluates
	// at this interval. With neither, every 1000 steps.
	EverySteps int64
	Every      time.Duration
	// EarlyStopping, when set, ends training when a metric stops improving.
	EarlyStopping *EarlyStopping
	// Name names the evaluations (see EvalName).
	Name string
}

// EarlyStopping ends training when Metric has not improved for Patience
// evaluations in a row (at least by MinDelta).
type EarlyStopping struct {
	Metric string
	// HigherIsBetter is true for metrics like accuracy; false (lower is
	// better) suits a loss.
	HigherIsBetter bool
	Patience       int
	MinDelta       float64
}

// TrainAndEvaluate trains on train.Input, evaluating on eval.Input at the
// given interval and once more at the end, like
// tf.estimator.train_and_evaluate. Every evaluation is appended to the model
// directory's eval history. It returns the last evaluation's results (with
// the error when the last one, computed, could not be recorded, as
// Evaluate).
func (e *Estimator) TrainAndEvaluate(ctx context.Context, train TrainSpec, eval EvalSpec) (map[string]float64, error) {
	if err := e.locked(func() error { return e.checkOpen("train and evaluate") }); err != nil {
		return nil, err
	}
	if eval.Input == nil {
		return nil, fmt.Errorf("train and evaluate: nil eval input")
	}
	if es := eval.EarlyStopping; es != nil && (es.Metric == "" || es.Patience < 1) {
		return nil, fmt.Errorf("train and evaluate: early stopping needs a metric and a patience of at least 1")
	}
	if err := checkEvalName(eval.Name); err != nil {
		return nil, fmt.Errorf("train and evaluate: %w", err)
	}
	if _, procs := e.Rank(); procs > 1 && eval.Every > 0 {
		return nil, fmt.Errorf("train and evaluate: EvalSpec.Every evaluates by the clock, which differs between processes, and every process must evaluate at the same step: use EverySteps when training across processes")
	}
	if eval.EverySteps == 0 && eval.Every == 0 {
		eval.EverySteps = 1000
	}
	h := &evalHook{e: e, spec: eval, best: math.NaN()}
	opts := []TrainOption{Hooks(append(append([]Hook{}, train.Hooks...), h)...)}
	if train.MaxSteps != 0 {
		opts = append(opts, MaxSteps(train.MaxSteps))
	}
	if train.Steps != 0 {
		opts = append(opts, Steps(train.Steps))
	}
	if err := e.Train(ctx, train.Input, opts...); err != nil {
		return nil, fmt.Errorf("train and evaluate: %w", err)
	}
	if h.last != nil && int64(h.last[model.GlobalStepName]) == e.GlobalStep() {
		return h.last, nil
	}
	out, err := e.Evaluate(ctx, eval.Input, EvalSteps(eval.Steps), EvalName(eval.Name))
	if err != nil {
		return out, fmt.Errorf("train and evaluate: %w", err)
	}
	return out, nil
}

// evalHook evaluates during a training run.
type evalHook struct {
	BaseHook
	e        *Estimator
	spec     EvalSpec
	lastStep int64
	lastTime time.Time
	last     map[string]float64
	best     float64
	bad      int
}

func (h *evalHook) Begin(_ context.Context, info RunInfo) error {
	h.lastStep, h.lastTime = info.StartStep, time.Now()
	return nil
}

func (h *evalHook) AfterStep(ctx context.Context, r StepResult) (bool, error) {
	due := h.spec.EverySteps > 0 && r.Step-h.lastStep >= h.spec.EverySteps
	due = due || h.spec.Every > 0 && time.Since(h.lastTime) >= h.spec.Every
	if !due {
		return false, nil
	}
	h.lastStep, h.lastTime = r.Step, time.Now()
	// The Estimator is locked by Train: evaluate directly.
	out, err := h.e.evaluate(ctx, h.spec.Input, evalOptions{steps: h.spec.Steps, name: h.spec.Name})
	if err != nil {
		return false, err
	}
	h.last = out
	es := h.spec.EarlyStopping
	if es == nil {
		return false, nil
	}
	v, ok := out[es.Metric]
	if !ok {
		return false, fmt.Errorf("early stopping: evaluation has no metric %q", es.Metric)
	}
	improved := math.IsNaN(h.best) || (es.HigherIsBetter && v > h.best+es.MinDelta) || (!es.HigherIsBetter && v < h.best-es.MinDelta)
	if improved {
		h.best, h.bad = v, 0
		return false, nil
	}
	h.bad++
	if h.bad >= es.Patience {
		h.e.log.Info("early stopping", "metric", es.Metric, "best", roundMetric(h.best), "evaluations_without_improvement", h.bad)
		return true, nil
	}
	return false, nil
}
