package estimator_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// acrossRun is one process's part of a run across processes: the model,
// the data and what to do.
type acrossRun struct {
	Towers    int
	Optimizer string // sgd, momentum, adam
	Dtype     string // float32, float64
	Rows      int    // examples in the data set
	Batch     int    // rows of all processes together
	Steps     int64
	Rounds    int   // Train calls of Steps steps each; 0 means 1
	Every     int64 // weight averaging every Every steps; 0: all-reduce gradients
	Slots     bool
	Seed      uint64 // the process's own seed; rank 0's variables win
	ModelDir  string
	// FailBuild makes the model function of this process fail; FailAt
	// makes its input fail after that many batches (0: never); StopAfter
	// ends its input after that many batches (0: never).
	FailBuild         bool
	FailAt, StopAfter int64
	// ExitAt ends the whole process, status 3, when its input reaches that
	// many batches (0: never): a rank that dies, for tests under mpirun.
	ExitAt int64
	// NaN makes every feature of this process's batches NaN, so its loss
	// is NaN at the first step.
	NaN bool
	// CancelAt cancels this process's context when its input reaches that
	// many batches (0: never).
	CancelAt int64
}

// acrossResult is what a process ends with.
type acrossResult struct {
	Weights map[string][]float64
	Counter int64
	Step    int64
	Metrics map[string]float64
	Err     string
}

// mlpModel is a small MLP, 4 → 8 (ReLU) → 1, with a squared error loss, a
// state update that assigns the batch mean of the prediction and one that
// counts the towers' steps, and mean metrics.
func mlpModel(dt tensor.Dtype, fail bool) model.Fn {
	return func(s *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
		if fail {
			return nil, fmt.Errorf("model function failed on purpose")
		}
		init := towers.HeNormal()
		w1 := s.MustVariable("dense/kernel", dt, tensor.Shape{4, 8}, init)
		b1 := s.MustVariable("dense/bias", dt, tensor.Shape{8}, towers.Constant(0.1))
		w2 := s.MustVariable("out/kernel", dt, tensor.Shape{8, 1}, init)
		b2 := s.MustVariable("out/bias", dt, tensor.Shape{1}, nil)
		h := G.Must(G.Rectify(G.Must(G.BroadcastAdd(G.Must(G.Mul(f["x"], w1)), b1, nil, []byte{0}))))
		y := G.Must(G.BroadcastAdd(G.Must(G.Mul(h, w2)), b2, nil, []byte{0}))
		spec := &model.Spec{Predictions: map[string]*G.Node{"y": y}}
		if mode == model.Predict {
			return spec, nil
		}
		diff := G.Must(G.Sub(y, l["y"]))
		spec.Loss = G.Must(G.Mean(G.Must(G.Square(diff))))
		spec.EvalMetrics = map[string]metrics.Bound{"mae": metrics.Mean(G.Must(G.Abs(diff))), "mean_y": metrics.Mean(y)}
		if mode == model.Train {
			s.MustVariable("mean_y", dt, tensor.Shape{}, nil, towers.NotTrainable())
			if err := s.Assign("mean_y", G.Must(G.Mean(y))); err != nil {
				return nil, err
			}
			s.MustVariable("tower_steps", tensor.Int64, tensor.Shape{}, nil, towers.NotTrainable())
			one := G.NewScalar(s.Graph(), tensor.Int64, G.WithName(s.Name("one")), G.WithValue(int64(1)))
			if err := s.AssignAdd("tower_steps", one); err != nil {
				return nil, err
			}
		}
		return spec, nil
	}
}

// mlpData is rows examples of a fixed random regression task.
func mlpData(rows int, dt tensor.Dtype) (features, labels map[string]*tensor.Dense) {
	rng := rand.New(rand.NewPCG(3, 4))
	x, y := make([]float64, rows*4), make([]float64, rows)
	for i := range rows {
		for j := range 4 {
			x[i*4+j] = rng.NormFloat64()
		}
		y[i] = x[i*4] - 2*x[i*4+1] + 0.5*x[i*4+2]*x[i*4+3] + 0.1*rng.NormFloat64()
	}
	if dt == tensor.Float32 {
		x32, y32 := make([]float32, len(x)), make([]float32, len(y))
		for i, v := range x {
			x32[i] = float32(v)
		}
		for i, v := range y {
			y32[i] = float32(v)
		}
		return map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(rows, 4), tensor.WithBacking(x32))},
			map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(rows, 1), tensor.WithBacking(y32))}
	}
	return map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(rows, 4), tensor.WithBacking(x))},
		map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(rows, 1), tensor.WithBacking(y))}
}

