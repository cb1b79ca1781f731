// Package estimator trains, evaluates and predicts with a model function,
// in the style of TensorFlow's tf.estimator.
//
// A model function (ModelFn) builds a model on one tower for a Mode and
// returns a Spec: loss, predictions, eval metrics, export outputs and train
// ops. An Estimator runs a Model — a ModelFn on one device, or one wrapped by
// replicate.ModelFn to run one tower per device — over input functions that
// yield batches. It owns the variable store (towers.Store), whose masters
// survive every graph the Estimator builds, and the global step.
//
// Graphs are built once per mode and input signature and reused: a step only
// feeds values and runs the towers, concurrently, one goroutine each.
//
// Estimator methods are safe for concurrent use; they run one at a time.
package estimator

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"reflect"
	"runtime/trace"
	"sync"
	"time"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/towers"
)

// RunConfig configures an Estimator.
type RunConfig struct {
	// ModelDir is the run's home: checkpoints and history files. Train,
	// Evaluate and Predict first restore its latest checkpoint. Empty keeps
	// everything in memory.
	ModelDir string
	// Seed seeds variable initializers: the same seed gives the same
	// initial variables on any number of towers.
	Seed uint64
	// SaveCheckpointsSteps saves a checkpoint every this many steps
	// (0: not by steps).
	SaveCheckpointsSteps int64
	// SaveCheckpointsEvery saves a checkpoint at this interval. With
	// ModelDir set and neither this nor SaveCheckpointsSteps, every 10
	// minutes, as TensorFlow does. A run also saves when it ends cleanly or
	// is cancelled.
	SaveCheckpointsEvery time.Duration
	// KeepCheckpointMax keeps the newest this many checkpoints; 0 keeps all.
	KeepCheckpointMax int
	// LogEvery logs the step, loss and speed every this many training steps
	// (default 100; negative disables), and writes the loss to the model
	// directory's train history.
	LogEvery int
	// Logger receives progress; nil means slog.Default().
	Logger *slog.Logger
	// Params are handed to every model function call.
	Params Params
	// WarmStart initialises a run whose model directory has no checkpoint
	// from another run's checkpoint, once the model has created its
	// variables.
	WarmStart *WarmStart
}

// WarmStart says which variables to take from another run, like
// tf.estimator.WarmStartSettings. Only trainable variables are taken: the
// global step and optimizer slots start fresh.
type WarmStart struct {
	// From is a checkpoint directory or a model directory (its latest).
	From string
	// Pattern is a regular expression selecting variables by their name in
	// this model; "" selects every trainable variable.
	Pattern string
	// Rename maps this model's variable names to their names in From.
	Rename map[string]string
}

// Estimator trains, evaluates and predicts with one model.
type Estimator struct {
	mu    sync.Mutex
	cfg   RunConfig
	log   *slog.Logger
	store *towers.Store
	eng   *engine
	ckpt  string // the checkpoint the store last saved or restored
}

