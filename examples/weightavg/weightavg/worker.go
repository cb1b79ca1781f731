package weightavg

import (
	"context"
	"fmt"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/towers"
)

// Worker is one worker, a Ray actor: an Estimator with its own towers and
// optimizer state that trains on its part of the data and joins the other
// workers, over its Comm, to average weights.
type Worker struct {
	comm collective.Comm
	est  *estimator.Estimator
	task Task
	cfg  Config
	// header is the status all-reduce's buffer: per worker a failed flag,
	// the round's mean loss and the length of its vector.
	header []float64
}

// PeerError is a worker's error when another worker failed: the run
// cannot go on without it. That worker's own error says why it failed.
type PeerError struct {
	// Worker is the worker that failed (the lowest, when several did), and
	// Round the round in which the others learned it.
	Worker, Round int
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("round %d: worker %d failed, so every worker stops (worker %d's own error says why)", e.Round, e.Worker, e.Worker)
}

// newWorker makes the worker of rank comm.Rank(). A worker whose
// Estimator cannot be made is returned with the error, without one: it
// can still tell the others.
func newWorker(task Task, cfg Config, comm collective.Comm) (*Worker, error) {
	w := &Worker{comm: comm, task: task, cfg: cfg, header: make([]float64, 3*comm.Size())}
	m, err := task.NewModel()
	if err != nil {
		return w, fmt.Errorf("model: %w", err)
	}
	if w.est, err = estimator.New(m, estimator.RunConfig{Seed: cfg.Seed, LogEvery: -1, Logger: cfg.Logger}); err != nil {
		return w, err
	}
	return w, nil
}

// close releases the worker's Estimator.
func (w *Worker) close() {
	if w.est != nil {
		w.est.Close()
	}
}

// Rank returns the worker's index among the workers, 0 for the driver.
func (w *Worker) Rank() int { return w.comm.Rank() }

// Estimator returns the worker's Estimator.
func (w *Worker) Estimator() *estimator.Estimator { return w.est }

// train takes the worker's local steps of a round: ComputeSteps training
// steps on its input for the round. It returns their mean loss.
func (w *Worker) train(ctx context.Context, round int) (float64, error) {
	in, err := w.task.Input(roundSeed(w.cfg.Seed, round), w.comm.Rank(), w.comm.Size())
	if err != nil {
		return 0, fmt.Errorf("round %d: input: %w", round, err)
	}
	var sum float64
	var steps int64
	err = w.est.Train(ctx, in, estimator.Steps(w.cfg.ComputeSteps), estimator.OnStep(func(_ int64, loss float64) {
		sum += loss
		steps++
	}))
	if err != nil {
		return 0, fmt.Errorf("round %d: %w", round, err)
	}
	if steps < w.cfg.ComputeSteps {
		return 0, fmt.Errorf("round %d: the input ended after %d of %d steps", round, steps, w.cfg.ComputeSteps)
	}
	return sum / float64(steps), nil
}

// modelState returns the model's state that averaging treats as weights:
// the float variables that the model function made but does not train,
// such as batch norm's moving statistics. The optimizer's slots and the
// global step stay each worker's own.
func modelState(store *towers.Store) []*towers.Variable {
	var out []*towers.Variable
	for _, v := range store.Variables() {
		if v.FromModel() && !v.Trainable() && numeric.IsFloat(v.Dtype()) {
			out = append(out, v)
		}
	}
	return out
}

// Weights returns the worker's model as one vector, Ray's get_weights: its
// weights as towers.Store.Flat lays them out, then its model state (see
// SetWeights) in creation order. It is empty before the first round.
func (w *Worker) Weights() ([]float64, error) {
	store := w.est.Store()
	vec, err := store.Flat()
	if err != nil {
		return nil, err
	}
	for _, v := range modelState(store) {
		vals, err := numeric.SliceFloat64s(v.Data())
		if err != nil {
			return nil, fmt.Errorf("model state %q: %w", v.Name(), err)
		}
		vec = append(vec, vals...)
	}
	return vec, nil
}

// SetWeights sets the worker's model from a vector laid out as Weights
// lays it out, Ray's set_weights: the weights, then the float variables
// the model made but does not train (batch norm's moving statistics). Its
// length must be that of Weights'.
func (w *Worker) SetWeights(vec []float64) error {
	store := w.est.Store()
	n := store.FlatSize()
	state := modelState(store)
	size := n
	for _, v := range state {
		size += v.Size()
	}
	if len(vec) != size {
		return fmt.Errorf("set weights: vector of %d values, the model has %d", len(vec), size)
	}
	if err := store.SetFlat(vec[:n]); err != nil {
		return err
	}
	for _, v := range state {
		data := numeric.NewSlice(v.Dtype(), v.Size())
		if err := numeric.SetFloat64s(data, vec[n:n+v.Size()]); err != nil {
			return fmt.Errorf("set model state %q: %w", v.Name(), err)
		}
		if err := store.Set(v.Name(), numeric.Over(v.Shape(), data)); err != nil {
			return fmt.Errorf("set model state: %w", err)
		}
		n += v.Size()
	}
	return nil
}

// average is the round's collective part. First every worker tells the
// others its status (failed or not), its mean loss and its vector's
// length; then, if none failed and the lengths agree, vec becomes the mean
// of every worker's vec. It returns the mean over the workers of their
// losses, or, when a worker failed, a PeerError naming it.
func (w *Worker) average(ctx context.Context, round int, loss float64, vec []float64, failed bool) (float64, error) {
	n, r := w.comm.Size(), w.comm.Rank()
	h := w.header
	clear(h)
	if failed {
		h[r] = 1
	}
	h[n+r], h[2*n+r] = loss, float64(len(vec))
	if err := w.comm.AllReduceFloat64(ctx, h); err != nil {
		return 0, fmt.Errorf("round %d: status of the workers: %w", round, err)
	}
	for q := range n {
		if h[q] != 0 {
			return 0, &PeerError{Worker: q, Round: round}
		}
	}
	for q := range n {
		if h[2*n+q] != h[2*n] {
			return 0, fmt.Errorf("round %d: worker %d's model has %d values, worker 0's %d: every worker must train the same model", round, q, int(h[2*n+q]), int(h[2*n]))
		}
	}
	if err := collective.Average(ctx, w.comm, vec); err != nil {
		return 0, fmt.Errorf("round %d: %w", round, err)
	}
	var sum float64
	for _, l := range h[n : 2*n] {
		sum += l
	}
	return sum / float64(n), nil
}

// roundSeed is the seed of the workers' inputs in a round: every round
// shuffles the data anew, and every worker of a round alike.
func roundSeed(seed uint64, round int) uint64 {
	z := seed ^ uint64(round)*0x9e3779b97f4a7c15
	// SplitMix64's finalizer: nearby seeds give unrelated shuffles.
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
