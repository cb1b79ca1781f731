package estimator_test

import (
	"bytes"
	cmpfn "cmp"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/towerflow/towerflow/internal/vartest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// knobModel is y = w*x + b over feature "x" [n, 1] with w starting at 2 and
// b at 0.5, a mean squared error loss and eval metric "mae". Params tune
// it: "lr" (float64, default 0.01) is the learning rate of its SGD train
// op, "momentum" (true) makes it Momentum(lr, 0.9), and "bias" (string,
// default "b") names the bias variable.
func knobModel(t *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
	bias := "b"
	if s, ok := p["bias"].(string); ok {
		bias = s
	}
	lr := 0.01
	if v, ok := p["lr"].(float64); ok {
		lr = v
	}
	w := t.MustVariable("w", tensor.Float64, nil, towers.Constant(2))
	b := t.MustVariable(bias, tensor.Float64, nil, towers.Constant(0.5))
	y := G.Must(G.Add(G.Must(G.Mul(f["x"], w)), b))
	spec := &model.Spec{Predictions: map[string]*G.Node{"y": y}}
	if mode == model.Predict {
		return spec, nil
	}
	diff := G.Must(G.Sub(y, l["y"]))
	spec.Loss = G.Must(G.Mean(G.Must(G.Square(diff))))
	spec.EvalMetrics = map[string]metrics.Bound{"mae": metrics.Mean(G.Must(G.Abs(diff)))}
	opt := optimizers.SGD(lr)
	if p["momentum"] == true {
		opt = optimizers.Momentum(lr, 0.9)
	}
	spec.TrainOps = []model.TrainOp{{Optimizer: opt}}
	return spec, nil
}

// newRunEstimator makes an Estimator with cfg (Seed 1 and a silent logger
// unless set) that the test closes.
func newRunEstimator(t *testing.T, mdl *replicate.Model, cfg estimator.RunConfig) *estimator.Estimator {
	t.Helper()
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	est, err := estimator.New(mdl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { est.Close() })
	return est
}

// foreverInput is x = y = 1..n as one batch, repeated without end.
func foreverInput(t *testing.T, n int) estimator.InputFn {
	t.Helper()
	in, err := estimator.FromTensors(map[string]*tensor.Dense{"x": column(xs(n)...)}, map[string]*tensor.Dense{"y": column(xs(n)...)},
		estimator.TensorInput{BatchSize: n, Epochs: estimator.Forever})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// nanAfter yields good batches (x = y = 1, 2) good times, then a batch
// whose loss is NaN, then good batches again.
func nanAfter(good int) estimator.InputFn {
	return func(ctx context.Context) iter.Seq2[estimator.Batch, error] {
		return func(yield func(estimator.Batch, error) bool) {
			for i := 0; ; i++ {
				x := column(1, 2)
				if i == good {
					x = column(1, math.NaN())
				}
				if !yield(estimator.Batch{Features: map[string]*tensor.Dense{"x": x}, Labels: map[string]*tensor.Dense{"y": column(1, 2)}}, nil) {
					return
				}
			}
		}
	}
}

// checkpointDirs lists the ckpt-<step> directories of dir by step.
func checkpointDirs(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if de.IsDir() && strings.HasPrefix(de.Name(), "ckpt-") {
			out = append(out, de.Name())
		}
	}
	step := func(name string) int64 {
		n, err := strconv.ParseInt(strings.TrimPrefix(name, "ckpt-"), 10, 64)
		if err != nil {
			t.Fatalf("checkpoint directory %q: %v", name, err)
		}
		return n
	}
	slices.SortFunc(out, func(a, b string) int { return cmpfn.Compare(step(a), step(b)) })
	return out
}

func latestStep(t *testing.T, dir string) int64 {
	t.Helper()
	r, err := checkpoint.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r.Step()
}

func models(fn model.Fn) []struct {
	name  string
	model *replicate.Model
} {
	return []struct {
		name  string
		model *replicate.Model
	}{{"one device", replicate.ModelFn(fn, replicate.Config{Devices: []towers.Device{towers.CPU(0)}})}, {"two towers", replicated(fn, 2)}}
}

// TestNaNGuardWithModelDir: a NaN loss ends the run before its update, and
// the model directory's latest checkpoint is the last good step, holding
// exactly the variables in memory.
func TestNaNGuardWithModelDir(t *testing.T) {
	const good = 3
	for _, m := range models(knobModel) {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			est := newRunEstimator(t, m.model, estimator.RunConfig{ModelDir: dir, SaveCheckpointsSteps: 1, LogEvery: -1})
			err := est.Train(context.Background(), nanAfter(good))
			if !errors.Is(err, estimator.ErrNonFiniteLoss) {
				t.Fatalf("Train: %v, want ErrNonFiniteLoss", err)
			}
			if got := est.GlobalStep(); got != good {
				t.Errorf("global step %d, want %d", got, good)
			}
			r, err := checkpoint.Read(dir)
			if err != nil {
				t.Fatal(err)
			}
			if r.Step() != good {
				t.Errorf("latest checkpoint at step %d, want the last good step %d", r.Step(), good)
			}
			inMemory := snapshot(t, est)
			if diff := cmp.Diff(inMemory, checkpointState(t, r), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("latest checkpoint differs from the variables in memory (-memory +checkpoint):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"ckpt-0", "ckpt-1", "ckpt-2", "ckpt-3"}, checkpointDirs(t, dir)); diff != "" {
				t.Errorf("checkpoints (-want +got):\n%s", diff)
			}
			// The NaN step changed nothing: the variables are those of good
			// steps alone.
			ref := newRunEstimator(t, m.model, estimator.RunConfig{LogEvery: -1})
			if err := ref.Train(context.Background(), nanAfter(good), estimator.Steps(good)); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(snapshot(t, ref), inMemory, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("variables after the NaN step differ from %d good steps (-good +after NaN):\n%s", good, diff)
			}
		})
	}
}