// New returns an Estimator for model. An invalid model (for example a
// replication with loss reduction NONE) is an error here.
func New(model Model, cfg RunConfig) (*Estimator, error) {
	if model == nil {
		return nil, fmt.Errorf("new estimator: nil model")
	}
	rep, err := model.Replication()
	if err != nil {
		return nil, fmt.Errorf("new estimator: %w", err)
	}
	placement := rep.Placement
	if placement == nil {
		placement = towers.AutoPlacement(rep.Devices)
	}
	store := towers.NewStore(towers.WithSeed(cfg.Seed), towers.WithPlacement(placement))
	eng, err := newEngine(model.Fn(), rep, store, cfg.Params)
	if err != nil {
		return nil, fmt.Errorf("new estimator: %w", err)
	}
	if cfg.LogEvery == 0 {
		cfg.LogEvery = 100
	}
	if cfg.ModelDir != "" && cfg.SaveCheckpointsSteps == 0 && cfg.SaveCheckpointsEvery == 0 {
		cfg.SaveCheckpointsEvery = 10 * time.Minute
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	e := &Estimator{cfg: cfg, log: log, store: store, eng: eng}
	if cfg.WarmStart != nil {
		if cfg.WarmStart.From == "" {
			return nil, fmt.Errorf("new estimator: warm start without a checkpoint to start from")
		}
		eng.onBuild = e.warmStart
	}
	return e, nil
}

// warmStart applies the warm start once, after the first build, unless the
// store holds the run's own checkpoint (restoring loaded it).
func (e *Estimator) warmStart() error {
	if e.ckpt != "" {
		e.eng.onBuild = nil // restored the run's own checkpoint
		return nil
	}
	ws := e.cfg.WarmStart
	if err := checkpoint.WarmStart(e.store, ws.From, ws.Pattern, ws.Rename); err != nil {
		return fmt.Errorf("warm start from %s: %w", ws.From, err)
	}
	e.eng.onBuild = nil
	e.log.Info("warm started", "from", ws.From, "pattern", ws.Pattern)
	return nil
}

// Store returns the variable store: master values by name, weights by name
// and as one flat vector.
func (e *Estimator) Store() *towers.Store { return e.store }

// GlobalStep returns the number of training steps taken.
func (e *Estimator) GlobalStep() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.eng.step()
}

// VariableNames returns every variable name in creation order, optimizer
// slots and the global step included.
func (e *Estimator) VariableNames() []string { return e.store.Names() }

// VariableValue returns a copy of the named variable's value.
func (e *Estimator) VariableValue(name string) (*tensor.Dense, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.store.Value(name)
}

// Close releases the graphs and VMs the Estimator built.
func (e *Estimator) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.eng.close()
}

// TrainOption limits a Train call.
type TrainOption func(*trainOptions)

type trainOptions struct {
	steps, maxSteps int64
	hooks           []Hook
}

// Steps trains for n more steps (or until the input ends).
func Steps(n int64) TrainOption { return func(o *trainOptions) { o.steps = n } }

// MaxSteps trains until the global step reaches n (or the input ends); a
// model already at n does nothing.
func MaxSteps(n int64) TrainOption { return func(o *trainOptions) { o.maxSteps = n } }

// Hooks adds hooks to the run, after the Estimator's own (NaN guard,
// logging, checkpoint saving).
func Hooks(hs ...Hook) TrainOption {
	return func(o *trainOptions) { o.hooks = append(o.hooks, hs...) }
}

// OnStep calls fn after every training step with the new global step and
// the step's reduced loss. fn runs inside Train and must not call the
// Estimator's methods.
func OnStep(fn func(step int64, loss float64)) TrainOption {
	return Hooks(funcHook{fn: fn})
}

