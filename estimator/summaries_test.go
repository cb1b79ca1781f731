package estimator_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/estimator/tfevents"
	"github.com/towerflow/towerflow/internal/pyevents"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// meanPredModel is scaleModel with an eval metric: the mean prediction.
func meanPredModel(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
	spec, err := scaleModel(tw, mode, f, l, p)
	if err == nil && mode == model.Eval {
		spec.EvalMetrics = map[string]metrics.Bound{"mean_pred": metrics.Mean(spec.Predictions["pred"])}
	}
	return spec, err
}

// summary is an event of a file as the tests compare it: the file
// version, the scalars at a step, or a SessionLog's status at a step. A
// speed is replaced by speedSeen when it is positive and finite: its value
// depends on the clock.
type summary struct {
	Version string
	Step    int64
	Scalars map[string]float64
	Session int
}

const speedSeen = -1

func summaries(version string, step int64, scalars map[string]float64) summary {
	for tag, v := range scalars {
		if (tag == estimator.StepsPerSecTag || tag == estimator.ExamplesPerSecTag) && v > 0 && !math.IsInf(v, 0) {
			scalars[tag] = speedSeen
		}
	}
	return summary{Version: version, Step: step, Scalars: scalars}
}

// eventReader reads the event files of a directory.
type eventReader func(t *testing.T, files []string) [][]summary

// readPython reads with Python's protobuf runtime, which shares no code
// with the writer.
func readPython(t *testing.T, files []string) [][]summary {
	py := pyevents.Python(t)
	read, err := pyevents.Read(py, files...)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]summary
	for _, f := range read {
		var events []summary
		for _, e := range f.Events {
			scalars := map[string]float64{}
			for _, v := range e.Summary {
				if v.Kind != "simple_value" {
					t.Errorf("%s: step %d: %q holds %q, want a simple_value", f.File, e.Step, v.Tag, v.Kind)
				}
				scalars[v.Tag] = float64(v.SimpleValue)
			}
			if e.What != "summary" {
				scalars = nil
			}
			ev := summaries(e.FileVersion, e.Step, scalars)
			ev.Session = e.SessionStatus
			events = append(events, ev)
		}
		out = append(out, events)
	}
	return out
}

// readGo reads with package tfevents.
func readGo(t *testing.T, files []string) [][]summary {
	var out [][]summary
	for _, f := range files {
		read, err := tfevents.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var events []summary
		for _, e := range read {
			var scalars map[string]float64
			for _, s := range e.Scalars {
				if scalars == nil {
					scalars = map[string]float64{}
				}
				scalars[s.Tag] = s.Value
			}
			ev := summaries(e.FileVersion, e.Step, scalars)
			ev.Session = int(e.Session)
			events = append(events, ev)
		}
		out = append(out, events)
	}
	return out
}

