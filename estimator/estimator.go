// Package estimator is towerflow's run loop, in the style of TensorFlow's
// tf.estimator: Train, Evaluate, Predict, TrainAndEvaluate and Export over
// input functions, with hooks, checkpoints and history in a model
// directory, and warm start.
//
// An Estimator runs a replicate.Model (a model.Fn with its replication:
// one tower per device, or one device) through the replicate package's
// Engine, which builds, feeds and combines the towers; the Estimator does
// not know how towers are built. The engine's variable store
// (towers.Store), whose masters survive every graph, holds the global step.
//
// Estimator methods are safe for concurrent use; they run one at a time.
package estimator

import (
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"reflect"
	"runtime/trace"
	"sync"
	"time"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// RunConfig configures an Estimator; its zero value trains in memory with
// seed 0 and logs nothing.
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
	// Logger receives progress, checkpoint and export messages; nil means
	// none. The Estimator logs nowhere else.
	Logger *slog.Logger
	// ProgressBar, when not nil, gets a progress bar of training steps in
	// place of the log lines every LogEvery steps (for an interactive
	// terminal: the examples pass os.Stderr when it is one).
	ProgressBar io.Writer
	// Params are handed to every model function call.
	Params model.Params
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
	mu   sync.Mutex
	cfg  RunConfig
	log  *slog.Logger
	eng  *replicate.Engine
	ckpt string // the checkpoint the store last saved or restored
}