// Train runs training steps over input until it ends, the step limit is
// reached, a hook asks to stop, or ctx is done (then it returns ctx's error;
// every finished step stays applied). Hooks run around every step; End runs
// on every hook however the run ends.
func (e *Estimator) Train(ctx context.Context, input InputFn, opts ...TrainOption) (err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var o trainOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.steps < 0 || o.maxSteps < 0 {
		return fmt.Errorf("train: negative step limit")
	}
	if input == nil {
		return fmt.Errorf("train: nil input function")
	}
	if err := e.restoreLatest(); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	start := e.eng.step()
	limit := int64(-1)
	if o.steps > 0 {
		limit = start + o.steps
	}
	if o.maxSteps > 0 && (limit < 0 || o.maxSteps < limit) {
		limit = o.maxSteps
	}
	if limit >= 0 && start >= limit {
		return nil
	}
	hooks := append(e.defaultHooks(), o.hooks...)
	if e.cfg.ModelDir != "" {
		hooks = append(hooks, &CheckpointSaver{
			Dir: e.cfg.ModelDir, EverySteps: e.cfg.SaveCheckpointsSteps, Every: e.cfg.SaveCheckpointsEvery,
			Keep: e.cfg.KeepCheckpointMax, saved: func(path string, _ int64) { e.ckpt = path },
		})
	}
	info := RunInfo{Store: e.store, ModelDir: e.cfg.ModelDir, Logger: e.log, StartStep: start, LastStep: limit}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	begun := 0
	defer func() {
		for _, h := range hooks[:begun] {
			if herr := h.End(ctx, info, err); herr != nil && err == nil {
				err = fmt.Errorf("train: end hook: %w", herr)
			}
		}
	}()
	// Build the towers for the first batch before the hooks begin: the
	// model's variables then exist (and are warm-started) when a hook saves
	// the initial checkpoint.
	batches, started := prefetch(ctx, input(ctx), true)
	next, stopInput := iter.Pull2(batches)
	defer stopInput()
	first, firstErr, haveFirst := next()
	if haveFirst && firstErr == nil {
		if _, err := e.eng.prepare(Train, first); err != nil {
			return fmt.Errorf("train: %w", err)
		}
	}
	for _, h := range hooks {
		if err := h.Begin(ctx, info); err != nil {
			return fmt.Errorf("train: begin hook: %w", err)
		}
		begun++
	}
	var checkers []LossChecker
	for _, h := range hooks {
		if c, ok := h.(LossChecker); ok {
			checkers = append(checkers, c)
		}
	}
	check := func(loss float64) error {
		for _, c := range checkers {
			if err := c.CheckLoss(e.eng.step(), loss); err != nil {
				return err
			}
		}
		return nil
	}
	t0 := time.Now()
	requests := make([][]string, len(hooks))
	nextBatch := func() (Batch, error, bool) {
		defer trace.StartRegion(ctx, "wait for input").End()
		return next()
	}
	for batch, err, ok := first, firstErr, haveFirst; ok; batch, err, ok = nextBatch() {
		if err != nil {
			return fmt.Errorf("train: input at step %d: %w", e.eng.step(), err)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("train: stopped at step %d: %w", e.eng.step(), err)
		}
		var fetch []string
		for i, h := range hooks {
			req, err := h.BeforeStep(ctx, e.eng.step())
			if err != nil {
				return fmt.Errorf("train: before step %d: %w", e.eng.step(), err)
			}
			requests[i] = req.Fetch
			fetch = append(fetch, req.Fetch...)
		}
		rows, _ := batch.Rows()
		loss, err := e.eng.trainStep(ctx, batch, check, started)
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		res := StepResult{Step: e.eng.step(), Loss: loss, Examples: rows}
		var values map[string]*tensor.Dense
		if len(fetch) > 0 {
			if values, err = e.eng.fetch(fetch); err != nil {
				return fmt.Errorf("train: step %d: %w", res.Step, err)
			}
		}
		stop := limit >= 0 && res.Step >= limit
		for i, h := range hooks {
			res.Values = nil
			if len(requests[i]) > 0 {
				res.Values = make(map[string]*tensor.Dense, len(requests[i]))
				for _, name := range requests[i] {
					res.Values[name] = values[name]
				}
			}
			s, err := h.AfterStep(ctx, res)
			if err != nil {
				return fmt.Errorf("train: after step %d: %w", res.Step, err)
			}
			stop = stop || s
		}
		if batch.Release != nil {
			batch.Release()
		}
		if stop {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("train: stopped at step %d: %w", e.eng.step(), err)
	}
	e.log.Debug("train done", "steps", e.eng.step()-start, "global_step", e.eng.step(), "seconds", time.Since(t0).Seconds())
	return nil
}

// EvalOption limits an Evaluate call.
type EvalOption func(*evalOptions)

type evalOptions struct{ steps int64 }

// EvalSteps evaluates at most n batches.
func EvalSteps(n int64) EvalOption { return func(o *evalOptions) { o.steps = n } }

// Evaluate runs the model in Eval mode over input and returns every eval
// metric by name, "loss" (the mean over batches of the reduced batch loss,
// as TensorFlow reports it) and "global_step". Metrics start from zero on
// every call.
func (e *Estimator) Evaluate(ctx context.Context, input InputFn, opts ...EvalOption) (map[string]float64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var o evalOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := e.restoreLatest(); err != nil {
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
	e.eng.resetMetrics()
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
		loss, err := e.eng.evalStep(ctx, batch)
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
	out, err := e.eng.metricResults()
	if err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	out["loss"] = lossSum / float64(batches)
	out[GlobalStepName] = float64(e.eng.step())
	if e.cfg.ModelDir != "" {
		rec := EvalRecord{Step: e.eng.step(), Time: time.Now().UTC(), Metrics: map[string]float64{}}
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

// Prediction is one example's predictions by name: each the example's row
// of the batch output (shape: the output's shape without dimension 0).
type Prediction map[string]*tensor.Dense

// Predict runs the model in Predict mode over input and yields one
// Prediction per example, in input order. Labels in the input are ignored.
// Iteration stops at the first error, which is yielded.
func (e *Estimator) Predict(ctx context.Context, input InputFn) iter.Seq2[Prediction, error] {
	return func(yield func(Prediction, error) bool) {
		for out, err := range e.PredictBatches(ctx, input) {
			if err != nil {
				yield(nil, err)
				return
			}
			rows := -1
			for _, v := range out.Predictions {
				rows = v.Shape()[0]
				break
			}
			for r := 0; r < rows; r++ {
				p := Prediction{}
				for k, v := range out.Predictions {
					p[k] = row(v, r)
				}
				if !yield(p, nil) {
					return
				}
			}
		}
	}
}

// BatchOutput is one predict batch's results.
type BatchOutput struct {
	// Predictions by name, batch along dimension 0.
	Predictions map[string]*tensor.Dense
	// ExportOutputs by signature key, then output name.
	ExportOutputs map[string]map[string]*tensor.Dense
}

// PredictBatches is Predict a batch at a time, with the export outputs.
// The Estimator is locked only while a batch is computed, so the loop body
// may call its methods.
func (e *Estimator) PredictBatches(ctx context.Context, input InputFn) iter.Seq2[BatchOutput, error] {
	return func(yield func(BatchOutput, error) bool) {
		if input == nil {
			yield(BatchOutput{}, fmt.Errorf("predict: nil input function"))
			return
		}
		if err := e.locked(e.restoreLatest); err != nil {
			yield(BatchOutput{}, fmt.Errorf("predict: %w", err))
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		n := 0
		for batch, err := range input(ctx) {
			if err == nil {
				err = ctx.Err()
			}
			if err != nil {
				yield(BatchOutput{}, fmt.Errorf("predict: input at batch %d: %w", n, err))
				return
			}
			preds, outs, err := e.predictStep(ctx, batch)
			if err != nil {
				yield(BatchOutput{}, fmt.Errorf("predict: batch %d: %w", n, err))
				return
			}
			n++
			if !yield(BatchOutput{Predictions: preds, ExportOutputs: outs}, nil) {
				return
			}
		}
		if err := ctx.Err(); err != nil {
			yield(BatchOutput{}, fmt.Errorf("predict: %w", err))
		}
	}
}

// row returns a copy of row r of t, without dimension 0.
func row(t *tensor.Dense, r int) *tensor.Dense {
	data := reflect.ValueOf(t.Data())
	size := t.Shape().TotalSize() / t.Shape()[0]
	return numeric.Over(t.Shape()[1:], numeric.Copy(data.Slice(r*size, (r+1)*size).Interface()))
}

// locked runs fn with the Estimator locked.
func (e *Estimator) locked(fn func() error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return fn()
}

// predictStep runs one predict batch with the Estimator locked.
func (e *Estimator) predictStep(ctx context.Context, b Batch) (preds map[string]*tensor.Dense, outs map[string]map[string]*tensor.Dense, err error) {
	err = e.locked(func() error {
		preds, outs, err = e.eng.predictStep(ctx, b)
		return err
	})
	return preds, outs, err
}
