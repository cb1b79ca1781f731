package weightavg_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/cifar10/cifar"
	"github.com/towerflow/towerflow/examples/mnist/mnist"
	"github.com/towerflow/towerflow/examples/weightavg/weightavg"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// guard is how long a run may take before the test calls it hung: its
// context's deadline breaks the workers' collectives, so a hang fails the
// test with an error instead of blocking it.
const guard = 5 * time.Minute

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	t.Cleanup(cancel)
	return ctx
}

// mlpTask is a small MLP on a small synthetic MNIST-sized data set.
func mlpTask(t *testing.T, hidden, batch int, opt string) weightavg.Task {
	t.Helper()
	task, err := weightavg.MNIST(mnist.MLP{Hidden: hidden}, mnist.Synthetic(600, 1), mnist.Synthetic(200, 2), weightavg.TaskConfig{Batch: batch, Towers: 1, Optimizer: opt})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// resnetTask is ResNet-8 (batch norm: model state to average) on a few
// synthetic CIFAR-10-sized images.
func resnetTask(t *testing.T, batch int) weightavg.Task {
	t.Helper()
	task, err := weightavg.CIFAR(cifar.ResNet{Depth: 8}, cifar.Synthetic(16, 1), cifar.Synthetic(8, 2), weightavg.TaskConfig{Batch: batch, Towers: 1})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// modelValues returns every float variable the model made — its weights
// and its state, such as batch norm's moving statistics — by name.
func modelValues(t *testing.T, store *towers.Store) map[string][]float64 {
	t.Helper()
	out := map[string][]float64{}
	for _, v := range store.Variables() {
		if !v.FromModel() || !numeric.IsFloat(v.Dtype()) {
			continue
		}
		val, err := store.Value(v.Name())
		if err != nil {
			t.Fatal(err)
		}
		if out[v.Name()], err = numeric.SliceFloat64s(val.Data()); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// recorder is an AfterRound that keeps every worker's model values after
// each round.
type recorder struct {
	t      *testing.T
	mu     sync.Mutex
	values map[[2]int]map[string][]float64 // by worker and round
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, values: map[[2]int]map[string][]float64{}}
}

func (r *recorder) afterRound(w *weightavg.Worker, round int) error {
	v := modelValues(r.t, w.Estimator().Store())
	r.mu.Lock()
	defer r.mu.Unlock()
	r.values[[2]int{w.Rank(), round}] = v
	return nil
}

// rounds returns the rounds each worker finished, by worker.
func (r *recorder) rounds() map[int][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[int][]int{}
	for k := range r.values {
		out[k[0]] = append(out[k[0]], k[1])
	}
	for _, rs := range out {
		slices.Sort(rs)
	}
	return out
}

// alone trains a separate Estimator of task, from the seed's initial
// variables, for steps steps on worker's input of round: what the worker
// would have at the end of the round without the others.
func alone(t *testing.T, task weightavg.Task, seed uint64, round, worker, workers int, steps int64) map[string][]float64 {
	t.Helper()
	est := taskEstimator(t, task, seed)
	defer est.Close()
	in, err := task.Input(weightavg.RoundSeed(seed, round), worker, workers)
	if err != nil {
		t.Fatal(err)
	}
	if err := est.Train(context.Background(), in, estimator.Steps(steps)); err != nil {
		t.Fatal(err)
	}
	return modelValues(t, est.Store())
}

// taskEstimator returns an Estimator of the task's model, as a worker
// makes one; the caller closes it.
func taskEstimator(t *testing.T, task weightavg.Task, seed uint64) *estimator.Estimator {
	t.Helper()
	m, err := task.NewModel()
	if err != nil {
		t.Fatal(err)
	}
	est, err := estimator.New(m, estimator.RunConfig{Seed: seed, LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	return est
}

// mean is the elementwise mean of the values, name by name.
func mean(vs []map[string][]float64) map[string][]float64 {
	out := map[string][]float64{}
	for name, first := range vs[0] {
		m := make([]float64, len(first))
		for _, v := range vs {
			for i, x := range v[name] {
				m[i] += x
			}
		}
		for i := range m {
			m[i] /= float64(len(vs))
		}
		out[name] = m
	}
	return out
}

// TestOneRoundIsTheMean: after one round every worker holds the mean of
// what each worker would have alone from the same start (its own K steps
// on its own part of the data) — weights and batch norm's moving
// statistics, float32 rounding aside.
func TestOneRoundIsTheMean(t *testing.T) {
	tests := []struct {
		name    string
		task    func(t *testing.T) weightavg.Task
		workers int
		steps   int64
	}{
		{"mlp sgd 2 workers", func(t *testing.T) weightavg.Task { return mlpTask(t, 16, 10, "sgd") }, 2, 3},
		{"mlp momentum 3 workers", func(t *testing.T) weightavg.Task { return mlpTask(t, 16, 10, "momentum") }, 3, 4},
		{"mlp adam 2 workers", func(t *testing.T) weightavg.Task { return mlpTask(t, 16, 7, "adam") }, 2, 2},
		{"resnet8 batch norm 2 workers", func(t *testing.T) weightavg.Task { return resnetTask(t, 2) }, 2, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			task := tc.task(t)
			const seed = 5
			rec := newRecorder(t)
			_, err := weightavg.Run(testContext(t), task, weightavg.Config{ComputeSteps: tc.steps, Rounds: 1, Seed: seed, AfterRound: rec.afterRound}, collective.Local(tc.workers))
			if err != nil {
				t.Fatal(err)
			}
			var each []map[string][]float64
			for w := range tc.workers {
				each = append(each, alone(t, task, seed, 1, w, tc.workers, tc.steps))
			}
			want := mean(each)
			if diff := cmp.Diff(each[0], each[1], cmpopts.EquateApprox(1e-6, 0)); diff == "" {
				t.Fatal("the workers alone end alike: their data did not differ, the test proves nothing")
			}
			for w := range tc.workers {
				if diff := cmp.Diff(want, rec.values[[2]int{w, 1}], cmpopts.EquateApprox(1e-6, 1e-9)); diff != "" {
					t.Errorf("worker %d after the round (-mean of the workers alone +got):\n%s", w, diff)
				}
			}
		})
	}
}

// TestK1SGDIsSynchronous: averaging after every step with plain SGD is
// synchronous data parallelism: N workers of batch B end each round where
// one Estimator of batch N×B does after the same steps on the same rows.
func TestK1SGDIsSynchronous(t *testing.T) {
	const workers, batch, rounds, seed = 3, 8, 4, 9
	rec := newRecorder(t)
	_, err := weightavg.Run(testContext(t), mlpTask(t, 16, batch, "sgd"), weightavg.Config{ComputeSteps: 1, Rounds: rounds, Seed: seed, AfterRound: rec.afterRound}, collective.Local(workers))
	if err != nil {
		t.Fatal(err)
	}
	one := mlpTask(t, 16, workers*batch, "sgd")
	est := taskEstimator(t, one, seed)
	defer est.Close()
	for round := 1; round <= rounds; round++ {
		in, err := one.Input(weightavg.RoundSeed(seed, round), 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := est.Train(context.Background(), in, estimator.Steps(1)); err != nil {
			t.Fatal(err)
		}
		want := modelValues(t, est.Store())
		for w := range workers {
			if diff := cmp.Diff(want, rec.values[[2]int{w, round}], cmpopts.EquateApprox(1e-5, 1e-7)); diff != "" {
				t.Errorf("round %d, worker %d (-synchronous +averaged):\n%s", round, w, diff)
			}
		}
	}
}

// TestAccuracyRises: a few rounds of two workers on the synthetic MNIST
// task take the averaged model's test accuracy well above chance (0.1),
// and the driver reports every round.
func TestAccuracyRises(t *testing.T) {
	var out strings.Builder
	rep, err := weightavg.Run(testContext(t), mlpTask(t, 32, 25, "momentum"), weightavg.Config{ComputeSteps: 10, Rounds: 6, Seed: 1, Out: &out}, collective.Local(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s%s", out.String(), rep.Summary())
	if len(rep.Rounds) != 6 {
		t.Fatalf("reported %d rounds, want 6", len(rep.Rounds))
	}
	if first, last := rep.Rounds[0], rep.Last(); last.Accuracy < 0.6 || last.Loss >= first.Loss {
		t.Errorf("round 6: accuracy %.4f, training loss %.4f (round 1: %.4f), want above 0.6 and a falling loss", last.Accuracy, last.Loss, first.Loss)
	}
}

// failingInput wraps task's input so that worker's input fails in round
// (its first batch of it).
func failingInput(task weightavg.Task, worker, round int) weightavg.Task {
	calls := map[int]int{} // per worker, rounds started
	var mu sync.Mutex
	input := task.Input
	task.Input = func(seed uint64, w, workers int) (estimator.InputFn, error) {
		mu.Lock()
		calls[w]++
		r := calls[w]
		mu.Unlock()
		in, err := input(seed, w, workers)
		if err != nil || w != worker || r != round {
			return in, err
		}
		return func(ctx context.Context) iter.Seq2[estimator.Batch, error] {
			return func(yield func(estimator.Batch, error) bool) {
				yield(estimator.Batch{}, errors.New("the disk is on fire"))
			}
		}, nil
	}
	return task
}

// TestFailingWorker: a worker that fails — its input, its model, the
// driver's evaluation — stops every worker, and the run returns that
// worker's own error, naming it, instead of hanging; no worker finishes
// the round in which it failed.
func TestFailingWorker(t *testing.T) {
	failEval := func(task weightavg.Task) weightavg.Task {
		task.Test = func(ctx context.Context) iter.Seq2[estimator.Batch, error] {
			return func(yield func(estimator.Batch, error) bool) { yield(estimator.Batch{}, errors.New("no test set")) }
		}
		return task
	}
	failModel := func(task weightavg.Task) weightavg.Task {
		var mu sync.Mutex
		n := 0
		newModel := task.NewModel
		task.NewModel = func() (*replicate.Model, error) {
			mu.Lock()
			defer mu.Unlock()
			if n++; n == 2 {
				return nil, errors.New("out of devices")
			}
			return newModel()
		}
		return task
	}
	otherModel := func(task weightavg.Task) weightavg.Task {
		var mu sync.Mutex
		n := 0
		other := mlpTask(t, 9, 5, "sgd")
		newModel := task.NewModel
		task.NewModel = func() (*replicate.Model, error) {
			mu.Lock()
			defer mu.Unlock()
			if n++; n == 2 {
				return other.NewModel()
			}
			return newModel()
		}
		return task
	}
	tests := []struct {
		name    string
		workers int
		task    func(weightavg.Task) weightavg.Task
		want    []string
		// finished is the rounds every worker finished.
		finished []int
	}{
		{"input of worker 1 in round 2", 3, func(t weightavg.Task) weightavg.Task { return failingInput(t, 1, 2) }, []string{"worker 1: round 2", "the disk is on fire"}, []int{1}},
		{"input of the driver in round 1", 2, func(t weightavg.Task) weightavg.Task { return failingInput(t, 0, 1) }, []string{"worker 0: round 1", "the disk is on fire"}, nil},
		{"a worker's model", 2, failModel, []string{"model: out of devices"}, nil},
		{"the driver's evaluation", 2, failEval, []string{"worker 0: round 1", "no test set"}, []int{1}},
		{"workers with different models", 2, otherModel, []string{"round 1", "values, worker 0's", "every worker must train the same model"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder(t)
			task := tc.task(mlpTask(t, 8, 5, "sgd"))
			rep, err := weightavg.Run(testContext(t), task, weightavg.Config{ComputeSteps: 2, Rounds: 3, AfterRound: rec.afterRound}, collective.Local(tc.workers))
			wanterr.Mentions(t, err, tc.want...)
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("the run hung until its deadline")
			}
			if rep != nil {
				t.Errorf("a failed run reported %+v", rep)
			}
			want := map[int][]int{}
			for w := range tc.workers {
				if tc.finished != nil {
					want[w] = tc.finished
				}
			}
			if diff := cmp.Diff(want, rec.rounds()); diff != "" {
				t.Errorf("rounds each worker finished (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProcesses: one Run per rank, as under mpirun, trains as one Run of
// every rank does: rank 0's reports the same rounds, the other's nothing;
// a failing rank's Run returns its own error and the other's a PeerError
// naming it.
func TestProcesses(t *testing.T) {
	cfg := weightavg.Config{ComputeSteps: 3, Rounds: 2, Seed: 4}
	together, err := weightavg.Run(testContext(t), mlpTask(t, 8, 10, "sgd"), cfg, collective.Local(2))
	if err != nil {
		t.Fatal(err)
	}
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprint("failing ", fail), func(t *testing.T) {
			task := mlpTask(t, 8, 10, "sgd")
			if fail {
				task = failingInput(task, 1, 2)
			}
			reps := make([]*weightavg.Report, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for r, c := range collective.Local(2) {
				wg.Go(func() { reps[r], errs[r] = weightavg.Run(testContext(t), task, cfg, []collective.Comm{c}) })
			}
			wg.Wait()
			if fail {
				wanterr.Mentions(t, errs[1], "worker 1: round 2", "the disk is on fire")
				var pe *weightavg.PeerError
				if !errors.As(errs[0], &pe) || *pe != (weightavg.PeerError{Worker: 1, Round: 2}) {
					t.Errorf("rank 0's error %v, want a PeerError naming worker 1 in round 2", errs[0])
				}
				return
			}
			if errs[0] != nil || errs[1] != nil {
				t.Fatal(errs)
			}
			if reps[1] != nil {
				t.Errorf("rank 1 reported %+v, want nothing", reps[1])
			}
			ignore := cmpopts.IgnoreFields(weightavg.Round{}, "Seconds")
			if diff := cmp.Diff(together.Rounds, reps[0].Rounds, ignore, cmpopts.EquateApprox(1e-6, 0)); diff != "" {
				t.Errorf("rounds (-one Run +one Run per rank):\n%s", diff)
			}
		})
	}
}

// TestSetWeights: a worker's weights go back as they came, and a vector of
// another length is an error that leaves them.
func TestSetWeights(t *testing.T) {
	check := func(w *weightavg.Worker, _ int) error {
		vec, err := w.Weights()
		if err != nil {
			return err
		}
		before := modelValues(t, w.Estimator().Store())
		if err := w.SetWeights(vec); err != nil {
			return err
		}
		wanterr.Mentions(t, w.SetWeights(vec[1:]), fmt.Sprintf("vector of %d values, the model has %d", len(vec)-1, len(vec)))
		if diff := cmp.Diff(before, modelValues(t, w.Estimator().Store())); diff != "" {
			t.Errorf("worker %d's model after setting its own weights (-before +after):\n%s", w.Rank(), diff)
		}
		return nil
	}
	if _, err := weightavg.Run(testContext(t), resnetTask(t, 2), weightavg.Config{ComputeSteps: 1, Rounds: 1, AfterRound: check}, collective.Local(1)); err != nil {
		t.Fatal(err)
	}
}

// TestConfigErrors: a run that cannot start is an error before any worker
// starts.
func TestConfigErrors(t *testing.T) {
	task := mlpTask(t, 8, 5, "sgd")
	noTest := task
	noTest.Test = nil
	one, two := collective.Local(2), collective.Local(3)
	tests := []struct {
		name  string
		task  weightavg.Task
		cfg   weightavg.Config
		comms []collective.Comm
		want  []string
	}{
		{"no rounds", task, weightavg.Config{}, collective.Local(1), []string{"0 rounds"}},
		{"negative steps", task, weightavg.Config{ComputeSteps: -1, Rounds: 1}, collective.Local(1), []string{"-1 compute steps"}},
		{"no test set", noTest, weightavg.Config{Rounds: 1}, collective.Local(1), []string{"lacks a model, a training input or a test input"}},
		{"no workers", task, weightavg.Config{Rounds: 1}, nil, []string{"no workers"}},
		{"a rank twice", task, weightavg.Config{Rounds: 1}, []collective.Comm{one[1], one[1]}, []string{"distinct ranks of one group", "rank 1 of 2"}},
		{"two groups", task, weightavg.Config{Rounds: 1}, []collective.Comm{one[0], two[1]}, []string{"distinct ranks of one group", "rank 1 of 3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := weightavg.Run(testContext(t), tc.task, tc.cfg, tc.comms)
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}
