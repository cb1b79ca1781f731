package weightavg

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/runner"
	"github.com/towerflow/towerflow/sharding"
)

// The gradient mode is the Ray/TensorFlow best-practices page's program:
// every iteration each worker sets the driver's weights, computes the
// gradients of its part of the batch without applying them
// (Estimator.ComputeGradients, Ray's compute_gradients), the gradients are
// averaged over the workers (collective.Average over their Comm, as the
// weight mode averages weights), the driver applies the mean once with its
// optimizer (Estimator.ApplyGradients) and its new weights go out to every
// worker (a broadcast). The model is the linear one of examples/linear,
// y = 0.1·x + 0.3, on one fixed batch of 100 rows, SGD 0.5, 201
// iterations, the weights printed every 20.
//
// The parts of a batch may differ by a row: each worker scales its
// gradients and loss by its share of the rows times the number of workers,
// so the average is the batch-weighted mean and K workers holding 1/K of a
// batch each take one Train step on the whole batch (exactly the same
// numbers when the parts are equal, rounding aside).

// GradientConfig configures RunGradients; its zero value runs the Ray
// page's program.
type GradientConfig struct {
	// Iterations is the number of updates; 0 means 201.
	Iterations int
	// Batch is the rows of the batch, over all the workers; 0 means 100.
	Batch int
	// LR is the driver's SGD rate; 0 means 0.5.
	LR float64
	// PrintEvery prints the weights after every iteration that is a
	// multiple of it (from iteration 0) and after the last; 0 means 20.
	PrintEvery int
	// Towers is each worker's number of towers; 0 means 1.
	Towers int
	// Seed seeds the data and the initial weights.
	Seed uint64
	// Out gets the driver's lines; nil prints none.
	Out io.Writer
	// Logger gets the Estimators' messages; nil logs none.
	Logger *slog.Logger
	// AfterIteration, when set, is called by every worker after each
	// iteration's weights are set, on its goroutine; an error fails it.
	AfterIteration func(w *Worker, iteration int) error
}

// Iteration is one printed iteration: the batch's loss before its update
// and the weights after it.
type Iteration struct {
	Iteration  int
	Loss, W, B float64
}

// GradientReport is the driver's report of a gradient-mode run.
type GradientReport struct {
	Workers int
	// Printed are the printed iterations, the last one last.
	Printed []Iteration
}

func (cfg *GradientConfig) fill(comms []collective.Comm) error {
	cfg.Iterations = cmp.Or(cfg.Iterations, 201)
	cfg.Batch = cmp.Or(cfg.Batch, 100)
	cfg.LR = cmp.Or(cfg.LR, 0.5)
	cfg.PrintEvery = cmp.Or(cfg.PrintEvery, 20)
	cfg.Towers = cmp.Or(cfg.Towers, 1)
	switch {
	case cfg.Iterations < 0 || cfg.Batch < 0 || cfg.LR < 0 || cfg.PrintEvery < 0 || cfg.Towers < 0:
		return fmt.Errorf("%d iterations, batch %d, rate %g, printing every %d, %d towers: none may be negative", cfg.Iterations, cfg.Batch, cfg.LR, cfg.PrintEvery, cfg.Towers)
	case len(comms) == 0:
		return fmt.Errorf("no workers to run")
	case cfg.Batch < comms[0].Size():
		return fmt.Errorf("batch %d is smaller than the %d workers: each needs a row", cfg.Batch, comms[0].Size())
	}
	return nil
}

// LinearTask is the gradient mode's model: linreg's linear model on
// towers CPU towers, trained by SGD with rate lr.
func LinearTask(towers int, lr float64) (Task, error) {
	devices, err := runner.Devices(towers)
	if err != nil {
		return Task{}, err
	}
	rcfg := replicate.Config{Devices: devices, Optimizer: optimizers.SGD(lr)}
	return Task{Name: "linear", NewModel: func() (*replicate.Model, error) { return replicate.ModelFn(linreg.Model, rcfg), nil }}, nil
}

// RunGradients runs the gradient mode with one worker per rank of comms,
// each on its own goroutine: comms are every rank of a collective.Local
// group, or this process's rank under mpirun. The worker of rank 0 is
// also the driver: RunGradients returns its report when it runs here,
// else nil. A worker that fails tells the others at the next iteration's
// average, and every worker stops, as in Run.
func RunGradients(ctx context.Context, cfg GradientConfig, comms []collective.Comm) (*GradientReport, error) {
	if err := cfg.fill(comms); err != nil {
		return nil, fmt.Errorf("gradient averaging: %w", err)
	}
	task, err := LinearTask(cfg.Towers, cfg.LR)
	if err != nil {
		return nil, fmt.Errorf("gradient averaging: %w", err)
	}
	return runWorkers(comms, func(c collective.Comm) (*GradientReport, error) { return gradientWorker(ctx, task, cfg, c) })
}