func acrossOptimizer(name string) optimizers.Optimizer {
	switch name {
	case "momentum":
		return optimizers.Momentum(0.05, 0.9)
	case "adam":
		return optimizers.Adam(0.01)
	}
	return optimizers.SGD(0.05)
}

// trainAcross trains run as process comm.Rank() of comm.Size() (comm nil:
// alone), then evaluates on the whole data set, each process on its part.
func trainAcross(ctx context.Context, comm collective.Comm, run acrossRun) acrossResult {
	dt := tensor.Float64
	if run.Dtype == "float32" {
		dt = tensor.Float32
	}
	procs, rank := 1, 0
	var group collective.Comm
	if comm != nil && comm.Size() > 1 {
		procs, rank, group = comm.Size(), comm.Rank(), comm
	}
	cfg := replicate.Config{Devices: cpuDevices(run.Towers), Optimizer: acrossOptimizer(run.Optimizer), Processes: group,
		Averaging: replicate.Averaging{Every: run.Every, Slots: run.Slots}, BucketBytes: 256}
	est, err := estimator.New(replicate.ModelFn(mlpModel(dt, run.FailBuild), cfg), estimator.RunConfig{Seed: run.Seed, LogEvery: -1, ModelDir: run.ModelDir, SaveCheckpointsSteps: 2})
	if err != nil {
		return acrossResult{Err: err.Error()}
	}
	defer est.Close()
	features, labels := mlpData(run.Rows, dt)
	in, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: run.Batch, Epochs: estimator.Forever, Shuffle: true, Seed: 7, Processes: procs, Rank: rank})
	if err != nil {
		return acrossResult{Err: err.Error()}
	}
	if run.StopAfter > 0 {
		in = takeBatches(in, run.StopAfter, nil)
	}
	if run.FailAt > 0 {
		in = takeBatches(in, run.FailAt, errors.New("input failed on purpose"))
	}
	if run.ExitAt > 0 {
		in = takeBatches(in, run.ExitAt, errExit)
	}
	if run.NaN {
		in = poisoned(in)
	}
	if run.CancelAt > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		in = takeBatches(in, run.CancelAt, cancelled(cancel))
	}
	var res acrossResult
	for range max(run.Rounds, 1) {
		if err := est.Train(ctx, in, estimator.Steps(run.Steps)); err != nil {
			res.Err = err.Error()
			return res
		}
	}
	evalIn, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: run.Batch, Processes: procs, Rank: rank})
	if err != nil {
		return acrossResult{Err: err.Error()}
	}
	if res.Metrics, err = est.Evaluate(ctx, evalIn); err != nil {
		res.Err = err.Error()
	}
	res.Weights = map[string][]float64{}
	for _, v := range est.Store().Variables() {
		switch d := v.Data().(type) {
		case []float64:
			res.Weights[v.Name()] = d
		case []float32:
			for _, x := range d {
				res.Weights[v.Name()] = append(res.Weights[v.Name()], float64(x))
			}
		case []int64:
			if v.Name() == "tower_steps" {
				res.Counter = d[0]
			}
		}
	}
	res.Step = est.GlobalStep()
	return res
}

// poisoned makes every feature of in's batches NaN.
func poisoned(in estimator.InputFn) estimator.InputFn {
	return func(ctx context.Context) iter.Seq2[estimator.Batch, error] {
		return func(yield func(estimator.Batch, error) bool) {
			for b, err := range in(ctx) {
				if err == nil {
					switch d := b.Features["x"].Data().(type) {
					case []float64:
						d[0] = math.NaN()
					case []float32:
						d[0] = float32(math.NaN())
					}
				}
				if !yield(b, err) {
					return
				}
			}
		}
	}
}

// cancelled, as takeBatches' error, cancels the run's context instead.
type cancelled context.CancelFunc

func (cancelled) Error() string { return "cancel" }

// errExit asks takeBatches to end the process.
var errExit = errors.New("exit")

// takeBatches ends in after n batches, with err when it is not nil.
func takeBatches(in estimator.InputFn, n int64, err error) estimator.InputFn {
	return func(ctx context.Context) iter.Seq2[estimator.Batch, error] {
		return func(yield func(estimator.Batch, error) bool) {
			i := int64(0)
			for b, berr := range in(ctx) {
				if i == n {
					if err == errExit {
						os.Exit(3)
					}
					if c, ok := err.(cancelled); ok {
						c()
						<-ctx.Done()
						err = ctx.Err()
					}
					if err != nil {
						yield(estimator.Batch{}, err)
					}
					return
				}
				if !yield(b, berr) {
					return
				}
				i++
			}
		}
	}
}

