package estimator

import (
	"context"
	"fmt"
	"iter"
	"runtime/trace"
	"time"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/replicate"
)

// TrainOption limits a Train call.
type TrainOption func(*trainOptions)

type trainOptions struct {
	steps, maxSteps       int64
	hasSteps, hasMaxSteps bool
	hooks                 []Hook
}

// Steps trains for n more steps (or until the input ends); n must be at
// least 1. A step is an update: with replicate.Config.AccumulateSteps K,
// each reads K batches.
func Steps(n int64) TrainOption {
	return func(o *trainOptions) { o.steps, o.hasSteps = n, true }
}

// MaxSteps trains until the global step reaches n (or the input ends); n
// must not be negative. A model already at step n or beyond trains
// nothing: Train logs that it skips training and returns nil, as
// TensorFlow's max_steps.
func MaxSteps(n int64) TrainOption {
	return func(o *trainOptions) { o.maxSteps, o.hasMaxSteps = n, true }
}

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
// on every hook however the run ends. A run reads as begin (restore, build
// the towers, begin the hooks), steps, end (the hooks' End). With a model
// directory, Train holds its TrainLockFile throughout: a model directory
// another run is training into is an error wrapping ErrModelDirLocked at
// once, and nothing in it is touched. An input that yields nothing from
// global step 0 is an error wrapping ErrNoBatches (past step 0 it has
// nothing left to train on, and Train returns nil); an error the input
// yields, ErrNoBatches included, is returned at any step. While it runs, towers on every core
// in the openblas build keep one Go processor spare: GOMAXPROCS is one more
// than before until Train returns (replicate.Engine.HoldProcessors).
func (e *Estimator) Train(ctx context.Context, input InputFn, opts ...TrainOption) (err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.checkOpen("train"); err != nil {
		return err
	}
	var o trainOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.hasSteps && o.steps < 1 {
		return fmt.Errorf("train: Steps(%d): want at least 1 step", o.steps)
	}
	if o.hasMaxSteps && o.maxSteps < 0 {
		return fmt.Errorf("train: MaxSteps(%d): want a global step of 0 or more", o.maxSteps)
	}
	if input == nil {
		return fmt.Errorf("train: nil input function")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e.eng.Open()
	defer func() { err = e.leave(ctx, "train", err) }()
	defer e.eng.HoldProcessors()()
	if e.cfg.ModelDir != "" {
		lock, err := lockModelDir(e.cfg.ModelDir)
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		defer lock.release()
	}
	r, err := e.beginTrain(ctx, input, o)
	if r == nil || err != nil {
		return err
	}
	defer func() { err = r.end(ctx, err) }()
	// update runs one update on the micro-batches read for it and reports
	// whether the run ends.
	update := func(micro []Batch) (bool, error) {
		stop, err := r.step(ctx, micro)
		if peerStopped(err) {
			e.log.Info("train: another process stopped; stopping with it", "global_step", e.eng.Step(), "cause", err)
			return true, nil
		}
		return stop, err
	}
	// micro gathers the micro-batches of one update
	// (replicate.Config.AccumulateSteps); an input that ends part-way
	// through one trains on those it gave.
	k := e.eng.AccumulateSteps()
	micro := make([]Batch, 0, k)
	for batch, err, ok := r.first, r.firstErr, r.haveFirst; ok; batch, err, ok = r.nextBatch(ctx) {
		if err != nil {
			return fmt.Errorf("train: input at step %d: %w", e.eng.Step(), err)
		}
		if micro = append(micro, batch); len(micro) < k {
			continue
		}
		stop, err := update(micro)
		micro = micro[:0]
		if err != nil {
			return err
		}
		if stop {
			break
		}
	}
	if len(micro) > 0 && ctx.Err() == nil {
		if _, err := update(micro); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("train: stopped at step %d: %w", e.eng.Step(), err)
	}
	if !r.haveFirst {
		if r.info.StartStep == 0 {
			return fmt.Errorf("train: %w: nothing was trained", ErrNoBatches)
		}
		e.log.Info("train: the input has no batches past those the global step has trained on", "global_step", r.info.StartStep)
	}
	e.log.Debug("train done", "steps", e.eng.Step()-r.info.StartStep, "global_step", e.eng.Step(), "seconds", time.Since(r.t0).Seconds())
	return nil
}

// trainRun is one Train call under way.
type trainRun struct {
	e        *Estimator
	hooks    []Hook
	begun    int // hooks whose Begin ran
	checkers []LossChecker
	requests [][]string // per hook, what it fetches this step
	inStep   replicate.StepHooks
	info     RunInfo
	limit    int64 // the step to stop at, -1: none
	t0       time.Time

	next      func() (Batch, error, bool)
	stopInput func()
	lateInput func() error // the input's failure after stopInput
	started   func()
	first     Batch
	firstErr  error
	haveFirst bool
}

// beginTrain restores the latest checkpoint, works out the step limit,
// starts reading the input, builds the towers for the first batch (the
// model's variables then exist, and are warm-started, when a hook saves
// the initial checkpoint) and begins the hooks. A nil run with a nil error
// means there is nothing to do: the model is at its limit already.
func (e *Estimator) beginTrain(ctx context.Context, input InputFn, o trainOptions) (*trainRun, error) {
	if err := e.restoreLatest(); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	// Across processes every rank takes rank 0's variables: its restored
	// checkpoint (global step and slots included) before the step limit is
	// worked out, and after the first build its fresh ones.
	if err := e.eng.SyncFromRoot(ctx); err != nil {
		return nil, e.peerEnd(fmt.Errorf("train: %w", err))
	}
	start := e.eng.Step()
	limit := int64(-1)
	if o.hasSteps {
		limit = start + o.steps
	}
	if o.hasMaxSteps && start >= o.maxSteps {
		e.log.Info("train: skipping training: the global step has already reached max steps", "global_step", start, "max_steps", o.maxSteps)
		return nil, nil
	}
	if o.hasMaxSteps && (limit < 0 || o.maxSteps < limit) {
		limit = o.maxSteps
	}
	r := &trainRun{e: e, limit: limit, hooks: append(e.defaultHooks(), o.hooks...)}
	if e.cfg.ModelDir != "" {
		r.hooks = append(r.hooks, &CheckpointSaver{
			Dir: e.cfg.ModelDir, EverySteps: e.cfg.SaveCheckpointsSteps, Every: e.cfg.SaveCheckpointsEvery,
			Keep: max(e.cfg.KeepCheckpointMax, 0), saved: func(path string, _ int64) { e.ckpt = path; e.flushEvents() },
		})
	}
	r.info = RunInfo{Store: e.store(), ModelDir: e.cfg.ModelDir, Logger: e.log, StartStep: start, LastStep: limit}
	var src, batches iter.Seq2[Batch, error]
	src, r.lateInput = readInput(WithStartBatch(ctx, start*int64(e.eng.AccumulateSteps())), input)
	batches, r.started = prefetch(ctx, src, true)
	r.next, r.stopInput = iter.Pull2(batches)
	r.first, r.firstErr, r.haveFirst = r.next()
	if r.haveFirst && r.firstErr == nil {
		if err := e.eng.Build(model.Train, r.first); err != nil {
			r.stopInput()
			return nil, fmt.Errorf("train: %w", err)
		}
	}
	if r.haveFirst && r.firstErr == nil {
		if err := e.eng.SyncFromRoot(ctx); err != nil {
			r.stopInput()
			return nil, e.peerEnd(fmt.Errorf("train: %w", err))
		}
	}
	for _, h := range r.hooks {
		if err := callHook(h, "Begin", func() error { return h.Begin(ctx, r.info) }); err != nil {
			return nil, r.end(ctx, fmt.Errorf("train: begin hook: %w", err))
		}
		r.begun++
		if c, ok := h.(LossChecker); ok {
			r.checkers = append(r.checkers, c)
		}
	}
	r.requests = make([][]string, len(r.hooks))
	r.inStep = replicate.StepHooks{CheckLoss: r.checkLoss, Started: r.started}
	r.t0 = time.Now()
	return r, nil
}

// nextBatch waits for the next batch of the input.
func (r *trainRun) nextBatch(ctx context.Context) (Batch, error, bool) {
	defer trace.StartRegion(ctx, "wait for input").End()
	return r.next()
}

// checkLoss asks every LossChecker hook about a step's loss before the
// update. A loss a checker rejects is a lossRejected error.
func (r *trainRun) checkLoss(loss float64) error {
	for _, c := range r.checkers {
		var rejected error
		err := callHook(c, "CheckLoss", func() error {
			rejected = c.CheckLoss(r.e.eng.Step(), loss)
			return rejected
		})
		if rejected != nil {
			return &lossRejected{rejected}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// lossRejected is the error of a run whose loss a LossChecker rejected
// (NaNGuard: a diverging run).
type lossRejected struct{ err error }

func (e *lossRejected) Error() string { return e.err.Error() }
func (e *lossRejected) Unwrap() error { return e.err }

// step runs one training step (one update) with its hooks: BeforeStep,
// the engine's step on batch (several: micro-batches accumulated into the
// update), the fetches, AfterStep; then the batches are released. It
// reports whether the run should stop.
func (r *trainRun) step(ctx context.Context, batch []Batch) (stop bool, err error) {
	e := r.e
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("train: stopped at step %d: %w", e.eng.Step(), err)
	}
	var fetch []string
	for i, h := range r.hooks {
		var req StepRequest
		err := callHook(h, "BeforeStep", func() (err error) {
			req, err = h.BeforeStep(ctx, e.eng.Step())
			return err
		})
		if err != nil {
			return false, fmt.Errorf("train: before step %d: %w", e.eng.Step(), err)
		}
		r.requests[i] = req.Fetch
		fetch = append(fetch, req.Fetch...)
	}
	rows := 0
	for _, b := range batch {
		n, _ := b.Rows()
		rows += n
	}
	loss, err := e.eng.TrainMicroBatches(ctx, batch, r.inStep)
	if err != nil {
		return false, fmt.Errorf("train: %w", err)
	}
	res := StepResult{Step: e.eng.Step(), Loss: loss, Examples: rows}
	res.GradientNorm, _ = e.eng.GradientNorm()
	var values map[string]*tensor.Dense
	if len(fetch) > 0 {
		if values, err = e.eng.Fetch(fetch); err != nil {
			return false, fmt.Errorf("train: step %d: %w", res.Step, err)
		}
	}
	stop = r.limit >= 0 && res.Step >= r.limit
	for i, h := range r.hooks {
		res.Values = nil
		if len(r.requests[i]) > 0 {
			res.Values = make(map[string]*tensor.Dense, len(r.requests[i]))
			for _, name := range r.requests[i] {
				res.Values[name] = values[name]
			}
		}
		var s bool
		err := callHook(h, "AfterStep", func() (err error) {
			s, err = h.AfterStep(ctx, res)
			return err
		})
		if err != nil {
			return false, fmt.Errorf("train: after step %d: %w", res.Step, err)
		}
		stop = stop || s
	}
	for _, b := range batch {
		if b.Release != nil {
			b.Release()
		}
	}
	return stop, nil
}

// end stops reading the input and runs End on every hook that began,
// however the run ended; a failure of the input after it was stopped, or
// else the first End error, becomes the run's error when it had none.
func (r *trainRun) end(ctx context.Context, err error) error {
	r.stopInput()
	if lerr := r.lateInput(); lerr != nil && err == nil {
		err = fmt.Errorf("train: input at step %d: %w", r.e.eng.Step(), lerr)
	}
	for _, h := range r.hooks[:r.begun] {
		if herr := callHook(h, "End", func() error { return h.End(ctx, r.info, err) }); herr != nil && err == nil {
			err = fmt.Errorf("train: end hook: %w", herr)
		}
	}
	return err
}