// TestCancelSavesCheckpoint: a run cancelled from a hook saves its last
// step although no save was due, and a new Estimator continues from it.
func TestCancelSavesCheckpoint(t *testing.T) {
	for _, m := range models(knobModel) {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := estimator.RunConfig{ModelDir: dir, SaveCheckpointsSteps: 1000, SaveCheckpointsEvery: 1 << 40, LogEvery: -1}
			est := newRunEstimator(t, m.model, cfg)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			err := est.Train(ctx, foreverInput(t, 4), estimator.OnStep(func(step int64, _ float64) {
				if step == 5 {
					cancel()
				}
			}))
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Train: %v, want context.Canceled", err)
			}
			if got := est.GlobalStep(); got != 5 {
				t.Errorf("global step %d, want 5", got)
			}
			if got := latestStep(t, dir); got != 5 {
				t.Errorf("latest checkpoint at step %d, want 5", got)
			}
			if diff := cmp.Diff([]string{"ckpt-0", "ckpt-5"}, checkpointDirs(t, dir)); diff != "" {
				t.Errorf("checkpoints (-want +got):\n%s", diff)
			}
			again := newRunEstimator(t, m.model, cfg)
			scores, err := again.Evaluate(context.Background(), lineInput(t, xs(4), 4, true))
			if err != nil {
				t.Fatal(err)
			}
			if scores["global_step"] != 5 || again.GlobalStep() != 5 {
				t.Errorf("new Estimator: evaluated at global_step %v, GlobalStep %d; want 5", scores["global_step"], again.GlobalStep())
			}
			if diff := cmp.Diff(snapshot(t, est), snapshot(t, again), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("restored variables (-cancelled run +restored):\n%s", diff)
			}
		})
	}
}

// latestWatcher records the model directory's latest checkpoint before
// every step, leaving out repeats.
type latestWatcher struct {
	estimator.BaseHook
	t    *testing.T
	dir  string
	seen []string
}

func (w *latestWatcher) BeforeStep(context.Context, int64) (estimator.StepRequest, error) {
	w.look()
	return estimator.StepRequest{}, nil
}

func (w *latestWatcher) look() {
	p, err := checkpoint.Latest(w.dir)
	if err != nil {
		w.t.Errorf("latest checkpoint: %v", err)
		return
	}
	if name := filepath.Base(p); len(w.seen) == 0 || w.seen[len(w.seen)-1] != name {
		w.seen = append(w.seen, name)
	}
}

// pointerFile is the JSON of the model directory's pointer file.
type pointerFile struct {
	Latest      string   `json:"latest"`
	Checkpoints []string `json:"checkpoints"`
}