// runLocal runs each rank's run as a goroutine of a Local group and
// returns their results by rank.
func runLocal(runs []acrossRun) []acrossResult {
	comms := collective.Local(len(runs))
	out := make([]acrossResult, len(runs))
	var wg sync.WaitGroup
	for r := range runs {
		wg.Go(func() { out[r] = trainAcross(context.Background(), comms[r], runs[r]) })
	}
	wg.Wait()
	return out
}

// ranks gives every process run, with its own seed.
func ranks(n int, run acrossRun) []acrossRun {
	out := make([]acrossRun, n)
	for r := range out {
		out[r] = run
		out[r].Seed = uint64(100 + r)
	}
	return out
}

func approx(dtype string) cmp.Option {
	if dtype == "float32" {
		return cmpopts.EquateApprox(1e-4, 1e-5)
	}
	return cmpopts.EquateApprox(1e-9, 1e-11)
}

// TestProcessesTrainLikeOneDevice: N processes × M towers, each process
// with its own seed and its part of every batch, end with the variables,
// moving statistic and metrics of one process with one tower on the whole
// batches; deltas count every tower of every process.
func TestProcessesTrainLikeOneDevice(t *testing.T) {
	tests := []struct {
		procs int
		run   acrossRun
	}{
		{2, acrossRun{Towers: 1, Optimizer: "sgd", Dtype: "float64", Rows: 64, Batch: 16, Steps: 6}},
		{2, acrossRun{Towers: 2, Optimizer: "momentum", Dtype: "float64", Rows: 60, Batch: 15, Steps: 6}}, // uneven: 8 and 7 rows
		{3, acrossRun{Towers: 1, Optimizer: "adam", Dtype: "float32", Rows: 70, Batch: 14, Steps: 5}},     // 5, 5, 4 rows
		{3, acrossRun{Towers: 2, Optimizer: "sgd", Dtype: "float32", Rows: 50, Batch: 10, Steps: 4}},
		{4, acrossRun{Towers: 1, Optimizer: "adam", Dtype: "float64", Rows: 66, Batch: 11, Steps: 5}}, // 3, 3, 3, 2 rows
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%dx%d_%s_%s_batch%d", tc.procs, tc.run.Towers, tc.run.Optimizer, tc.run.Dtype, tc.run.Batch), func(t *testing.T) {
			checkLikeOneDevice(t, tc.procs, tc.run, runLocal(ranks(tc.procs, tc.run)))
		})
	}
}

// checkLikeOneDevice checks every rank's result of run on procs
// processes against one process with one tower on the whole batches: the
// variables and metrics alike, the counter counting every tower.
func checkLikeOneDevice(t *testing.T, procs int, run acrossRun, got []acrossResult) {
	t.Helper()
	one := run
	one.Towers, one.Seed = 1, 100
	want := trainAcross(context.Background(), nil, one)
	if want.Err != "" {
		t.Fatal(want.Err)
	}
	for r, g := range got {
		if g.Err != "" {
			t.Fatalf("rank %d: %s", r, g.Err)
		}
		if d := cmp.Diff(want.Weights, g.Weights, approx(run.Dtype)); d != "" {
			t.Errorf("rank %d: variables differ from one device (-want +got):\n%s", r, d)
		}
		if d := cmp.Diff(want.Metrics, g.Metrics, approx(run.Dtype)); d != "" {
			t.Errorf("rank %d: metrics differ from one device (-want +got):\n%s", r, d)
		}
		if wantCount := run.Steps * int64(procs*run.Towers); g.Counter != wantCount || g.Step != run.Steps {
			t.Errorf("rank %d: counter %d at step %d, want %d at step %d", r, g.Counter, g.Step, wantCount, run.Steps)
		}
	}
}

