package estimator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/towerflow/towerflow/estimator/tfevents"
	"github.com/towerflow/towerflow/model"
)

// TensorBoard summaries of a model directory, where tf.estimator put them:
// training scalars in the model directory itself, each evaluation's
// metrics in its eval directory (EvalDir), so that `tensorboard --logdir
// <model dir>` shows training and evaluation as two runs.
const (
	// LossTag is the training loss, every SaveSummarySteps steps.
	LossTag = "loss"
	// StepsPerSecTag is the training speed in global steps per second
	// since the previous summary (tf.estimator's StepCounterHook).
	StepsPerSecTag = "global_step/sec"
	// ExamplesPerSecTag is the training speed in examples (batch rows)
	// per second since the previous summary.
	ExamplesPerSecTag = "examples/sec"
	// GradientNormTag is the global norm of the gradients before clipping
	// (StepResult.GradientNorm), with the loss, when a train op clips by
	// global norm (model.Clip.GlobalNorm).
	GradientNormTag = "gradients/global_norm"
)

// eventsFlushEvery bounds how long training summaries wait in memory
// between checkpoints, as TensorFlow's writers flushed every 120 seconds.
const eventsFlushEvery = 2 * time.Minute

// EvalDir is the directory, inside a model directory, of the TensorBoard
// summaries of the evaluations named name (see EvalName): "eval", or
// "eval_<name>", as tf.estimator's Estimator.eval_dir.
func EvalDir(name string) string {
	if name == "" {
		return "eval"
	}
	return "eval_" + name
}

// checkEvalName rejects a name that would put its eval directory outside
// the model directory.
func checkEvalName(name string) error {
	if strings.ContainsAny(name, `/\`+string(os.PathSeparator)+"\x00") {
		return fmt.Errorf("evaluation name %q: a name may not hold a path separator", name)
	}
	return nil
}

// eventWriter returns the open event file of dir, starting one the first
// time: one file per directory for the Estimator's life (as TensorFlow's
// FileWriterCache kept one per directory per process), closed by Close.
func (e *Estimator) eventWriter(dir string) (*tfevents.Writer, error) {
	if w := e.events[dir]; w != nil {
		return w, nil
	}
	w, err := tfevents.Create(dir)
	if err != nil {
		return nil, fmt.Errorf("tensorboard summaries: %w", err)
	}
	if e.events == nil {
		e.events = map[string]*tfevents.Writer{}
	}
	e.events[dir] = w
	return w, nil
}

// dropEventWriter closes the event file of dir after an error, so that the
// next run starts a new file rather than failing on this one.
func (e *Estimator) dropEventWriter(dir string) {
	if w := e.events[dir]; w != nil {
		w.Close()
		delete(e.events, dir)
	}
}

// flushEvents writes the buffered summaries of every open event file, as
// a checkpoint is saved. An error stays with its writer and is returned by
// its next write or by the training run's end.
func (e *Estimator) flushEvents() {
	for _, w := range e.events {
		w.Flush()
	}
}

// closeEvents closes every open event file.
func (e *Estimator) closeEvents() error {
	var errs []error
	for _, dir := range slices.Sorted(maps.Keys(e.events)) {
		errs = append(errs, e.events[dir].Close())
	}
	e.events = nil
	return errors.Join(errs...)
}

// writeEvalSummary writes an evaluation's results, every one but the
// global step (the event's step), to the evaluation's event file, and
// flushes it, as tf.estimator did after every evaluation.
func (e *Estimator) writeEvalSummary(name string, results map[string]float64) error {
	if e.cfg.ModelDir == "" || e.cfg.SaveSummarySteps < 0 {
		return nil
	}
	dir := filepath.Join(e.cfg.ModelDir, EvalDir(name))
	w, err := e.eventWriter(dir)
	if err != nil {
		return err
	}
	var scalars []tfevents.Scalar
	for _, k := range slices.Sorted(maps.Keys(results)) {
		if k != model.GlobalStepName {
			scalars = append(scalars, tfevents.Scalar{Tag: k, Value: results[k]})
		}
	}
	err = w.WriteScalars(e.eng.Step(), scalars...)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		e.dropEventWriter(dir)
		return fmt.Errorf("tensorboard summaries: %w", err)
	}
	return nil
}

// summaryHook writes a training run's TensorBoard summaries to the model
// directory's event file: the loss at the run's first step and every
// `every` global steps, with the steps and examples per second since the
// previous summary. It flushes at the end of the run (and the Estimator
// flushes it whenever a checkpoint is saved, and it flushes itself at
// least every eventsFlushEvery). A summary that cannot be written ends the
// run with the error, as a history line that cannot be written does.
type summaryHook struct {
	BaseHook
	e     *Estimator
	every int64

	dir       string
	w         *tfevents.Writer
	first     bool
	lastStep  int64
	examples  int
	lastTime  time.Time
	lastFlush time.Time
}

func (h *summaryHook) Begin(_ context.Context, info RunInfo) error {
	w, err := h.e.eventWriter(info.ModelDir)
	if err != nil {
		return err
	}
	now := time.Now()
	h.dir, h.w, h.first, h.lastStep, h.examples, h.lastTime, h.lastFlush = info.ModelDir, w, true, info.StartStep, 0, now, now
	// Where this run starts, marked with a SessionLog START as
	// tf.estimator's SummarySaverHook does: TensorBoard drops the
	// summaries an earlier run wrote past this step, after its last
	// checkpoint, before it crashed.
	return w.WriteSession(info.StartStep, tfevents.SessionStart)
}

func (h *summaryHook) AfterStep(_ context.Context, r StepResult) (bool, error) {
	h.examples += r.Examples
	first := h.first
	h.first = false
	if !first && r.Step%h.every != 0 {
		return false, nil
	}
	scalars := []tfevents.Scalar{{Tag: LossTag, Value: r.Loss}}
	if _, ok := h.e.eng.GradientNorm(); ok {
		scalars = append(scalars, tfevents.Scalar{Tag: GradientNormTag, Value: r.GradientNorm})
	}
	now := time.Now()
	// At the run's first step there is no interval to time yet.
	if dt := now.Sub(h.lastTime).Seconds(); !first && dt > 0 {
		scalars = append(scalars,
			tfevents.Scalar{Tag: StepsPerSecTag, Value: float64(r.Step-h.lastStep) / dt},
			tfevents.Scalar{Tag: ExamplesPerSecTag, Value: float64(h.examples) / dt})
		h.lastStep, h.examples, h.lastTime = r.Step, 0, now
	}
	if err := h.w.WriteScalars(r.Step, scalars...); err != nil {
		return false, err
	}
	if now.Sub(h.lastFlush) >= eventsFlushEvery {
		h.lastFlush = now
		return false, h.w.Flush()
	}
	return false, nil
}

// End flushes the run's summaries; a writer that failed is dropped, so the
// next run starts a new file.
func (h *summaryHook) End(context.Context, RunInfo, error) error {
	if err := h.w.Flush(); err != nil {
		h.e.dropEventWriter(h.dir)
		return err
	}
	return nil
}