func readPointerFile(t *testing.T, dir string) pointerFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, checkpoint.PointerFile))
	if err != nil {
		t.Fatal(err)
	}
	var p pointerFile
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheckpointCadence: an empty model directory gets a checkpoint at the
// run's start, then one every SaveCheckpointsSteps steps counted from the
// run's start, and one at its end unless that step was just saved; only the
// newest KeepCheckpointMax stay: 5 unless set, as in TensorFlow, all when
// negative.
func TestCheckpointCadence(t *testing.T) {
	tests := []struct {
		name       string
		every      int64
		keep       int
		before     int64 // steps of an earlier run into the directory
		steps      int64
		wantLatest []string // latest checkpoint before every step and at the end
		wantKept   []string
	}{
		{"every 3, keep 2", 3, 2, 0, 10, []string{"ckpt-0", "ckpt-3", "ckpt-6", "ckpt-9", "ckpt-10"}, []string{"ckpt-9", "ckpt-10"}},
		{"every 3, keep all", 3, -1, 0, 10, []string{"ckpt-0", "ckpt-3", "ckpt-6", "ckpt-9", "ckpt-10"}, []string{"ckpt-0", "ckpt-3", "ckpt-6", "ckpt-9", "ckpt-10"}},
		{"every 4, keep 3", 4, 3, 0, 10, []string{"ckpt-0", "ckpt-4", "ckpt-8", "ckpt-10"}, []string{"ckpt-4", "ckpt-8", "ckpt-10"}},
		{"every 5, keep 1: the end step was just saved", 5, 1, 0, 10, []string{"ckpt-0", "ckpt-5", "ckpt-10"}, []string{"ckpt-10"}},
		{"every 1, keep 2", 1, 2, 0, 3, []string{"ckpt-0", "ckpt-1", "ckpt-2", "ckpt-3"}, []string{"ckpt-2", "ckpt-3"}},
		{"every 2, keep the default 5", 2, 0, 0, 14, []string{"ckpt-0", "ckpt-2", "ckpt-4", "ckpt-6", "ckpt-8", "ckpt-10", "ckpt-12", "ckpt-14"},
			[]string{"ckpt-6", "ckpt-8", "ckpt-10", "ckpt-12", "ckpt-14"}},
		// A second run: no initial save, steps counted from its start.
		{"every 3 after 2 steps, keep all", 3, -1, 2, 7, []string{"ckpt-2", "ckpt-5", "ckpt-8", "ckpt-9"}, []string{"ckpt-0", "ckpt-2", "ckpt-5", "ckpt-8", "ckpt-9"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			est := newRunEstimator(t, replicate.ModelFn(knobModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{
				ModelDir: dir, SaveCheckpointsSteps: tc.every, KeepCheckpointMax: tc.keep, LogEvery: -1,
			})
			in := foreverInput(t, 4)
			if tc.before > 0 {
				if err := est.Train(context.Background(), in, estimator.Steps(tc.before)); err != nil {
					t.Fatal(err)
				}
			}
			w := &latestWatcher{t: t, dir: dir}
			if err := est.Train(context.Background(), in, estimator.Steps(tc.steps), estimator.Hooks(w)); err != nil {
				t.Fatal(err)
			}
			w.look()
			if diff := cmp.Diff(tc.wantLatest, w.seen); diff != "" {
				t.Errorf("latest checkpoints (-want +got):\n%s", diff)
			}
			want := pointerFile{Latest: tc.wantKept[len(tc.wantKept)-1], Checkpoints: tc.wantKept}
			if diff := cmp.Diff(want, readPointerFile(t, dir)); diff != "" {
				t.Errorf("pointer file (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantKept, checkpointDirs(t, dir)); diff != "" {
				t.Errorf("checkpoint directories (-want +got):\n%s", diff)
			}
		})
	}
}

// endRecorder records the cause its End receives.
type endRecorder struct {
	estimator.BaseHook
	ended bool
	cause error
}

func (h *endRecorder) End(_ context.Context, _ estimator.RunInfo, cause error) error {
	h.ended, h.cause = true, cause
	return nil
}

// failAt fails its AfterStep at step at.
type failAt struct {
	estimator.BaseHook
	at  int64
	err error
}

func (h failAt) AfterStep(_ context.Context, r estimator.StepResult) (bool, error) {
	if r.Step == h.at {
		return false, h.err
	}
	return false, nil
}

// TestEndCause: a clean end — a hook's stop request, a step limit, the end
// of the input — gives the end hooks a nil cause and saves the last step;
// cancellation and errors give them the run's error. Cancellation and
// errors that leave the variables at the last completed step (the input's,
// the model function's, a hook's) save it; a loss a checker rejected (NaN)
// and an update that broke off do not: the last good checkpoint stays the
// latest.
func TestEndCause(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name      string
		input     func(t *testing.T, cancel context.CancelFunc) estimator.InputFn
		opts      func(cancel context.CancelFunc) []estimator.TrainOption
		is        error // nil: a clean end
		wantStep  int64
		wantSaved int64 // latest checkpoint
		model     model.Fn
	}{
		{"StopAtStep", forever4, func(context.CancelFunc) []estimator.TrainOption {
			return []estimator.TrainOption{estimator.Hooks(estimator.StopAtStep{Last: 4})}
		}, nil, 4, 4, nil},
		{"StopAtStep before Steps", forever4, func(context.CancelFunc) []estimator.TrainOption {
			return []estimator.TrainOption{estimator.Steps(6), estimator.Hooks(estimator.StopAtStep{Last: 2})}
		}, nil, 2, 2, nil},
		{"Steps before StopAtStep", forever4, func(context.CancelFunc) []estimator.TrainOption {
			return []estimator.TrainOption{estimator.Steps(3), estimator.Hooks(estimator.StopAtStep{Last: 5})}
		}, nil, 3, 3, nil},
		{"MaxSteps", forever4, func(context.CancelFunc) []estimator.TrainOption {
			return []estimator.TrainOption{estimator.MaxSteps(3)}
		}, nil, 3, 3, nil},
		{"input ends", func(t *testing.T, _ context.CancelFunc) estimator.InputFn { return lineInput(t, xs(4), 2, true) },
			func(context.CancelFunc) []estimator.TrainOption { return nil }, nil, 2, 2, nil},
		{"cancelled", forever4, func(cancel context.CancelFunc) []estimator.TrainOption {
			return []estimator.TrainOption{estimator.OnStep(func(step int64, _ float64) {
				if step == 2 {
					cancel()
				}
			})}
		}, context.Canceled, 2, 2, nil},
		{"hook error", forever4, func(context.CancelFunc) []estimator.TrainOption {
			return []estimator.TrainOption{estimator.Hooks(failAt{at: 2, err: boom})}
		}, boom, 2, 2, nil},
		{"input error", func(*testing.T, context.CancelFunc) estimator.InputFn { return failsAfter(2, boom, false) },
			func(context.CancelFunc) []estimator.TrainOption { return nil }, boom, 2, 2, nil},
		{"input panic", func(*testing.T, context.CancelFunc) estimator.InputFn { return failsAfter(2, boom, true) },
			func(context.CancelFunc) []estimator.TrainOption { return nil }, boom, 2, 2, nil},
		{"model function error at a step", func(*testing.T, context.CancelFunc) estimator.InputFn { return failsAfter(2, nil, false) },
			func(context.CancelFunc) []estimator.TrainOption { return nil }, boom, 2, 2, refusesThreeRows(boom)},
		{"NaN loss", func(*testing.T, context.CancelFunc) estimator.InputFn { return nanAfter(2) },
			func(context.CancelFunc) []estimator.TrainOption { return nil }, estimator.ErrNonFiniteLoss, 2, 0, nil},
		{"loss rejected", forever4, func(context.CancelFunc) []estimator.TrainOption {
			return []estimator.TrainOption{estimator.Hooks(rejectAt{at: 2, err: boom})}
		}, boom, 2, 0, nil},
		{"update broke off", forever4, func(context.CancelFunc) []estimator.TrainOption { return nil },
			replicate.ErrIncompleteUpdate, 2, 0, failsToApplyAt(2, boom)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fn := tc.model
			if fn == nil {
				fn = knobModel
			}
			est := newRunEstimator(t, replicate.ModelFn(fn, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{ModelDir: dir, SaveCheckpointsSteps: 1000, LogEvery: -1})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			first, last := &endRecorder{}, &endRecorder{}
			opts := append([]estimator.TrainOption{estimator.Hooks(first)}, tc.opts(cancel)...)
			opts = append(opts, estimator.Hooks(last))
			err := est.Train(ctx, tc.input(t, cancel), opts...)
			switch {
			case tc.is == nil && err != nil:
				t.Fatalf("Train: %v, want a clean end", err)
			case tc.is != nil && !errors.Is(err, tc.is):
				t.Fatalf("Train: %v, want %v", err, tc.is)
			}
			for i, h := range []*endRecorder{first, last} {
				if !h.ended {
					t.Errorf("hook %d: End not called", i)
				}
				if tc.is == nil && h.cause != nil {
					t.Errorf("hook %d: End cause %v, want nil for a clean end", i, h.cause)
				}
				if tc.is != nil && !errors.Is(h.cause, tc.is) {
					t.Errorf("hook %d: End cause %v, want %v", i, h.cause, tc.is)
				}
			}
			if got := est.GlobalStep(); got != tc.wantStep {
				t.Errorf("global step %d, want %d", got, tc.wantStep)
			}
			if got := latestStep(t, dir); got != tc.wantSaved {
				t.Errorf("latest checkpoint at step %d, want %d", got, tc.wantSaved)
			}
		})
	}
}

func forever4(t *testing.T, _ context.CancelFunc) estimator.InputFn { return foreverInput(t, 4) }

// failsAfter yields good batches of x = y = 1, 2, then fails: it yields
// err, or panics with it when panics; with a nil err it yields a batch of
// 3 rows and ends.
func failsAfter(good int, err error, panics bool) estimator.InputFn {
	return func(context.Context) iter.Seq2[estimator.Batch, error] {
		return func(yield func(estimator.Batch, error) bool) {
			for range good {
				if !yield(estimator.Batch{Features: map[string]*tensor.Dense{"x": column(1, 2)}, Labels: map[string]*tensor.Dense{"y": column(1, 2)}}, nil) {
					return
				}
			}
			switch {
			case panics:
				panic(err)
			case err != nil:
				yield(estimator.Batch{}, err)
			default:
				yield(estimator.Batch{Features: map[string]*tensor.Dense{"x": column(1, 2, 3)}, Labels: map[string]*tensor.Dense{"y": column(1, 2, 3)}}, nil)
			}
		}
	}
}

// refusesThreeRows is knobModel, failing with err on a batch of 3 rows.
func refusesThreeRows(err error) model.Fn {
	return func(t *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
		if f["x"].Shape()[0] == 3 {
			return nil, err
		}
		return knobModel(t, mode, f, l, p)
	}
}

// rejectAt rejects the loss of the step that follows global step at.
type rejectAt struct {
	estimator.BaseHook
	at  int64
	err error
}

func (h rejectAt) CheckLoss(step int64, _ float64) error {
	if step == h.at {
		return h.err
	}
	return nil
}

// failingApply is an optimizer whose Apply fails at global step at.
type failingApply struct {
	optimizers.Optimizer
	at  int64
	err error
}

func (o failingApply) Apply(store *towers.Store, vars []*towers.Variable, grads []any) error {
	if v, err := store.Lookup(model.GlobalStepName); err == nil && v.Data().([]int64)[0] == o.at {
		return o.err
	}
	return o.Optimizer.Apply(store, vars, grads)
}

// failsToApplyAt is knobModel, its optimizer failing at global step at.
func failsToApplyAt(at int64, err error) model.Fn {
	return func(t *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
		spec, serr := knobModel(t, mode, f, l, p)
		if serr == nil && mode == model.Train {
			spec.TrainOps[0].Optimizer = failingApply{Optimizer: spec.TrainOps[0].Optimizer, at: at, err: err}
		}
		return spec, serr
	}
}

// readJSONLines reads a history file of dir into records of type T.
func readJSONLines[T any](t *testing.T, dir, name string) []T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var rec T
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%s line %d: %v", name, i+1, err)
		}
		out = append(out, rec)
	}
	return out
}