// TestProcessesStop: a process that fails or is cancelled stops every
// process with an error naming it; one whose input ends stops every
// process cleanly at the same step.
func TestProcessesStop(t *testing.T) {
	base := acrossRun{Towers: 1, Optimizer: "sgd", Dtype: "float64", Rows: 64, Batch: 16, Steps: 8}
	tests := []struct {
		name     string
		edit     func(runs []acrossRun)
		wantErrs []string // per rank, "" for none
		wantStep int64    // where every rank stopped, when none failed
	}{
		{"input fails", func(rs []acrossRun) { rs[1].FailAt = 3 }, []string{"process rank 1 failed", "input at step 3: input failed on purpose"}, 0},
		{"rank 0's input fails", func(rs []acrossRun) { rs[0].FailAt = 2 }, []string{"input at step 2: input failed on purpose", "process rank 0 failed"}, 0},
		{"model function fails", func(rs []acrossRun) { rs[1].FailBuild = true }, []string{"process rank 1 failed", "model function failed on purpose"}, 0},
		{"NaN loss", func(rs []acrossRun) { rs[1].NaN = true }, []string{"process rank 1 failed", "NaN"}, 0},
		{"input ends", func(rs []acrossRun) { rs[1].StopAfter = 3 }, []string{"", ""}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runs := ranks(2, base)
			tc.edit(runs)
			got := runLocal(runs)
			for r, g := range got {
				if w := tc.wantErrs[r]; (w == "") != (g.Err == "") || !strings.Contains(g.Err, w) {
					t.Errorf("rank %d: error %q, want one containing %q", r, g.Err, w)
				}
				if tc.wantStep > 0 && g.Step != tc.wantStep {
					t.Errorf("rank %d: stopped at step %d, want %d", r, g.Step, tc.wantStep)
				}
			}
		})
	}
}

// TestProcessesCancelled: cancelling one process's context stops the
// others with an error naming it.
func TestProcessesCancelled(t *testing.T) {
	runs := ranks(2, acrossRun{Towers: 1, Optimizer: "sgd", Dtype: "float64", Rows: 64, Batch: 16, Steps: 1000})
	comms := collective.Local(2)
	ctx, cancel := context.WithCancel(context.Background())
	out := make([]acrossResult, 2)
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Go(func() {
		<-started
		cancel()
	})
	for r := range runs {
		c := context.Background()
		if r == 1 {
			c = ctx
		}
		wg.Go(func() {
			if r == 1 {
				close(started)
			}
			out[r] = trainAcross(c, comms[r], runs[r])
		})
	}
	wg.Wait()
	if !strings.Contains(out[1].Err, context.Canceled.Error()) {
		t.Errorf("rank 1: error %q, want the cancellation", out[1].Err)
	}
	// Rank 1 tells the others at their next header, or, cancelled while
	// it waited in one, breaks the group naming itself.
	if !strings.Contains(out[0].Err, "process rank 1 failed") && !strings.Contains(out[0].Err, "rank 1 left") {
		t.Errorf("rank 0: error %q, want one naming rank 1", out[0].Err)
	}
}

// TestProcessesRankZeroWrites: only rank 0 writes its model directory, and
// a resumed run continues exactly where an uninterrupted one is.
func TestProcessesRankZeroWrites(t *testing.T) {
	base := acrossRun{Towers: 1, Optimizer: "adam", Dtype: "float64", Rows: 64, Batch: 16, Steps: 3}
	// Each Train call reads the input from its start: two calls in one
	// run are what a resumed run does.
	twice := base
	twice.Rounds = 2
	straight := runLocal(ranks(2, twice))
	dirs := []string{t.TempDir(), t.TempDir()}
	runs := ranks(2, base)
	for r := range runs {
		runs[r].ModelDir = dirs[r]
	}
	first := runLocal(runs)
	// Rank 1 resumes with a new seed and an empty directory: it must take
	// everything, the optimizer's slots included, from rank 0.
	runs[1].ModelDir, runs[1].Seed = t.TempDir(), 999
	second := runLocal(runs)
	for r := range 2 {
		if first[r].Err != "" || second[r].Err != "" {
			t.Fatalf("rank %d: %q, %q", r, first[r].Err, second[r].Err)
		}
		if second[r].Step != 6 {
			t.Errorf("rank %d: resumed to step %d, want 6", r, second[r].Step)
		}
		if d := cmp.Diff(straight[r].Weights, second[r].Weights); d != "" {
			t.Errorf("rank %d: resumed run differs from an uninterrupted one (-want +got):\n%s", r, d)
		}
	}
	if entries, err := os.ReadDir(dirs[1]); err != nil || len(entries) != 0 {
		t.Errorf("rank 1 wrote into its model directory: %v %v", entries, err)
	}
	if _, err := os.Stat(dirs[0] + "/checkpoint"); err != nil {
		t.Errorf("rank 0 wrote no checkpoint: %v", err)
	}
}

