package weightavg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/estimator/checkpoint"
)

// Config configures Run.
type Config struct {
	// ComputeSteps is the number of local steps each worker takes per
	// round, between two averages (Ray's compute_steps); 0 means 10.
	ComputeSteps int64
	// Rounds is the number of rounds; each worker trains Rounds ×
	// ComputeSteps steps. Required.
	Rounds int
	// EvalEvery makes the driver evaluate (and print a progress line)
	// after each round that reaches or passes a multiple of EvalEvery
	// steps, and after the last; 0 after every round.
	EvalEvery int64
	// Seed seeds every worker's initial variables (so all start from the
	// same weights) and the rounds' shuffles.
	Seed uint64
	// ModelDir, when set, is where the driver writes a checkpoint of the
	// averaged model after the last round. It must hold no checkpoint:
	// the example does not resume.
	ModelDir string
	// Out gets the driver's progress lines; nil prints none.
	Out io.Writer
	// Logger gets the workers' Estimators' messages; nil logs none.
	Logger *slog.Logger
	// AfterRound, when set, is called by every worker after each round's
	// average, on the worker's goroutine; an error fails the worker. Tests
	// read the workers' weights there.
	AfterRound func(w *Worker, round int) error
}

// Round is the driver's report of an evaluated round.
type Round struct {
	Round int
	// Step is each worker's global step after the round.
	Step int64
	// Loss is the mean over the workers of each one's mean training loss
	// in the round.
	Loss float64
	// Accuracy and TestLoss are the averaged model's accuracy and mean
	// loss on the test set.
	Accuracy, TestLoss float64
	// Seconds is the time since the run started.
	Seconds float64
}

// Report is what the driver reports of a run.
type Report struct {
	Workers      int
	ComputeSteps int64
	// Rounds are the evaluated rounds, the last one last.
	Rounds []Round
	// TrainSeconds is the driver's time in its rounds' training and
	// averaging, without its evaluations.
	TrainSeconds float64
	// Checkpoint is the checkpoint written into Config.ModelDir, if any.
	Checkpoint string
}

// Last returns the last round.
func (r *Report) Last() Round {
	if len(r.Rounds) == 0 {
		return Round{}
	}
	return r.Rounds[len(r.Rounds)-1]
}

// StepsPerSec returns each worker's local steps per second of training
// and averaging.
func (r *Report) StepsPerSec() float64 {
	return float64(r.Last().Step) / r.TrainSeconds
}

// Summary is the run in one line: workers, local steps per round, rounds,
// steps, steps per second and time per step (training and averaging, each
// worker's steps), the final test accuracy and loss, and the whole time.
func (r *Report) Summary() string {
	last := r.Last()
	return fmt.Sprintf("workers=%d compute_steps=%d rounds=%d steps=%d steps_per_sec=%.1f ms_per_step=%.2f accuracy=%.4f test_loss=%.4f seconds=%.1f",
		r.Workers, r.ComputeSteps, last.Round, last.Step, r.StepsPerSec(), 1000/r.StepsPerSec(), last.Accuracy, last.TestLoss, last.Seconds)
}

// check checks cfg, task and the ranks a Run runs, and fills defaults.
func (cfg *Config) check(task Task, comms []collective.Comm) error {
	if cfg.ComputeSteps == 0 {
		cfg.ComputeSteps = 10
	}
	switch {
	case cfg.ComputeSteps < 0 || cfg.Rounds < 1 || cfg.EvalEvery < 0:
		return fmt.Errorf("%d compute steps, %d rounds, evaluation every %d steps: want at least 1 round, and no negative numbers", cfg.ComputeSteps, cfg.Rounds, cfg.EvalEvery)
	case task.NewModel == nil || task.Input == nil || task.Test == nil:
		return fmt.Errorf("task %q lacks a model, a training input or a test input", task.Name)
	case len(comms) == 0:
		return fmt.Errorf("no workers to run")
	}
	seen := map[int]bool{}
	for _, c := range comms {
		if c.Size() != comms[0].Size() || c.Rank() < 0 || c.Rank() >= c.Size() || seen[c.Rank()] {
			return fmt.Errorf("the workers' ranks must be distinct ranks of one group: rank %d of %d after rank %d of %d", c.Rank(), c.Size(), comms[0].Rank(), comms[0].Size())
		}
		seen[c.Rank()] = true
	}
	return nil
}

// Run trains task with one worker per rank of comms, each on its own
// goroutine, for cfg.Rounds rounds: comms are every rank of a
// collective.Local group (the workers of one process) or the one rank of
// a process under mpirun (collective.Join). The worker of rank 0 is also
// the driver: Run returns its report when it runs here, else nil.
//
// A worker that fails — building its model, its input, a step, the
// driver's evaluation — tells the others at the next round's start, and
// every worker stops: Run returns the failed worker's own error, which
// names it (other processes get a PeerError naming it). The context's
// cancellation stops every worker.
func Run(ctx context.Context, task Task, cfg Config, comms []collective.Comm) (*Report, error) {
	if err := cfg.check(task, comms); err != nil {
		return nil, fmt.Errorf("weight averaging: %w", err)
	}
	return runWorkers(comms, func(c collective.Comm) (*Report, error) { return runWorker(ctx, task, cfg, c) })
}