// TestTrainHistory: the model directory's train history has the loss of
// every LogEvery-th step, appended across runs.
func TestTrainHistory(t *testing.T) {
	tests := []struct {
		name      string
		logEvery  int
		runs      []int64 // steps of each Train call
		wantSteps []int64
	}{
		{"every 2", 2, []int64{6}, []int64{2, 4, 6}},
		{"every 4", 4, []int64{6}, []int64{4}},
		{"every 3 over two runs", 3, []int64{4, 4}, []int64{3, 6}},
		{"disabled", -1, []int64{6}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			est := newRunEstimator(t, replicated(knobModel, 2), estimator.RunConfig{ModelDir: dir, LogEvery: tc.logEvery})
			losses := map[int64]float64{}
			for _, steps := range tc.runs {
				if err := est.Train(context.Background(), foreverInput(t, 4), estimator.Steps(steps), estimator.OnStep(func(step int64, loss float64) {
					losses[step] = loss
				})); err != nil {
					t.Fatal(err)
				}
			}
			var want []estimator.TrainRecord
			for _, s := range tc.wantSteps {
				want = append(want, estimator.TrainRecord{Step: s, Loss: losses[s]})
			}
			got := readJSONLines[estimator.TrainRecord](t, dir, estimator.TrainHistoryFile)
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(estimator.TrainRecord{}, "Time")); diff != "" {
				t.Errorf("train history (-want +got):\n%s", diff)
			}
			for _, r := range got {
				if r.Time.IsZero() {
					t.Errorf("step %d: no time", r.Step)
				}
			}
		})
	}
}