// TestWeightAveraging: with averaging every K steps each process trains on
// its own part and the variables are then the mean of what each would have
// alone from the same start; with K = 1, SGD and equal parts, that is
// synchronous training.
func TestWeightAveraging(t *testing.T) {
	base := acrossRun{Towers: 1, Optimizer: "momentum", Dtype: "float64", Rows: 64, Batch: 16, Every: 3, Steps: 3}
	got := runLocal(ranks(2, base))
	// By hand: each rank's part of the batches, alone from rank 0's start
	// (its seed, 100), then the mean.
	var alone [2]acrossResult
	for r := range 2 {
		run := base
		run.Every, run.Seed = 0, 100
		alone[r] = trainPart(t, run, r, 2)
	}
	want := map[string][]float64{}
	for name, a := range alone[0].Weights {
		if name == "mean_y" || strings.Contains(name, "/momentum") {
			continue
		}
		for i := range a {
			want[name] = append(want[name], (a[i]+alone[1].Weights[name][i])/2)
		}
	}
	for r, g := range got {
		if g.Err != "" {
			t.Fatal(g.Err)
		}
		have := map[string][]float64{}
		for name := range want {
			have[name] = g.Weights[name]
		}
		if d := cmp.Diff(want, have, approx("float64")); d != "" {
			t.Errorf("rank %d: averaged variables differ from the mean of each alone (-want +got):\n%s", r, d)
		}
	}
	// K = 1 with SGD on equal parts is synchronous training.
	sgd := acrossRun{Towers: 1, Optimizer: "sgd", Dtype: "float64", Rows: 64, Batch: 16, Steps: 4}
	sync := runLocal(ranks(2, sgd))
	sgd.Every = 1
	avg := runLocal(ranks(2, sgd))
	for r := range 2 {
		if d := cmp.Diff(sync[r].Weights["dense/kernel"], avg[r].Weights["dense/kernel"], approx("float64")); d != "" {
			t.Errorf("rank %d: averaging every step differs from all-reducing gradients (-sync +avg):\n%s", r, d)
		}
	}
}

// trainPart trains run alone on process rank's part of the batches.
func trainPart(t *testing.T, run acrossRun, rank, procs int) acrossResult {
	t.Helper()
	dt := tensor.Float64
	est, err := estimator.New(replicate.ModelFn(mlpModel(dt, false), replicate.Config{Devices: cpuDevices(1), Optimizer: acrossOptimizer(run.Optimizer)}), estimator.RunConfig{Seed: run.Seed, LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	features, labels := mlpData(run.Rows, dt)
	in, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: run.Batch, Epochs: estimator.Forever, Shuffle: true, Seed: 7, Processes: procs, Rank: rank})
	if err != nil {
		t.Fatal(err)
	}
	if err := est.Train(context.Background(), in, estimator.Steps(run.Steps)); err != nil {
		t.Fatal(err)
	}
	res := acrossResult{Weights: map[string][]float64{}}
	for name, w := range est.Store().Weights() {
		res.Weights[name] = w.Data().([]float64)
	}
	return res
}

// TestEstimatorProcessErrors: asking for what cannot work across
// processes is an error that says so.
func TestEstimatorProcessErrors(t *testing.T) {
	comms := collective.Local(2)
	m := replicate.ModelFn(mlpModel(tensor.Float64, false), replicate.Config{Devices: cpuDevices(1), Optimizer: optimizers.SGD(0.1), Processes: comms[1]})
	est, err := estimator.New(m, estimator.RunConfig{LogEvery: -1, ModelDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	_, err = est.Export(context.Background(), t.TempDir(), estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{-1, 4}}})
	if err == nil || !strings.Contains(err.Error(), "rank 0 alone exports") {
		t.Errorf("export on rank 1: %v", err)
	}
	_, err = est.TrainAndEvaluate(context.Background(), estimator.TrainSpec{Input: nil}, estimator.EvalSpec{Input: func(context.Context) iter.Seq2[estimator.Batch, error] { return nil }, Every: 1})
	if err == nil || !strings.Contains(err.Error(), "use EverySteps") {
		t.Errorf("clock-driven evaluation across processes: %v", err)
	}
	if rank, n := est.Rank(); rank != 1 || n != 2 {
		t.Errorf("Rank() = %d, %d; want 1, 2", rank, n)
	}
}
