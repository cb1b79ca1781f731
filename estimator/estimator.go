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
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/estimator/tfevents"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// RunConfig configures an Estimator; its zero value trains in memory with
// seed 0 and logs nothing.
type RunConfig struct {
	// ModelDir is the run's home: checkpoints, history files and
	// TensorBoard event files. Train, Evaluate, Predict and Export first
	// restore its latest checkpoint, which must hold the variables the
	// model makes (see RestoreCheckpoint). Empty keeps everything in
	// memory.
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
	// KeepCheckpointMax keeps the newest this many checkpoints, deleting
	// older ones as new ones are saved: 5 when 0 (TensorFlow's
	// keep_checkpoint_max), every checkpoint when negative.
	KeepCheckpointMax int
	// SaveSummarySteps writes TensorBoard summaries of training (LossTag,
	// StepsPerSecTag, ExamplesPerSecTag) into ModelDir at a run's first
	// step and every this many global steps, and every evaluation's
	// results into ModelDir/eval (see EvalDir), as tf.estimator did:
	// `tensorboard --logdir <ModelDir>` shows both. Default 100
	// (tf.estimator's save_summary_steps); negative writes no event files.
	// Nothing is written without ModelDir. A summary that cannot be
	// written is an error of the run or evaluation.
	SaveSummarySteps int64
	// LogEvery logs the step, loss and speed every this many training steps
	// (default 100; negative disables all of a run's progress lines), and
	// writes the loss to the model directory's train history. A run also
	// logs after its first step and, with LogInterval, by time.
	LogEvery int
	// LogInterval is the longest a training run goes without a progress
	// line: a step that ends this long after the last line logs one,
	// whatever LogEvery says, so that a slow model is never silent for
	// minutes. Default DefaultLogInterval (30 s); negative logs by steps
	// alone.
	LogInterval time.Duration
	// Logger receives progress, checkpoint and export messages; nil means
	// none. The Estimator logs nowhere else.
	Logger *slog.Logger
	// Progress, when not nil, gets a progress bar of training steps (a
	// ProgressBar hook) in place of the log lines every LogEvery steps: for
	// an interactive terminal (the examples pass os.Stderr when it is
	// one). A negative LogEvery, which turns progress off, cannot have it.
	Progress io.Writer
	// Params are handed to every model function call.
	Params model.Params
	// WarmStart initialises a run whose model directory has no checkpoint
	// from another run's checkpoint, once the model has created its
	// variables.
	WarmStart *WarmStart
}

// DefaultKeepCheckpointMax is how many checkpoints a model directory keeps
// when RunConfig.KeepCheckpointMax is 0, as in TensorFlow.
const DefaultKeepCheckpointMax = 5

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
	// restored is the checkpoint the store last restored, which builds
	// check their variables against while it is ckpt; restoredLogged
	// says that one has, restoredWarned that a Train build has warned of
	// its unused optimizer state.
	restored                       *checkpoint.Reader
	restoredLogged, restoredWarned bool
	warmed                         bool // the warm start is done, or not needed
	convNoted                      bool // SlowConvolutionsNote is logged
	// events are the open TensorBoard event files by directory.
	events map[string]*tfevents.Writer
	// bar is the progress bar on RunConfig.Progress, if any; log goes
	// around it.
	bar *ProgressBar
	// procs and rank place the Estimator among the processes it trains
	// with (replicate.Config.Processes): 1 and 0 alone.
	procs, rank int
	// closed is set by Close: the methods that would build towers fail.
	closed bool
}

