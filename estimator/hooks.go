package estimator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/towers"
)

// RunInfo is what hooks see of a training run.
type RunInfo struct {
	Store    *towers.Store
	ModelDir string
	Logger   *slog.Logger
	// StartStep is the global step when the run began.
	StartStep int64
	// LastStep is the global step the run stops at, or -1 when it runs
	// until the input ends or a hook stops it.
	LastStep int64
}

// StepRequest is what a hook asks of the coming step.
type StepRequest struct {
	// Fetch names values to read after the step: a variable of the store
	// (its value after the update) or a prediction of the model's Spec
	// (concatenated over towers).
	Fetch []string
}

// StepResult is what hooks see after a step.
type StepResult struct {
	// Step is the global step after the step.
	Step int64
	// Loss is the step's reduced loss.
	Loss float64
	// Examples is the number of rows in the step's batch (in all its
	// micro-batches, with replicate.Config.AccumulateSteps).
	Examples int
	// GradientNorm is the global norm of the step's gradients before
	// clipping, over the train ops that clip by global norm
	// (model.Clip.GlobalNorm; see replicate.Engine.GradientNorm); 0 when
	// none does.
	GradientNorm float64
	// Values holds what the hook's StepRequest fetched.
	Values map[string]*tensor.Dense
}

// Hook watches and steers a training run, like TensorFlow's
// SessionRunHook. Hooks are called in the order given, on the goroutine of
// Train, with the Estimator locked: a hook must not call the Estimator's
// methods (it gets the store in RunInfo). A panic in a hook's method ends
// the run with a *PanicError naming the hook's type and the method.
type Hook interface {
	// Begin runs before the first step.
	Begin(ctx context.Context, info RunInfo) error
	// BeforeStep runs before each step; the request's fetches arrive in
	// AfterStep.
	BeforeStep(ctx context.Context, step int64) (StepRequest, error)
	// AfterStep runs after each step; stop asks the run to end cleanly
	// after this step.
	AfterStep(ctx context.Context, res StepResult) (stop bool, err error)
	// End runs once when the run ends, however it ends; cause is nil for a
	// clean end (input exhausted, step limit, stop request) and otherwise
	// the error the run returns.
	End(ctx context.Context, info RunInfo, cause error) error
}

// LossChecker is an optional interface for hooks that must see a step's
// loss before its gradients are applied; returning an error aborts the step
// with the variables unchanged.
type LossChecker interface {
	CheckLoss(step int64, loss float64) error
}

// BaseHook implements Hook with methods that do nothing; embed it to write
// only the methods a hook needs.
type BaseHook struct{}

// Begin does nothing.
func (BaseHook) Begin(context.Context, RunInfo) error { return nil }

// BeforeStep asks for nothing.
func (BaseHook) BeforeStep(context.Context, int64) (StepRequest, error) { return StepRequest{}, nil }

// AfterStep does nothing.
func (BaseHook) AfterStep(context.Context, StepResult) (bool, error) { return false, nil }

// End does nothing.
func (BaseHook) End(context.Context, RunInfo, error) error { return nil }

// funcHook calls a function after every step.
type funcHook struct {
	BaseHook
	fn func(step int64, loss float64)
}

func (h funcHook) AfterStep(_ context.Context, r StepResult) (bool, error) {
	h.fn(r.Step, r.Loss)
	return false, nil
}

// LoggingHook logs the step, loss, steps/s and examples/s through the
// run's logger after the run's first step, every Every steps, and, when
// Interval is positive, after any step that ends at least Interval after
// the last line, so that a slow run is never silent for long. Its values
// are rounded for a person to read: the loss to 5 significant digits, the
// speeds to whole numbers from 100 up and to 3 significant digits below.
type LoggingHook struct {
	BaseHook
	Every int64
	// Interval is the longest time between lines, checked after each step;
	// 0 or negative logs by steps alone.
	Interval time.Duration
	// now reads the clock (time.Now; tests advance their own).
	now       func() time.Time
	log       *slog.Logger
	last      time.Time
	lastStep  int64
	startStep int64
	examples  int
}

// DefaultLogInterval is the longest time between training log lines when
// RunConfig.LogInterval is 0, and LoggingHook's Interval from
// NewLoggingHook.
const DefaultLogInterval = 30 * time.Second

// NewLoggingHook logs every n steps and at least every
// DefaultLogInterval.
func NewLoggingHook(n int64) *LoggingHook {
	return &LoggingHook{Every: n, Interval: DefaultLogInterval}
}

// clock returns the hook's time source.
func (h *LoggingHook) clock() time.Time {
	if h.now != nil {
		return h.now()
	}
	return time.Now()
}

// Begin starts the clock.
func (h *LoggingHook) Begin(_ context.Context, info RunInfo) error {
	h.log, h.last, h.lastStep, h.startStep, h.examples = info.Logger, h.clock(), info.StartStep, info.StartStep, 0
	return nil
}

// AfterStep logs after the run's first step, every Every steps and when
// Interval has passed since the last line.
func (h *LoggingHook) AfterStep(_ context.Context, r StepResult) (bool, error) {
	h.examples += r.Examples
	now := h.clock()
	due := r.Step == h.startStep+1 ||
		(h.Every > 0 && r.Step%h.Every == 0) ||
		(h.Interval > 0 && now.Sub(h.last) >= h.Interval)
	if !due {
		return false, nil
	}
	dt := now.Sub(h.last).Seconds()
	h.log.Info("train", "step", r.Step, "loss", roundMetric(r.Loss),
		"steps_per_sec", rate(float64(r.Step-h.lastStep)/dt), "examples_per_sec", rate(float64(h.examples)/dt))
	h.last, h.lastStep, h.examples = now, r.Step, 0
	return false, nil
}

// StopAtStep asks the run to stop once the global step reaches Last.
type StopAtStep struct {
	BaseHook
	Last int64
}

// AfterStep requests a stop at Last.
func (h StopAtStep) AfterStep(_ context.Context, r StepResult) (bool, error) {
	return r.Step >= h.Last, nil
}

// ErrNonFiniteLoss is returned by a run that NaNGuard stopped.
var ErrNonFiniteLoss = errors.New("loss is NaN or infinite")

// NaNGuard stops training with ErrNonFiniteLoss when a step's loss is NaN
// or infinite, before that step's gradients are applied: the variables,
// and the last checkpoint, stay as they were after the last good step.
type NaNGuard struct{ BaseHook }

// CheckLoss rejects a non-finite loss.
func (NaNGuard) CheckLoss(step int64, loss float64) error {
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return fmt.Errorf("step %d: %w (%v)", step, ErrNonFiniteLoss, loss)
	}
	return nil
}

// defaultHooks are the hooks every training run has, before the caller's:
// the NaN guard, progress (a bar on RunConfig.Progress when given, else
// log lines), the train history and the TensorBoard summaries of the model
// directory.
func (e *Estimator) defaultHooks() []Hook {
	hooks := []Hook{NaNGuard{}}
	if e.cfg.LogEvery > 0 {
		hooks = append(hooks, e.progressHook())
		if e.cfg.ModelDir != "" {
			hooks = append(hooks, historyHook{dir: e.cfg.ModelDir, every: int64(e.cfg.LogEvery)})
		}
	}
	if e.cfg.ModelDir != "" && e.cfg.SaveSummarySteps > 0 {
		hooks = append(hooks, &summaryHook{e: e, every: e.cfg.SaveSummarySteps})
	}
	return hooks
}