// New returns an Estimator for m. An invalid model (a replication with
// loss reduction NONE, a GPU device in a build without a GPU backend) is an
// error here.
func New(m *replicate.Model, cfg RunConfig) (*Estimator, error) {
	if m == nil {
		return nil, fmt.Errorf("new estimator: nil model")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	eng, err := replicate.NewEngine(m, replicate.EngineConfig{Seed: cfg.Seed, Params: cfg.Params, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("new estimator: %w", err)
	}
	if cfg.LogEvery == 0 {
		cfg.LogEvery = 100
	}
	if cfg.ModelDir != "" && cfg.SaveCheckpointsSteps == 0 && cfg.SaveCheckpointsEvery == 0 {
		cfg.SaveCheckpointsEvery = 10 * time.Minute
	}
	e := &Estimator{cfg: cfg, log: log, eng: eng}
	if cfg.WarmStart != nil {
		if cfg.WarmStart.From == "" {
			return nil, fmt.Errorf("new estimator: warm start without a checkpoint to start from")
		}
		eng.OnBuild(e.warmStart)
	}
	return e, nil
}

// warmStart applies the warm start once, after the first build, unless the
// store holds the run's own checkpoint (restoring loaded it).
func (e *Estimator) warmStart() error {
	if e.ckpt != "" {
		e.eng.OnBuild(nil) // restored the run's own checkpoint
		return nil
	}
	ws := e.cfg.WarmStart
	if err := checkpoint.WarmStart(e.store(), ws.From, ws.Pattern, ws.Rename); err != nil {
		return fmt.Errorf("warm start from %s: %w", ws.From, err)
	}
	e.eng.OnBuild(nil)
	e.log.Info("warm started", "from", ws.From, "pattern", ws.Pattern)
	return nil
}

func (e *Estimator) store() *towers.Store { return e.eng.Store() }

// Store returns the variable store: master values by name, weights by name
// and as one flat vector.
func (e *Estimator) Store() *towers.Store { return e.store() }

// GlobalStep returns the number of training steps taken.
func (e *Estimator) GlobalStep() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.eng.Step()
}

// VariableNames returns every variable name in creation order, optimizer
// slots and the global step included.
func (e *Estimator) VariableNames() []string { return e.store().Names() }

// VariableValue returns a copy of the named variable's value.
func (e *Estimator) VariableValue(name string) (*tensor.Dense, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.store().Value(name)
}

// Close releases the graphs and VMs the Estimator built.
func (e *Estimator) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.eng.Close()
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
// on every hook however the run ends. A run reads as begin (restore, build
// the towers, begin the hooks), steps, end (the hooks' End).
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r, err := e.beginTrain(ctx, input, o)
	if r == nil || err != nil {
		return err
	}
	defer func() { err = r.end(ctx, err) }()
	for batch, err, ok := r.first, r.firstErr, r.haveFirst; ok; batch, err, ok = r.nextBatch(ctx) {
		if err != nil {
			return fmt.Errorf("train: input at step %d: %w", e.eng.Step(), err)
		}
		stop, err := r.step(ctx, batch)
		if err != nil {
			return err
		}
		if stop {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("train: stopped at step %d: %w", e.eng.Step(), err)
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
	info     RunInfo
	limit    int64 // the step to stop at, -1: none
	t0       time.Time

	next      func() (Batch, error, bool)
	stopInput func()
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
	start := e.eng.Step()
	limit := int64(-1)
	if o.steps > 0 {
		limit = start + o.steps
	}
	if o.maxSteps > 0 && (limit < 0 || o.maxSteps < limit) {
		limit = o.maxSteps
	}
	if limit >= 0 && start >= limit {
		return nil, nil
	}
	r := &trainRun{e: e, limit: limit, hooks: append(e.defaultHooks(), o.hooks...)}
	if e.cfg.ModelDir != "" {
		r.hooks = append(r.hooks, &CheckpointSaver{
			Dir: e.cfg.ModelDir, EverySteps: e.cfg.SaveCheckpointsSteps, Every: e.cfg.SaveCheckpointsEvery,
			Keep: e.cfg.KeepCheckpointMax, saved: func(path string, _ int64) { e.ckpt = path },
		})
	}
	r.info = RunInfo{Store: e.store(), ModelDir: e.cfg.ModelDir, Logger: e.log, StartStep: start, LastStep: limit}
	var batches iter.Seq2[Batch, error]
	batches, r.started = prefetch(ctx, input(ctx), true)
	r.next, r.stopInput = iter.Pull2(batches)
	r.first, r.firstErr, r.haveFirst = r.next()
	if r.haveFirst && r.firstErr == nil {
		if err := e.eng.Build(model.Train, r.first); err != nil {
			r.stopInput()
			return nil, fmt.Errorf("train: %w", err)
		}
	}
	for _, h := range r.hooks {
		if err := h.Begin(ctx, r.info); err != nil {
			return nil, r.end(ctx, fmt.Errorf("train: begin hook: %w", err))
		}
		r.begun++
		if c, ok := h.(LossChecker); ok {
			r.checkers = append(r.checkers, c)
		}
	}
	r.requests = make([][]string, len(r.hooks))
	r.t0 = time.Now()
	return r, nil
}

// nextBatch waits for the next batch of the input.
func (r *trainRun) nextBatch(ctx context.Context) (Batch, error, bool) {
	defer trace.StartRegion(ctx, "wait for input").End()
	return r.next()
}

// checkLoss asks every LossChecker hook about a step's loss before the
// update.
func (r *trainRun) checkLoss(loss float64) error {
	for _, c := range r.checkers {
		if err := c.CheckLoss(r.e.eng.Step(), loss); err != nil {
			return err
		}
	}
	return nil
}

// step runs one training step with its hooks: BeforeStep, the engine's
// step, the fetches, AfterStep; then the batch is released. It reports
// whether the run should stop.
func (r *trainRun) step(ctx context.Context, batch Batch) (stop bool, err error) {
	e := r.e
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("train: stopped at step %d: %w", e.eng.Step(), err)
	}
	var fetch []string
	for i, h := range r.hooks {
		req, err := h.BeforeStep(ctx, e.eng.Step())
		if err != nil {
			return false, fmt.Errorf("train: before step %d: %w", e.eng.Step(), err)
		}
		r.requests[i] = req.Fetch
		fetch = append(fetch, req.Fetch...)
	}
	rows, _ := batch.Rows()
	loss, err := e.eng.TrainStep(ctx, batch, replicate.StepHooks{CheckLoss: r.checkLoss, Started: r.started})
	if err != nil {
		return false, fmt.Errorf("train: %w", err)
	}
	res := StepResult{Step: e.eng.Step(), Loss: loss, Examples: rows}
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
		s, err := h.AfterStep(ctx, res)
		if err != nil {
			return false, fmt.Errorf("train: after step %d: %w", res.Step, err)
		}
		stop = stop || s
	}
	if batch.Release != nil {
		batch.Release()
	}
	return stop, nil
}

// end stops reading the input and runs End on every hook that began,
// however the run ended; the first End error becomes the run's error when
// it had none.
func (r *trainRun) end(ctx context.Context, err error) error {
	r.stopInput()
	for _, h := range r.hooks[:r.begun] {
		if herr := h.End(ctx, r.info, err); herr != nil && err == nil {
			err = fmt.Errorf("train: end hook: %w", herr)
		}
	}
	return err
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

// BatchOutput is one predict batch's results: predictions by name and
// export outputs by signature key, then output name, each with the batch
// along dimension 0.
type BatchOutput = replicate.Outputs

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
			out, err := e.predictStep(ctx, batch)
			if err != nil {
				yield(BatchOutput{}, fmt.Errorf("predict: batch %d: %w", n, err))
				return
			}
			n++
			if !yield(out, nil) {
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
func (e *Estimator) predictStep(ctx context.Context, b Batch) (out BatchOutput, err error) {
	err = e.locked(func() error {
		out, err = e.eng.PredictStep(ctx, b)
		return err
	})
	return out, err
}