// gradientWorker runs one worker of the gradient mode through every
// iteration and, for rank 0, the driver's part.
func gradientWorker(ctx context.Context, task Task, cfg GradientConfig, comm collective.Comm) (*GradientReport, error) {
	w, pending := newWorker(task, Config{Seed: cfg.Seed, Logger: cfg.Logger}, comm)
	defer w.close()
	var part estimator.Batch
	var share float64 // rows of the part × workers / rows of the batch
	if pending == nil {
		part, share, pending = batchPart(cfg, comm)
	}
	out := cfg.Out
	if out == nil || comm.Rank() != 0 {
		out = io.Discard
	}
	rep := &GradientReport{Workers: comm.Size()}
	if comm.Rank() == 0 {
		fmt.Fprintf(out, "gradient averaging: linear model y = %g·x + %g on %d workers, batch %d split over them, SGD %g, %d iterations\n", linreg.TrueW, linreg.TrueB, comm.Size(), cfg.Batch, cfg.LR, cfg.Iterations)
	}
	for it := range cfg.Iterations {
		var loss float64
		var grads []float64
		if pending == nil {
			loss, grads, pending = w.gradients(ctx, part, share)
		}
		mean, err := w.average(ctx, it, loss, grads, pending != nil)
		if pending != nil {
			return nil, fmt.Errorf("worker %d: iteration %d: %w", comm.Rank(), it, pending)
		}
		if err != nil {
			return nil, fmt.Errorf("worker %d: %w", comm.Rank(), err)
		}
		if comm.Rank() == 0 {
			if err := w.est.ApplyGradients(ctx, estimator.Gradients{Flat: grads}); err != nil {
				pending = err // the others learn it at the next average
			}
		}
		weights, err := w.broadcastWeights(ctx)
		if err != nil {
			return nil, fmt.Errorf("worker %d: iteration %d: %w", comm.Rank(), it, err)
		}
		if pending == nil && cfg.AfterIteration != nil {
			pending = cfg.AfterIteration(w, it)
		}
		if comm.Rank() == 0 && pending == nil && (it%cfg.PrintEvery == 0 || it == cfg.Iterations-1) {
			p := Iteration{Iteration: it, Loss: mean, W: weights[0], B: weights[1]}
			rep.Printed = append(rep.Printed, p)
			if _, err := fmt.Fprintf(out, "iteration=%d loss=%.6g w=%.6f b=%.6f\n", p.Iteration, p.Loss, p.W, p.B); err != nil {
				pending = err
			}
		}
	}
	if pending != nil {
		return nil, fmt.Errorf("worker %d: %w", comm.Rank(), pending)
	}
	if comm.Rank() != 0 {
		return nil, nil
	}
	return rep, nil
}

// batchPart is the worker's rows of the batch (the rows sharding gives its
// rank: parts differ by at most one row) and its share.
func batchPart(cfg GradientConfig, comm collective.Comm) (estimator.Batch, float64, error) {
	x, y := linreg.Data(cfg.Batch, cfg.Seed)
	xs, err := sharding.SplitMap(x, comm.Size())
	if err != nil {
		return estimator.Batch{}, 0, err
	}
	ys, err := sharding.SplitMap(y, comm.Size())
	if err != nil {
		return estimator.Batch{}, 0, err
	}
	part := estimator.Batch{Features: xs[comm.Rank()], Labels: ys[comm.Rank()]}
	rows, err := part.Rows()
	if err != nil {
		return estimator.Batch{}, 0, err
	}
	return part, float64(rows*comm.Size()) / float64(cfg.Batch), nil
}

// gradients computes the gradients of the worker's part, Ray's
// compute_gradients, as one flat vector in the weights' order, scaled by
// the worker's share (see the mode's comment), and the part's loss scaled
// alike.
func (w *Worker) gradients(ctx context.Context, part estimator.Batch, share float64) (float64, []float64, error) {
	g, err := w.est.ComputeGradients(ctx, part)
	if err != nil {
		return 0, nil, err
	}
	if share != 1 {
		for i := range g.Flat {
			g.Flat[i] *= share
		}
	}
	return g.Loss * share, g.Flat, nil
}

// broadcastWeights sends the driver's weights to every worker, which sets
// them, and returns them: Ray's get_weights on the driver, set_weights on
// the workers.
func (w *Worker) broadcastWeights(ctx context.Context) ([]float64, error) {
	store := w.est.Store()
	var data []byte
	if w.comm.Rank() == 0 {
		flat, err := store.Flat()
		if err != nil {
			return nil, err
		}
		for _, v := range flat {
			data = binary.LittleEndian.AppendUint64(data, math.Float64bits(v))
		}
	}
	data, err := collective.BroadcastBytes(ctx, w.comm, 0, data)
	if err != nil {
		return nil, fmt.Errorf("send the weights: %w", err)
	}
	flat := make([]float64, len(data)/8)
	for i := range flat {
		flat[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
	}
	if w.comm.Rank() != 0 {
		if err := store.SetFlat(flat); err != nil {
			return nil, err
		}
	}
	return flat, nil
}
