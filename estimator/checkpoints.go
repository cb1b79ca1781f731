package estimator

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/towers"
)

// restoreLatest loads the model directory's latest checkpoint into the
// store unless the store already holds it (the Estimator saved or restored
// it last). A model directory without checkpoints is a fresh run; one whose
// checkpoints are all damaged (checkpoint.ErrDamaged), or holds a file that
// cannot be read, is an error naming them, and the run touches nothing in
// it.
func (e *Estimator) restoreLatest() error {
	if e.cfg.ModelDir == "" {
		return nil
	}
	if _, err := os.Stat(e.cfg.ModelDir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// Read finds the newest whole checkpoint and verifies it once.
	r, err := checkpoint.Read(e.cfg.ModelDir)
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	path := r.Path()
	e.logSkipped(r)
	if path == e.ckpt {
		return nil
	}
	if err := r.Restore(e.store()); err != nil {
		return fmt.Errorf("restore %s: %w", path, err)
	}
	e.ckpt = path
	e.log.Info("restored checkpoint", "path", path, "step", r.Step())
	return nil
}

// ErrNotTrained is wrapped by the errors of Evaluate, Predict and Export
// when the model directory has no checkpoint, like TensorFlow's "Could not
// find trained model in model_dir": the variables would be freshly
// initialised. (Without a model directory Evaluate and Predict use the
// variables as they are, and Export needs steps trained or a checkpoint
// RestoreCheckpoint loaded; with a warm start, Evaluate and Predict use
// its variables.)
var ErrNotTrained = errors.New("no trained model")

// restoreTrained restores the latest checkpoint for a call that needs a
// trained model. A model directory without a checkpoint is ErrNotTrained,
// unless the store holds one RestoreCheckpoint loaded, or warmOK and the
// run warm-starts.
func (e *Estimator) restoreTrained(warmOK bool) error {
	if err := e.restoreLatest(); err != nil {
		return err
	}
	if e.cfg.ModelDir == "" || e.ckpt != "" || (warmOK && e.cfg.WarmStart != nil) {
		return nil
	}
	return fmt.Errorf("%w: model directory %s has no checkpoint: train first", ErrNotTrained, e.cfg.ModelDir)
}

// logSkipped warns, on the caller's logger, of what reading a model
// directory passed over on the way to r: damaged checkpoints, a lost
// pointer file.
func (e *Estimator) logSkipped(r *checkpoint.Reader) {
	for _, note := range r.Skipped() {
		e.log.Warn("checkpoint: "+note, "checkpoint", r.Path())
	}
}

// CheckpointSaver saves the store to a model directory every EverySteps
// steps and/or every Every, keeping the last Keep checkpoints (0 keeps all).
// It also saves at the start of a run when the directory has no checkpoint,
// and at the end of a run that ends cleanly or by cancellation — not one
// that ends in an error, so a NaN loss leaves the last good checkpoint the
// latest.
type CheckpointSaver struct {
	BaseHook
	Dir        string
	EverySteps int64
	Every      time.Duration
	Keep       int

	// saved, when set, is told every checkpoint written.
	saved    func(path string, step int64)
	store    *towers.Store
	log      *slog.Logger
	last     int64
	lastTime time.Time
}

func (h *CheckpointSaver) step() int64 {
	v, err := h.store.Lookup(model.GlobalStepName)
	if err != nil {
		return 0
	}
	return v.Data().([]int64)[0]
}

func (h *CheckpointSaver) save(step int64) error {
	path, err := checkpoint.Save(h.Dir, h.store, step, h.Keep)
	if err != nil {
		return fmt.Errorf("save checkpoint at step %d: %w", step, err)
	}
	h.last, h.lastTime = step, time.Now()
	if h.log != nil {
		h.log.Info("saved checkpoint", "path", path, "step", step)
	}
	if h.saved != nil {
		h.saved(path, step)
	}
	return nil
}

// Begin saves an initial checkpoint into a model directory without one. A
// directory whose checkpoints are all damaged, or that cannot be read, is
// an error: saving into it would let the cleanup of old checkpoints delete
// them.
func (h *CheckpointSaver) Begin(_ context.Context, info RunInfo) error {
	h.store, h.log, h.last, h.lastTime = info.Store, info.Logger, info.StartStep, time.Now()
	_, err := checkpoint.Latest(h.Dir)
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		return h.save(info.StartStep)
	}
	return err
}

// AfterStep saves when a step or time interval has passed.
func (h *CheckpointSaver) AfterStep(_ context.Context, r StepResult) (bool, error) {
	due := h.EverySteps > 0 && r.Step-h.last >= h.EverySteps
	due = due || h.Every > 0 && time.Since(h.lastTime) >= h.Every
	if due {
		return false, h.save(r.Step)
	}
	return false, nil
}

// End saves the final state of a run that ended cleanly or was cancelled.
func (h *CheckpointSaver) End(_ context.Context, _ RunInfo, cause error) error {
	if cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
		return nil
	}
	if s := h.step(); s != h.last {
		return h.save(s)
	}
	return nil
}

// RestoreCheckpoint loads a checkpoint — a checkpoint directory, or a model
// directory meaning its latest — into the store. Variables the store does
// not hold yet are created; existing ones must match in shape and dtype.
// Evaluate and Predict then use it although the model directory has no
// checkpoint (a checkpoint of the model directory's own is restored over
// it).
func (e *Estimator) RestoreCheckpoint(path string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.checkOpen("restore checkpoint"); err != nil {
		return err
	}
	r, err := checkpoint.Read(path)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := r.Restore(e.store()); err != nil {
		return fmt.Errorf("restore %s: %w", r.Path(), err)
	}
	e.ckpt = r.Path()
	return nil
}