// TestSummaries: training writes the loss and speeds into the model
// directory, evaluations their results into eval and eval_<name>, one file
// per directory for the Estimator's life; what Python's protobuf reads
// back is what was meant.
func TestSummaries(t *testing.T) {
	dir := t.TempDir()
	est, err := estimator.New(replicate.ModelFn(meanPredModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}),
		estimator.RunConfig{ModelDir: dir, LogEvery: -1, SaveSummarySteps: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := est.Train(ctx, scaleInput(t, 1), estimator.Steps(5)); err != nil {
		t.Fatal(err)
	}
	in := scaleInput(t, 1)
	if _, err := est.Evaluate(ctx, in, estimator.EvalSteps(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := est.Evaluate(ctx, in, estimator.EvalSteps(1), estimator.EvalName("holdout")); err != nil {
		t.Fatal(err)
	}
	if err := est.Train(ctx, scaleInput(t, 1), estimator.Steps(1)); err != nil {
		t.Fatal(err)
	}
	if err := est.Close(); err != nil {
		t.Fatal(err)
	}

	// With x = 1, y = 2 and c from 1, SGD(0.1) takes 2-c to 0.8^k after k
	// steps: step k's loss is 0.64^(k-1); at step 5 the prediction is
	// c = 2 - 0.8^5 and its loss 0.8^10.
	loss := func(k int) float64 { return math.Pow(0.64, float64(k-1)) }
	version := summary{Version: tfevents.FileVersion}
	speeds := func(k int) map[string]float64 {
		return map[string]float64{estimator.LossTag: loss(k), estimator.StepsPerSecTag: speedSeen, estimator.ExamplesPerSecTag: speedSeen}
	}
	eval := []summary{version, {Step: 5, Scalars: map[string]float64{"loss": math.Pow(0.8, 10), "mean_pred": 2 - math.Pow(0.8, 5)}}}
	want := map[string][]summary{
		// The first step of a run has its loss alone: there is no
		// interval to time yet.
		// Each run begins with a SessionLog START at its first step, so
		// that TensorBoard drops what a crashed run wrote past it.
		".": {version, {Session: 1}, {Step: 1, Scalars: map[string]float64{estimator.LossTag: loss(1)}}, {Step: 2, Scalars: speeds(2)}, {Step: 4, Scalars: speeds(4)},
			{Step: 5, Session: 1}, {Step: 6, Scalars: map[string]float64{estimator.LossTag: loss(6)}}},
		"eval":         eval,
		"eval_holdout": eval,
	}
	for _, reader := range []struct {
		name string
		read eventReader
	}{{"python", readPython}, {"go", readGo}} {
		t.Run(reader.name, func(t *testing.T) {
			for sub, events := range want {
				files, err := tfevents.Files(filepath.Join(dir, sub))
				if err != nil {
					t.Fatal(err)
				}
				if len(files) != 1 {
					t.Fatalf("%s: event files %q, want one", sub, files)
				}
				got := reader.read(t, files)
				// Values are float32s in the file.
				if diff := cmp.Diff(events, got[0], cmpopts.EquateApprox(1e-6, 0), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s (-want +got):\n%s", sub, diff)
				}
			}
		})
	}
}

// TestTrainAndEvaluateSummaries: evaluations during training, and the
// final one, go to the eval directory of EvalSpec.Name.
func TestTrainAndEvaluateSummaries(t *testing.T) {
	dir := t.TempDir()
	est, err := estimator.New(replicate.ModelFn(meanPredModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}),
		estimator.RunConfig{ModelDir: dir, LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	_, err = est.TrainAndEvaluate(context.Background(), estimator.TrainSpec{Input: scaleInput(t, 1), MaxSteps: 5},
		estimator.EvalSpec{Input: scaleInput(t, 1), Steps: 1, EverySteps: 2, Name: "val"})
	if err != nil {
		t.Fatal(err)
	}
	files, err := tfevents.Files(filepath.Join(dir, "eval_val"))
	if err != nil || len(files) != 1 {
		t.Fatalf("eval_val event files %q, %v; want one", files, err)
	}
	events, err := tfevents.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var steps []int64
	for _, e := range events[1:] {
		steps = append(steps, e.Step)
	}
	if diff := cmp.Diff([]int64{2, 4, 5}, steps); diff != "" {
		t.Errorf("evaluation steps (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dir, "eval")); err == nil {
		t.Errorf("named evaluations wrote to eval/ too")
	}
}

// flushCheck reads the model directory's event file after a step.
type flushCheck struct {
	estimator.BaseHook
	t     *testing.T
	dir   string
	after int64
	steps []int64 // the steps of the summaries in the file
}

func (h *flushCheck) AfterStep(_ context.Context, r estimator.StepResult) (bool, error) {
	if r.Step != h.after {
		return false, nil
	}
	files, err := tfevents.Files(h.dir)
	if err != nil || len(files) != 1 {
		h.t.Fatalf("event files %q, %v; want one", files, err)
	}
	events, err := tfevents.ReadFile(files[0])
	if err != nil {
		h.t.Fatal(err)
	}
	for _, e := range events[1:] {
		if e.Session == 0 {
			h.steps = append(h.steps, e.Step)
		}
	}
	return false, nil
}

// TestSummariesFlushWithCheckpoints: while training runs, the event file
// holds every summary up to the latest checkpoint.
func TestSummariesFlushWithCheckpoints(t *testing.T) {
	dir := t.TempDir()
	est, err := estimator.New(replicate.ModelFn(scaleModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}),
		estimator.RunConfig{ModelDir: dir, LogEvery: -1, SaveSummarySteps: 1, SaveCheckpointsSteps: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	check := &flushCheck{t: t, dir: dir, after: 3}
	if err := est.Train(context.Background(), scaleInput(t, 1), estimator.Steps(4), estimator.Hooks(check)); err != nil {
		t.Fatal(err)
	}
	// Step 3's summary is written before the hook runs but is not flushed:
	// the checkpoint at step 2 flushed steps 1 and 2.
	if diff := cmp.Diff([]int64{1, 2}, check.steps); diff != "" {
		t.Errorf("steps in the event file after step 3 (-want +got):\n%s", diff)
	}
}

// TestSummariesOff: negative SaveSummarySteps writes no event files.
func TestSummariesOff(t *testing.T) {
	dir := t.TempDir()
	est, err := estimator.New(replicate.ModelFn(meanPredModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}),
		estimator.RunConfig{ModelDir: dir, LogEvery: -1, SaveSummarySteps: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	ctx := context.Background()
	if err := est.Train(ctx, scaleInput(t, 1), estimator.Steps(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := est.Evaluate(ctx, scaleInput(t, 1), estimator.EvalSteps(1)); err != nil {
		t.Fatal(err)
	}
	files, err := tfevents.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "eval")); len(files) > 0 || err == nil {
		t.Errorf("event files %q and an eval directory (stat: %v), want none", files, err)
	}
}

// TestSummaryErrors: what stops an evaluation's summaries is an error that
// says so.
func TestSummaryErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		opts  []estimator.EvalOption
		want  []string
	}{
		{"eval directory is a file", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "eval"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, nil, []string{"evaluate", "tensorboard summaries", "eval"}},
		{"name with a path separator", func(*testing.T, string) {}, []estimator.EvalOption{estimator.EvalName("../x")}, []string{"evaluate", `"../x"`, "path separator"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			est, err := estimator.New(replicate.ModelFn(meanPredModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}),
				estimator.RunConfig{ModelDir: dir, LogEvery: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer est.Close()
			// A trained model: Evaluate refuses a directory without one.
			if err := est.Train(context.Background(), scaleInput(t, 1), estimator.Steps(1)); err != nil {
				t.Fatal(err)
			}
			in, err := estimator.FromTensors(
				map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(1, 1), tensor.WithBacking([]float64{1}))},
				map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(1, 1), tensor.WithBacking([]float64{2}))},
				estimator.TensorInput{BatchSize: 1})
			if err != nil {
				t.Fatal(err)
			}
			_, err = est.Evaluate(context.Background(), in, tt.opts...)
			wanterr.Mentions(t, err, tt.want...)
		})
	}
}