func evalSteps(recs []estimator.EvalRecord) []int64 {
	var out []int64
	for _, r := range recs {
		out = append(out, r.Step)
	}
	return out
}

// TestTrainAndEvaluate: evaluations every EverySteps and at the end, not
// twice at the same step, each a line of the eval history; the result is
// the last evaluation.
func TestTrainAndEvaluate(t *testing.T) {
	tests := []struct {
		name      string
		every     int64
		maxSteps  int64
		wantEvals []int64
	}{
		{"every 2 to 6", 2, 6, []int64{2, 4, 6}},
		{"every 2 to 5: a final evaluation", 2, 5, []int64{2, 4, 5}},
		{"every 4 to 6: a final evaluation", 4, 6, []int64{4, 6}},
		{"every 1 to 3", 1, 3, []int64{1, 2, 3}},
		{"every 10 to 3: only the final one", 10, 3, []int64{3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			est := newRunEstimator(t, replicated(knobModel, 2), estimator.RunConfig{ModelDir: dir, LogEvery: -1})
			evalIn := lineInput(t, xs(5), 2, true)
			got, err := est.TrainAndEvaluate(context.Background(),
				estimator.TrainSpec{Input: foreverInput(t, 4), MaxSteps: tc.maxSteps},
				estimator.EvalSpec{Input: evalIn, EverySteps: tc.every})
			if err != nil {
				t.Fatal(err)
			}
			if est.GlobalStep() != tc.maxSteps {
				t.Errorf("global step %d, want %d", est.GlobalStep(), tc.maxSteps)
			}
			recs := readJSONLines[estimator.EvalRecord](t, dir, estimator.EvalHistoryFile)
			if diff := cmp.Diff(tc.wantEvals, evalSteps(recs)); diff != "" {
				t.Fatalf("eval history steps (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(recs[len(recs)-1].Metrics, got); diff != "" {
				t.Errorf("result differs from the last eval history line (-history +result):\n%s", diff)
			}
			if got["global_step"] != float64(tc.maxSteps) {
				t.Errorf("result at global_step %v, want %d", got["global_step"], tc.maxSteps)
			}
			again, err := est.Evaluate(context.Background(), evalIn)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(again, got); diff != "" {
				t.Errorf("result differs from evaluating afterwards (-Evaluate +TrainAndEvaluate):\n%s", diff)
			}
		})
	}
}

// TestTrainAndEvaluateSteps: TrainSpec.Steps counts from where training
// starts, so a second run on the model directory continues from the saved
// step; with MaxSteps the first limit reached ends training.
func TestTrainAndEvaluateSteps(t *testing.T) {
	dir := t.TempDir()
	for i, tc := range []struct {
		steps, maxSteps, wantStep int64
	}{{3, 0, 3}, {3, 0, 6}, {3, 7, 7}} {
		est := newRunEstimator(t, replicated(knobModel, 2), estimator.RunConfig{ModelDir: dir, LogEvery: -1})
		_, err := est.TrainAndEvaluate(context.Background(),
			estimator.TrainSpec{Input: foreverInput(t, 4), Steps: tc.steps, MaxSteps: tc.maxSteps},
			estimator.EvalSpec{Input: lineInput(t, xs(5), 2, true), EverySteps: 2})
		if err != nil {
			t.Fatal(err)
		}
		if est.GlobalStep() != tc.wantStep {
			t.Errorf("run %d: global step %d, want %d", i+1, est.GlobalStep(), tc.wantStep)
		}
		if err := est.Close(); err != nil {
			t.Fatal(err)
		}
	}
	recs := readJSONLines[estimator.EvalRecord](t, dir, estimator.EvalHistoryFile)
	if diff := cmp.Diff([]int64{2, 3, 5, 6, 7}, evalSteps(recs)); diff != "" {
		t.Errorf("eval history steps (-want +got):\n%s", diff)
	}
}

func TestEarlyStopping(t *testing.T) {
	tests := []struct {
		name      string
		lr        float64
		every     int64
		es        estimator.EarlyStopping
		wantStep  int64
		wantEvals []int64
	}{
		// Learning rate 0: the loss never changes. The first evaluation
		// sets the best; Patience more without improvement stop the run.
		{"constant loss, patience 2", 0, 1, estimator.EarlyStopping{Metric: "loss", Patience: 2}, 3, []int64{1, 2, 3}},
		{"constant loss, patience 1", 0, 1, estimator.EarlyStopping{Metric: "loss", Patience: 1}, 2, []int64{1, 2}},
		{"constant mae, higher is better", 0, 1, estimator.EarlyStopping{Metric: "mae", HigherIsBetter: true, Patience: 2}, 3, []int64{1, 2, 3}},
		{"constant loss, every 2 steps", 0, 2, estimator.EarlyStopping{Metric: "loss", Patience: 2}, 6, []int64{2, 4, 6}},
		// A falling loss improves at every evaluation: training runs to
		// MaxSteps.
		{"falling loss", 0.01, 1, estimator.EarlyStopping{Metric: "loss", Patience: 1}, 8, []int64{1, 2, 3, 4, 5, 6, 7, 8}},
		{"falling loss, higher is better", 0.01, 1, estimator.EarlyStopping{Metric: "loss", HigherIsBetter: true, Patience: 2}, 3, []int64{1, 2, 3}},
		{"falling loss, MinDelta too large", 0.01, 1, estimator.EarlyStopping{Metric: "loss", Patience: 2, MinDelta: 1e9}, 3, []int64{1, 2, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			est := newRunEstimator(t, replicate.ModelFn(knobModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{ModelDir: dir, LogEvery: -1, Params: model.Params{"lr": tc.lr}})
			es := tc.es
			got, err := est.TrainAndEvaluate(context.Background(),
				estimator.TrainSpec{Input: foreverInput(t, 4), MaxSteps: 8},
				estimator.EvalSpec{Input: lineInput(t, xs(4), 4, true), EverySteps: tc.every, EarlyStopping: &es})
			if err != nil {
				t.Fatal(err)
			}
			if est.GlobalStep() != tc.wantStep || got["global_step"] != float64(tc.wantStep) {
				t.Errorf("stopped at step %d with a result at global_step %v, want %d", est.GlobalStep(), got["global_step"], tc.wantStep)
			}
			recs := readJSONLines[estimator.EvalRecord](t, dir, estimator.EvalHistoryFile)
			if diff := cmp.Diff(tc.wantEvals, evalSteps(recs)); diff != "" {
				t.Errorf("eval history steps (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTrainAndEvaluateErrors(t *testing.T) {
	tests := []struct {
		name      string
		eval      func(t *testing.T) estimator.EvalSpec
		want      []string
		wantSteps int64
	}{
		{"nil eval input", func(*testing.T) estimator.EvalSpec { return estimator.EvalSpec{EverySteps: 1} },
			[]string{"train and evaluate", "nil eval input"}, 0},
		{"early stopping without a metric", func(t *testing.T) estimator.EvalSpec {
			return estimator.EvalSpec{Input: lineInput(t, xs(4), 4, true), EverySteps: 1, EarlyStopping: &estimator.EarlyStopping{Patience: 1}}
		}, []string{"train and evaluate", "early stopping", "metric"}, 0},
		{"early stopping with patience 0", func(t *testing.T) estimator.EvalSpec {
			return estimator.EvalSpec{Input: lineInput(t, xs(4), 4, true), EverySteps: 1, EarlyStopping: &estimator.EarlyStopping{Metric: "loss"}}
		}, []string{"train and evaluate", "early stopping", "patience"}, 0},
		{"early stopping with a negative patience", func(t *testing.T) estimator.EvalSpec {
			return estimator.EvalSpec{Input: lineInput(t, xs(4), 4, true), EverySteps: 1, EarlyStopping: &estimator.EarlyStopping{Metric: "loss", Patience: -1}}
		}, []string{"train and evaluate", "early stopping", "patience"}, 0},
		// Found at the first evaluation, after one step.
		{"unknown metric", func(t *testing.T) estimator.EvalSpec {
			return estimator.EvalSpec{Input: lineInput(t, xs(4), 4, true), EverySteps: 1, EarlyStopping: &estimator.EarlyStopping{Metric: "nope", Patience: 1}}
		}, []string{"train and evaluate", "early stopping", `"nope"`}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est := newRunEstimator(t, replicate.ModelFn(knobModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{LogEvery: -1})
			got, err := est.TrainAndEvaluate(context.Background(), estimator.TrainSpec{Input: foreverInput(t, 4), MaxSteps: 5}, tc.eval(t))
			if err == nil {
				t.Fatalf("no error; result %v", got)
			}
			wanterr.Mentions(t, err, tc.want...)
			if est.GlobalStep() != tc.wantSteps {
				t.Errorf("global step %d, want %d", est.GlobalStep(), tc.wantSteps)
			}
		})
	}
}

// TestRestoreSkipsDamagedCheckpoint: a new Estimator on a directory whose
// newest checkpoint is damaged restores the one before (and a warm start
// from it starts from the one before), warning on the caller's logger, and
// training on replaces the damaged one.
func TestRestoreSkipsDamagedCheckpoint(t *testing.T) {
	variableFile := func(t *testing.T, ckpt string) string {
		t.Helper()
		files, err := filepath.Glob(filepath.Join(ckpt, "*-w.npy"))
		if err != nil || len(files) != 1 {
			t.Fatalf("the file of w in %s: %q, %v", ckpt, files, err)
		}
		return files[0]
	}
	flipLastByte := func(t *testing.T, path string) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-1] ^= 0xff
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, ckpt string)
	}{
		{"a byte of a variable file flipped", func(t *testing.T, ckpt string) { flipLastByte(t, variableFile(t, ckpt)) }},
		{"a variable file truncated", func(t *testing.T, ckpt string) {
			path := variableFile(t, ckpt)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, fi.Size()-8); err != nil {
				t.Fatal(err)
			}
		}},
		{"a variable file missing", func(t *testing.T, ckpt string) {
			if err := os.Remove(variableFile(t, ckpt)); err != nil {
				t.Fatal(err)
			}
		}},
		{"the manifest damaged", func(t *testing.T, ckpt string) {
			path := filepath.Join(ckpt, checkpoint.ManifestFile)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// Change the step without breaking the JSON.
			b = []byte(strings.Replace(string(b), `"step": 3`, `"step": 4`, 1))
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"the manifest missing", func(t *testing.T, ckpt string) {
			if err := os.Remove(filepath.Join(ckpt, checkpoint.ManifestFile)); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logged bytes.Buffer
			dir := t.TempDir()
			cfg := estimator.RunConfig{ModelDir: dir, SaveCheckpointsSteps: 1, LogEvery: -1,
				Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))}
			est := newRunEstimator(t, replicated(knobModel, 2), cfg)
			if err := est.Train(context.Background(), foreverInput(t, 4), estimator.Steps(3)); err != nil {
				t.Fatal(err)
			}
			prev, err := checkpoint.Read(filepath.Join(dir, checkpoint.Name(2)))
			if err != nil {
				t.Fatal(err)
			}
			want := checkpointState(t, prev)
			tc.damage(t, filepath.Join(dir, checkpoint.Name(3)))

			again := newRunEstimator(t, replicated(knobModel, 2), cfg)
			scores, err := again.Evaluate(context.Background(), lineInput(t, xs(4), 4, true))
			if err != nil {
				t.Fatal(err)
			}
			if scores["global_step"] != 2 {
				t.Errorf("evaluated at global_step %v, want 2", scores["global_step"])
			}
			// Skipping the damaged checkpoint is a warning on the
			// caller's logger, naming it.
			if l := logged.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, checkpoint.Name(3)) {
				t.Errorf("the run's logger got %q, want a warning naming %s", l, checkpoint.Name(3))
			}
			if diff := cmp.Diff(want, snapshot(t, again), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("restored variables differ from ckpt-2 (-ckpt-2 +restored):\n%s", diff)
			}
			// A warm start from the directory starts from ckpt-2 too,
			// and warns on its own logger of what it skipped.
			var warmLogged bytes.Buffer
			warm := newRunEstimator(t, replicated(knobModel, 2), estimator.RunConfig{LogEvery: -1, WarmStart: &estimator.WarmStart{From: dir},
				Logger: slog.New(slog.NewTextHandler(&warmLogged, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			if _, err := warm.Evaluate(context.Background(), lineInput(t, xs(4), 4, true)); err != nil {
				t.Fatal(err)
			}
			if l := warmLogged.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, checkpoint.Name(3)) {
				t.Errorf("the warm-started run's logger got %q, want a warning naming %s", l, checkpoint.Name(3))
			}
			if got := snapshot(t, warm)["w"]; !cmp.Equal(want["w"], got) {
				t.Errorf("warm-started w %v, want ckpt-2's %v", got, want["w"])
			}
			// Training on saves step 3 afresh over the damaged one.
			if err := again.Train(context.Background(), foreverInput(t, 4), estimator.Steps(1)); err != nil {
				t.Fatal(err)
			}
			r, err := checkpoint.Read(filepath.Join(dir, checkpoint.Name(3)))
			if err != nil {
				t.Fatalf("ckpt-3 after training on: %v", err)
			}
			if diff := cmp.Diff(snapshot(t, est), checkpointState(t, r), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("new ckpt-3 differs from the first run's step 3 (-first run +new ckpt-3):\n%s", diff)
			}
		})
	}
}

// TestWarmStart: a run whose model directory has no checkpoint starts its
// trainable variables from another run's checkpoint at its first Train,
// Evaluate or Predict; the global step and optimizer slots start fresh, and
// a directory with a checkpoint of its own ignores the warm start.
func TestWarmStart(t *testing.T) {
	// Run A: 3 steps of Momentum into dirA.
	dirA := t.TempDir()
	a := newRunEstimator(t, replicate.ModelFn(knobModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{ModelDir: dirA, LogEvery: -1, Params: model.Params{"lr": 0.1, "momentum": true}})
	if err := a.Train(context.Background(), foreverInput(t, 4), estimator.Steps(3)); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(a.VariableNames(), "w/Momentum/momentum") {
		t.Fatalf("run A has no momentum slot: %q", a.VariableNames())
	}
	varsA := vartest.Variables(t, a)
	wA, bA := varsA["w"], varsA["b"]
	if cmp.Equal(wA, []float64{2}) || cmp.Equal(bA, []float64{0.5}) {
		t.Fatalf("run A did not train: w %v, b %v", wA, bA)
	}

	evaluate := func(t *testing.T, est *estimator.Estimator) int64 {
		t.Helper()
		scores, err := est.Evaluate(context.Background(), lineInput(t, xs(4), 4, true))
		if err != nil {
			t.Fatal(err)
		}
		return int64(scores["global_step"])
	}
	predict := func(t *testing.T, est *estimator.Estimator) int64 {
		t.Helper()
		for _, err := range est.Predict(context.Background(), lineInput(t, xs(2), 2, false)) {
			if err != nil {
				t.Fatal(err)
			}
		}
		return est.GlobalStep()
	}
	// Run B trains with learning rate 0: one step keeps its start values.
	train := func(t *testing.T, est *estimator.Estimator) int64 {
		t.Helper()
		if err := est.Train(context.Background(), foreverInput(t, 4), estimator.Steps(1)); err != nil {
			t.Fatal(err)
		}
		return est.GlobalStep()
	}
	tests := []struct {
		name     string
		noDir    bool
		bias     string // B's name for the bias
		ws       estimator.WarmStart
		first    func(*testing.T, *estimator.Estimator) int64
		wantStep int64
		want     map[string][]float64 // B's model variables
	}{
		{"Evaluate first", false, "b", estimator.WarmStart{From: dirA}, evaluate, 0, map[string][]float64{"w": wA, "b": bA}},
		{"Predict first", false, "b", estimator.WarmStart{From: dirA}, predict, 0, map[string][]float64{"w": wA, "b": bA}},
		{"Train first", false, "b", estimator.WarmStart{From: dirA}, train, 1, map[string][]float64{"w": wA, "b": bA}},
		{"without a model directory", true, "b", estimator.WarmStart{From: dirA}, evaluate, 0, map[string][]float64{"w": wA, "b": bA}},
		{"without a model directory, Train first", true, "b", estimator.WarmStart{From: dirA}, train, 1, map[string][]float64{"w": wA, "b": bA}},
		{"from a checkpoint directory", false, "b", estimator.WarmStart{From: filepath.Join(dirA, checkpoint.Name(3))}, evaluate, 0, map[string][]float64{"w": wA, "b": bA}},
		{"pattern", false, "b", estimator.WarmStart{From: dirA, Pattern: "^w$"}, evaluate, 0, map[string][]float64{"w": wA, "b": {0.5}}},
		{"rename", false, "bias", estimator.WarmStart{From: dirA, Rename: map[string]string{"bias": "b"}}, evaluate, 0, map[string][]float64{"w": wA, "bias": bA}},
		{"rename, Train first", false, "bias", estimator.WarmStart{From: dirA, Rename: map[string]string{"bias": "b"}}, train, 1, map[string][]float64{"w": wA, "bias": bA}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := estimator.RunConfig{LogEvery: -1, Params: model.Params{"lr": 0.0, "bias": tc.bias}, WarmStart: &tc.ws}
			if !tc.noDir {
				cfg.ModelDir = t.TempDir()
			}
			b := newRunEstimator(t, replicate.ModelFn(knobModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), cfg)
			if got := tc.first(t, b); got != tc.wantStep {
				t.Errorf("global step %d, want %d", got, tc.wantStep)
			}
			want := map[string][]float64{"global_step": {float64(tc.wantStep)}}
			for k, v := range tc.want {
				want[k] = v
			}
			if diff := cmp.Diff(want, vartest.Variables(t, b)); diff != "" {
				t.Errorf("run B's variables (-want +got):\n%s", diff)
			}
			if cfg.ModelDir == "" {
				return
			}
			// Run B's directory now has its own checkpoint (Train saved
			// one; else train one step to save one): a new Estimator
			// restores it and ignores the warm start.
			if tc.wantStep == 0 {
				if train(t, b) != 1 {
					t.Fatal("one step did not make global step 1")
				}
			}
			saved := vartest.Variables(t, b)
			again := newRunEstimator(t, replicate.ModelFn(knobModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), cfg)
			if got := evaluate(t, again); got != 1 {
				t.Errorf("new Estimator on B's directory: global step %d, want 1", got)
			}
			if diff := cmp.Diff(saved, vartest.Variables(t, again)); diff != "" {
				t.Errorf("new Estimator on B's directory (-B +new):\n%s", diff)
			}
		})
	}

	t.Run("own checkpoint wins", func(t *testing.T) {
		dir := t.TempDir()
		first := newRunEstimator(t, replicate.ModelFn(knobModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{ModelDir: dir, LogEvery: -1, Params: model.Params{"lr": 0.05}})
		if err := first.Train(context.Background(), foreverInput(t, 4), estimator.Steps(2)); err != nil {
			t.Fatal(err)
		}
		want := vartest.Variables(t, first)
		b := newRunEstimator(t, replicate.ModelFn(knobModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{ModelDir: dir, LogEvery: -1, WarmStart: &estimator.WarmStart{From: dirA}})
		if got := evaluate(t, b); got != 2 {
			t.Errorf("global step %d, want 2", got)
		}
		if diff := cmp.Diff(want, vartest.Variables(t, b)); diff != "" {
			t.Errorf("variables (-own checkpoint +got):\n%s", diff)
		}
	})
}

func TestWarmStartErrors(t *testing.T) {
	dirA := t.TempDir()
	a := newRunEstimator(t, replicate.ModelFn(knobModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{ModelDir: dirA, LogEvery: -1})
	if err := a.Train(context.Background(), foreverInput(t, 4), estimator.Steps(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := estimator.New(replicate.ModelFn(knobModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{WarmStart: &estimator.WarmStart{}}); err == nil || !strings.Contains(err.Error(), "warm start") {
		t.Errorf("New with a warm start from nowhere: %v, want an error about the warm start", err)
	}
	tests := []struct {
		name string
		ws   estimator.WarmStart
		bias string
		want []string
	}{
		{"no checkpoint to start from", estimator.WarmStart{From: t.TempDir()}, "b", []string{"warm start", "no checkpoint"}},
		{"a variable missing from the checkpoint", estimator.WarmStart{From: dirA}, "bias", []string{"warm start", `"bias"`}},
		{"rename to a missing variable", estimator.WarmStart{From: dirA, Rename: map[string]string{"b": "nope"}}, "b", []string{"warm start", `"nope"`}},
		{"pattern selecting nothing", estimator.WarmStart{From: dirA, Pattern: "^nope$"}, "b", []string{"warm start", `"^nope$"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newRunEstimator(t, replicate.ModelFn(knobModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{ModelDir: t.TempDir(), LogEvery: -1, Params: model.Params{"bias": tc.bias}, WarmStart: &tc.ws})
			_, err := b.Evaluate(context.Background(), lineInput(t, xs(4), 4, true))
			if err == nil {
				t.Fatal("no error")
			}
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}