// runWorkers runs work for every rank of comms, each on its own
// goroutine, and returns the report the driver's returned, if it ran
// here, or the first worker's own error (a worker's own error wins over
// the others' news of it).
func runWorkers[R any](comms []collective.Comm, work func(collective.Comm) (*R, error)) (*R, error) {
	var (
		mu     sync.Mutex
		first  error
		report *R
		wg     sync.WaitGroup
	)
	for _, c := range comms {
		wg.Go(func() {
			rep, err := work(c)
			mu.Lock()
			defer mu.Unlock()
			if rep != nil {
				report = rep
			}
			if err != nil && (first == nil || isPeer(first) && !isPeer(err)) {
				first = err
			}
		})
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return report, nil
}

// isPeer reports whether err is a worker's news of another's failure.
func isPeer(err error) bool {
	_, ok := errors.AsType[*PeerError](err)
	return ok
}

// runWorker runs the worker of comm's rank through every round and, for
// rank 0, the driver. An error of the worker's own (building its model,
// its input, the driver's evaluation) is kept until the next round's
// status all-reduce, which tells every worker.
func runWorker(ctx context.Context, task Task, cfg Config, comm collective.Comm) (*Report, error) {
	w, pending := newWorker(task, cfg, comm)
	defer w.close()
	var d *driver
	if comm.Rank() == 0 && pending == nil {
		d, pending = newDriver(task, cfg, w)
	}
	for round := 1; round <= cfg.Rounds; round++ {
		t0 := time.Now()
		var loss float64
		var vec []float64
		if pending == nil {
			loss, pending = w.train(ctx, round)
		}
		if pending == nil {
			vec, pending = w.Weights()
		}
		mean, err := w.average(ctx, round, loss, vec, pending != nil)
		if pending != nil {
			return nil, fmt.Errorf("worker %d: %w", comm.Rank(), pending)
		}
		if err != nil {
			return nil, fmt.Errorf("worker %d: %w", comm.Rank(), err)
		}
		if err := w.SetWeights(vec); err != nil {
			pending = fmt.Errorf("round %d: %w", round, err)
			continue
		}
		if cfg.AfterRound != nil {
			if err := cfg.AfterRound(w, round); err != nil {
				pending = fmt.Errorf("round %d: %w", round, err)
				continue
			}
		}
		if d != nil {
			pending = d.afterRound(ctx, round, mean, time.Since(t0))
		}
	}
	if pending != nil {
		return nil, fmt.Errorf("worker %d: %w", comm.Rank(), pending)
	}
	if d != nil {
		return d.finish()
	}
	return nil, nil
}

// driver is rank 0's other role: it evaluates the averaged model, prints
// progress and writes the model directory.
type driver struct {
	w      *Worker
	task   Task
	cfg    Config
	out    io.Writer
	report Report
	start  time.Time
	// evaluated is the step of the last evaluation.
	evaluated int64
}

// newDriver makes rank 0's driver; a model directory that holds a
// checkpoint already is an error.
func newDriver(task Task, cfg Config, w *Worker) (*driver, error) {
	if cfg.ModelDir != "" {
		path, err := checkpoint.Latest(cfg.ModelDir)
		switch {
		case err == nil:
			return nil, fmt.Errorf("model directory %s already holds checkpoint %s; this example does not resume: give it a new directory", cfg.ModelDir, path)
		case !errors.Is(err, checkpoint.ErrNoCheckpoint):
			return nil, fmt.Errorf("model directory: %w", err)
		}
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	return &driver{w: w, task: task, cfg: cfg, out: out, start: time.Now(),
		report: Report{Workers: w.comm.Size(), ComputeSteps: cfg.ComputeSteps}}, nil
}

// afterRound counts the round's time and, when an evaluation is due,
// evaluates the averaged model on the test set and prints the round.
func (d *driver) afterRound(ctx context.Context, round int, loss float64, took time.Duration) error {
	d.report.TrainSeconds += took.Seconds()
	step := d.w.est.GlobalStep()
	every := d.cfg.EvalEvery
	if every > 0 && step/every == d.evaluated/every && round < d.cfg.Rounds {
		return nil
	}
	d.evaluated = step
	scores, err := d.w.est.Evaluate(ctx, d.task.Test)
	if err != nil {
		return fmt.Errorf("round %d: %w", round, err)
	}
	r := Round{Round: round, Step: step, Loss: loss, Accuracy: scores["accuracy"], TestLoss: scores["loss"], Seconds: time.Since(d.start).Seconds()}
	d.report.Rounds = append(d.report.Rounds, r)
	if _, err := fmt.Fprintf(d.out, "round=%d step=%d loss=%.4f accuracy=%.4f test_loss=%.4f seconds=%.1f\n", r.Round, r.Step, r.Loss, r.Accuracy, r.TestLoss, r.Seconds); err != nil {
		return fmt.Errorf("round %d: print progress: %w", round, err)
	}
	return nil
}

// finish writes the averaged model into the model directory, if any, and
// returns the report.
func (d *driver) finish() (*Report, error) {
	if d.cfg.ModelDir != "" {
		path, err := checkpoint.Save(d.cfg.ModelDir, d.w.est.Store(), d.w.est.GlobalStep(), estimator.DefaultKeepCheckpointMax)
		if err != nil {
			return nil, fmt.Errorf("worker 0: %w", err)
		}
		d.report.Checkpoint = path
	}
	return &d.report, nil
}
