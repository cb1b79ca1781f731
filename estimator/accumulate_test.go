package estimator_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/estimator/tfevents"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// stepLog records what AfterStep sees.
type stepLog struct {
	estimator.BaseHook
	steps    []int64
	examples []int
	norms    map[int64]float64
}

func (h *stepLog) AfterStep(_ context.Context, r estimator.StepResult) (bool, error) {
	h.steps = append(h.steps, r.Step)
	h.examples = append(h.examples, r.Examples)
	if h.norms == nil {
		h.norms = map[int64]float64{}
	}
	h.norms[r.Step] = r.GradientNorm
	return false, nil
}

// weightsOf is every weight of est.
func weightsOf(t *testing.T, est *estimator.Estimator) map[string][]float64 {
	t.Helper()
	out := map[string][]float64{}
	for _, name := range []string{"w", "b"} {
		v, err := est.VariableValue(name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = []float64{v.Data().(float64)}
	}
	return out
}

// TestTrainAccumulatesMicroBatches: with AccumulateSteps 4, Train reads 4
// batches of 25 rows for each update: the global step, Steps and MaxSteps
// count updates, hooks run once per update and see its 100 rows, an input
// that ends part-way through an update trains on what it gave, and the
// weights are those of batches of 100 (to 1e-12).
func TestTrainAccumulatesMicroBatches(t *testing.T) {
	cases := []struct {
		name     string
		opts     []estimator.TrainOption
		steps    []int64
		examples []int
	}{
		{"input ends", nil, []int64{1, 2, 3}, []int{100, 100, 50}},
		{"steps", []estimator.TrainOption{estimator.Steps(2)}, []int64{1, 2}, []int{100, 100}},
		{"max steps", []estimator.TrainOption{estimator.MaxSteps(1)}, []int64{1}, []int{100}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			log := &stepLog{}
			est := newEstimator(t, replicate.ModelFn(lineModel, replicate.Config{Devices: cpuDevices(2), AccumulateSteps: 4}))
			if err := est.Train(ctx, lineInput(t, xs(250), 25, true), append(tc.opts, estimator.Hooks(log))...); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.steps, log.steps); diff != "" {
				t.Errorf("steps hooks saw (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.examples, log.examples); diff != "" {
				t.Errorf("examples hooks saw (-want +got):\n%s", diff)
			}
			ref := newEstimator(t, replicate.ModelFn(lineModel, replicate.Config{Devices: cpuDevices(1)}))
			if err := ref.Train(ctx, lineInput(t, xs(250), 100, true), tc.opts...); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(weightsOf(t, ref), weightsOf(t, est), relApprox); diff != "" {
				t.Errorf("accumulated 4×25 differ from batches of 100 (-100 +4×25):\n%s", diff)
			}
		})
	}
}

// clippedLine is lineModel with its train op clipping by global norm.
func clippedLine(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
	spec, err := lineModel(tw, mode, f, l, p)
	if err == nil && len(spec.TrainOps) > 0 {
		spec.TrainOps[0].Clip = model.Clip{GlobalNorm: 0.5}
	}
	return spec, err
}

// TestGradientNormReachesHooksAndSummaries: the global norm before
// clipping reaches hooks (StepResult.GradientNorm) and TensorBoard
// (GradientNormTag), as the engine computed it.
func TestGradientNormReachesHooksAndSummaries(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	est, err := estimator.New(replicate.ModelFn(clippedLine, replicate.Config{Devices: cpuDevices(2)}),
		estimator.RunConfig{ModelDir: dir, LogEvery: -1, SaveSummarySteps: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	log := &stepLog{}
	if err := est.Train(ctx, lineInput(t, xs(12), 4, true), estimator.Hooks(log)); err != nil {
		t.Fatal(err)
	}
	if err := est.Close(); err != nil {
		t.Fatal(err)
	}

	eng, err := replicate.NewEngine(replicate.ModelFn(clippedLine, replicate.Config{Devices: cpuDevices(1)}), replicate.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	want := map[int64]float64{}
	for i, x := range xs(12) {
		if i%4 != 0 {
			continue
		}
		rows := column(x, x+1, x+2, x+3)
		batch := sharding.Batch{Features: map[string]*tensor.Dense{"x": rows}, Labels: map[string]*tensor.Dense{"y": column(x, x+1, x+2, x+3)}}
		if _, err := eng.TrainStep(ctx, batch, replicate.StepHooks{}); err != nil {
			t.Fatal(err)
		}
		norm, ok := eng.GradientNorm()
		if !ok || norm <= 0.5 {
			t.Fatalf("step %d: norm %v (%t): want one above the bound, so that the steps clip", eng.Step(), norm, ok)
		}
		want[eng.Step()] = norm
	}
	if diff := cmp.Diff(want, log.norms, relApprox); diff != "" {
		t.Errorf("norms hooks saw (-engine +hooks):\n%s", diff)
	}
	files, err := tfevents.Files(dir)
	if err != nil || len(files) != 1 {
		t.Fatalf("event files %q, %v; want one", files, err)
	}
	events, err := tfevents.ReadFile(filepath.Clean(files[0]))
	if err != nil {
		t.Fatal(err)
	}
	// Summaries hold float32s (simple_value).
	want32 := map[int64]float64{}
	for step, norm := range want {
		want32[step] = float64(float32(norm))
	}
	summarized := map[int64]float64{}
	for _, e := range events {
		for _, s := range e.Scalars {
			if s.Tag == estimator.GradientNormTag {
				summarized[e.Step] = s.Value
			}
		}
	}
	if diff := cmp.Diff(want32, summarized); diff != "" {
		t.Errorf("%s summaries (-engine +summaries):\n%s", estimator.GradientNormTag, diff)
	}
}
