package estimator

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// restoreLatest loads the model directory's latest checkpoint into the
// store unless the store already holds it (the Estimator saved or restored
// it last). A model directory without checkpoints is a fresh run; one whose
// checkpoints are all damaged (checkpoint.ErrDamaged), or holds a file that
// cannot be read, is an error naming them, and the run touches nothing in
// it. The next build of towers compares the variables the model makes with
// the checkpoint's (checkRestored).
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
	return e.restore(r)
}

// restore loads r into the store; the builds of towers from now on check
// the variables they make against it.
func (e *Estimator) restore(r *checkpoint.Reader) error {
	if err := r.Restore(e.store()); err != nil {
		return fmt.Errorf("%w%s", err, warmStartHint(err))
	}
	e.ckpt, e.restored, e.restoredLogged, e.restoredWarned = r.Path(), r, false, false
	return nil
}

// warmStartHint is what a mismatch error adds: where a partial restore is
// done on purpose.
func warmStartHint(err error) string {
	var mm *checkpoint.MismatchError
	if !errors.As(err, &mm) {
		return ""
	}
	return "; to start from part of a checkpoint on purpose, give a new model directory RunConfig.WarmStart"
}

// checkRestored runs after every new build of towers while the store holds
// the checkpoint it restored last (not one it saved since, which holds the
// store's variables): the variables the model makes in that mode must be
// the checkpoint's, with its shapes and dtypes, as TensorFlow's restore
// requires; a checkpoint variable that the model does not make is an error
// in Train mode when it is trainable (training would carry it unused into
// every later checkpoint) and is ignored in the other modes (which may make
// fewer variables: optimizer slots are training's). Non-trainable
// checkpoint variables that a Train build's model does not make are
// optimizer state, restored for its optimizers; those named after none of
// them — the slots of a replaced optimizer — are logged and left as they
// are (they are saved again, so that nothing a checkpoint held is lost);
// slots the optimizers make that the checkpoint lacks start fresh.
// A mismatch fails the build before the run writes anything.
func (e *Estimator) checkRestored() error {
	r := e.restored
	if r == nil || r.Path() != e.ckpt {
		return nil
	}
	mode, names, opts, ok := e.eng.Built()
	if !ok {
		return nil
	}
	if !slices.Contains(names, model.GlobalStepName) {
		names = append(names, model.GlobalStepName)
	}
	vars := make([]*towers.Variable, 0, len(names))
	made := map[string]bool{}
	for _, name := range names {
		v, err := e.store().Lookup(name)
		if err != nil {
			return fmt.Errorf("restore %s: %w", r.Path(), err)
		}
		vars = append(vars, v)
		made[name] = true
	}
	unused := func(en checkpoint.Entry) bool { return mode == model.Train && en.Trainable }
	if err := r.Compare(vars, unused); err != nil {
		return fmt.Errorf("restore: in %v mode, %w%s", mode, err, warmStartHint(err))
	}
	if mode == model.Train {
		var foreign []string
		for _, name := range r.Names() {
			if !made[name] && !optimizerState(name, names, opts) {
				foreign = append(foreign, name)
			}
		}
		if len(foreign) > 0 && !e.restoredWarned {
			e.restoredWarned = true
			e.log.Warn("checkpoint: variables that neither the model nor its optimizers use (the state of another optimizer?): kept as they are and saved again",
				"checkpoint", r.Path(), "optimizers", opts, "variables", foreign)
		}
	}
	if !e.restoredLogged {
		e.restoredLogged = true
		e.log.Info("restored checkpoint", "path", r.Path(), "step", r.Step())
	}
	return nil
}

// optimizerState reports whether name is the state of one of the
// optimizers opts, by the names optimizers give their slots:
// <variable>/<optimizer>/<slot> for a variable of the model, or
// <optimizer>/<name>.
func optimizerState(name string, vars, opts []string) bool {
	for _, o := range opts {
		if strings.HasPrefix(name, o+"/") {
			return true
		}
		for _, v := range vars {
			if strings.HasPrefix(name, v+"/"+o+"/") {
				return true
			}
		}
	}
	return false
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
// and at the end of a run the last completed step, however the run ended
// (cleanly, cancelled, on an input, model function or hook error) — except
// a run that diverged or broke off a step's update (see End), so that a NaN
// loss leaves the last good checkpoint the latest.
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

// End saves the state of the run's last completed step, unless the run
// ended on a loss a LossChecker rejected (NaNGuard's ErrNonFiniteLoss: the
// run diverged, and the last good checkpoint stays the latest) or in the
// middle of a step's update (replicate.ErrIncompleteUpdate). Any other
// error — the input's, the model function's, a hook's, cancellation —
// came before a step's update or after it, and leaves the variables as
// the last completed step left them.
func (h *CheckpointSaver) End(_ context.Context, _ RunInfo, cause error) error {
	var rejected *lossRejected
	if errors.As(cause, &rejected) || errors.Is(cause, ErrNonFiniteLoss) || errors.Is(cause, replicate.ErrIncompleteUpdate) {
		return nil
	}
	if s := h.step(); s != h.last {
		return h.save(s)
	}
	return nil
}

// RestoreCheckpoint loads a checkpoint — a checkpoint directory, or a model
// directory meaning its latest — into the store. Evaluate and Predict then
// use it although the model directory has no checkpoint (a checkpoint of
// the model directory's own is restored over it).
//
// A restore, this one or the model directory's, is strict, as TensorFlow's
// ("Key not found in checkpoint"): the variables the model makes must be
// the checkpoint's, with its shapes and dtypes. Each new build of towers
// compares them before the run writes anything (so Train, Evaluate,
// Predict and Export fail without a checkpoint, a history line or an
// export written), and the model's variables the store already holds are
// compared here, before anything is restored; a difference is a
// *checkpoint.MismatchError naming the checkpoint, the variables it lacks
// and those it has that the model does not make. A checkpoint variable
// the model does not make is an error in Train mode when it is trainable
// (training would save it again, unused, in every later checkpoint), and
// is not used by the other modes, which may make fewer variables. To take
// part of a checkpoint on purpose, warm-start a new model directory from
// it (RunConfig.WarmStart).
//
// Optimizer slots are the optimizer's state, not the model's: slots the
// model's optimizers make that the checkpoint lacks (another optimizer than
// the checkpoint's run had) start fresh, as in a new run; non-trainable
// checkpoint variables that neither the model makes nor its optimizers name
// (by their slot prefix, optimizers.Optimizer.Name) — the slots of an
// optimizer the model no longer uses — are logged as a warning when Train
// builds, left as they are and saved again, so that nothing a checkpoint
// held is lost.
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
	return e.restore(r)
}