// New returns an Estimator for m. An invalid model (a replication with
// loss reduction NONE, a GPU device: towerflow has no GPU backend) is an
// error here.
func New(m *replicate.Model, cfg RunConfig) (*Estimator, error) {
	if err := cfg.check(m); err != nil {
		return nil, fmt.Errorf("new estimator: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.LogEvery == 0 {
		cfg.LogEvery = 100
	}
	if cfg.LogInterval == 0 {
		cfg.LogInterval = DefaultLogInterval
	}
	var bar *ProgressBar
	if cfg.Progress != nil {
		bar = &ProgressBar{Out: cfg.Progress, Every: int64(cfg.LogEvery)}
		log = barLogger(log, bar)
	}
	eng, err := replicate.NewEngine(m, replicate.EngineConfig{Seed: cfg.Seed, Params: cfg.Params, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("new estimator: %w", err)
	}
	if cfg.SaveSummarySteps == 0 {
		cfg.SaveSummarySteps = 100
	}
	if cfg.ModelDir != "" && cfg.SaveCheckpointsSteps == 0 && cfg.SaveCheckpointsEvery == 0 {
		cfg.SaveCheckpointsEvery = 10 * time.Minute
	}
	if cfg.KeepCheckpointMax == 0 {
		cfg.KeepCheckpointMax = DefaultKeepCheckpointMax
	}
	e := &Estimator{cfg: cfg, log: log, eng: eng, bar: bar}
	if e.procs, e.rank = eng.Processes(); e.rank != 0 {
		// Rank 0 alone reads the model directory and the warm start and
		// writes; the others get its variables by broadcast.
		e.cfg.ModelDir, e.cfg.WarmStart = "", nil
	}
	eng.OnBuild(e.afterBuild)
	return e, nil
}

// check reports what is wrong with a model and run configuration before
// anything is built.
func (cfg *RunConfig) check(m *replicate.Model) error {
	switch {
	case m == nil:
		return fmt.Errorf("nil model")
	case cfg.LogEvery < 0 && cfg.Progress != nil:
		return fmt.Errorf("RunConfig.Progress is set but LogEvery is negative, which turns progress reporting off; set one of the two")
	case cfg.WarmStart != nil && cfg.WarmStart.From == "":
		return fmt.Errorf("warm start without a checkpoint to start from (RunConfig.WarmStart.From is empty)")
	}
	return nil
}

// afterBuild runs after every new build of towers: it checks the variables
// the model made against a restored checkpoint, or warm-starts them, and
// notes convolutions a build without oneDNN trains slowly.
func (e *Estimator) afterBuild() error {
	if err := e.checkRestored(); err != nil {
		return err
	}
	e.noteSlowConvolutions()
	if e.cfg.WarmStart == nil || e.warmed {
		return nil
	}
	return e.warmStart()
}

// warmStart applies the warm start once, after the first build, unless the
// store holds the run's own checkpoint (restoring loaded it).
func (e *Estimator) warmStart() error {
	if e.ckpt != "" {
		e.warmed = true // restored the run's own checkpoint
		return nil
	}
	ws := e.cfg.WarmStart
	r, err := checkpoint.Read(ws.From)
	if err != nil {
		return fmt.Errorf("warm start: %w", err)
	}
	e.logSkipped(r)
	if err := r.WarmStart(e.store(), ws.Pattern, ws.Rename); err != nil {
		return fmt.Errorf("warm start from %s: %w", ws.From, err)
	}
	e.warmed = true
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

// ErrClosed is wrapped by the errors of the Estimator's methods that run
// the model (Train, Evaluate, Predict, Export, ...) or load a checkpoint
// after Close.
var ErrClosed = errors.New("estimator is closed")

// ErrNoBatches is wrapped by the error of an input that yields no batch
// at all: Evaluate returns one, and Train from global step 0; Predict
// yields nothing for it, as for any empty input (and logs the error it
// was given). An input function may yield an error wrapping it in the
// place of its first batch to say why (dataset.Pipeline names its files):
// Train and Evaluate return that one at any step.
var ErrNoBatches = errors.New("input yielded no batches")

// Close releases the graphs and VMs the Estimator built and closes its
// TensorBoard event files. The Estimator runs nothing afterwards: Train,
// TrainAndEvaluate, Evaluate, Predict, PredictBatches, Export,
// RestoreCheckpoint, ComputeGradients and ApplyGradients return errors
// wrapping ErrClosed. Its variables stay readable (Store, VariableValue,
// GlobalStep). Closing again does nothing.
func (e *Estimator) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	return errors.Join(e.eng.Close(), e.closeEvents())
}

// checkOpen is ErrClosed, wrapped with what, after Close; the Estimator
// is locked.
func (e *Estimator) checkOpen(what string) error {
	if e.closed {
		return fmt.Errorf("%s: %w", what, ErrClosed)
	}
	return nil
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
		if e.closed {
			return ErrClosed
		}
		out, err = e.eng.PredictStep(ctx, b)
		return err
	})
	return out, err
}
