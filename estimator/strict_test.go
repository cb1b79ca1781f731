package estimator_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/towers"
)

// scaledModel is knobModel with one more variable, "scale", of the shape
// Params "scale" gives (a vector of 3 by default), which nothing uses.
func scaledModel(t *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
	shape := tensor.Shape{3}
	if s, ok := p["scale"].(tensor.Shape); ok {
		shape = s
	}
	if _, err := t.Variable("scale", tensor.Float64, shape, towers.Constant(1)); err != nil {
		return nil, err
	}
	return knobModel(t, mode, f, l, p)
}

// TestRestoreIsStrict: Train, Evaluate, Predict and Export on a model
// directory whose checkpoint does not hold the model's variables — a
// renamed variable, another shape — fail before they write anything, with
// an error naming the checkpoint and the variables, as TensorFlow's "Key
// not found in checkpoint", instead of training the missing variables from
// fresh values.
func TestRestoreIsStrict(t *testing.T) {
	trainedDir := t.TempDir()
	trained := newRunEstimator(t, replicated(scaledModel, 2), estimator.RunConfig{ModelDir: trainedDir, LogEvery: -1})
	if err := trained.Train(context.Background(), foreverInput(t, 4), estimator.Steps(3)); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(trainedDir, checkpoint.Name(3))
	exports := filepath.Join(t.TempDir(), "exports")
	ops := []estimatorOp{
		{"Train", func(est *estimator.Estimator) error {
			return est.Train(context.Background(), foreverInput(t, 4), estimator.Steps(2))
		}},
		{"Evaluate", func(est *estimator.Estimator) error {
			_, err := est.Evaluate(context.Background(), lineInput(t, xs(4), 4, true))
			return err
		}},
		{"Predict", func(est *estimator.Estimator) error {
			for _, err := range est.Predict(context.Background(), lineInput(t, xs(2), 2, false)) {
				if err != nil {
					return err
				}
			}
			return nil
		}},
		{"Export", func(est *estimator.Estimator) error {
			_, err := est.Export(context.Background(), exports, estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1}}})
			return err
		}},
	}
	for _, tc := range []struct {
		name   string
		params model.Params
		want   []string
	}{
		{"renamed variable", model.Params{"bias": "bias"},
			[]string{`lacks the model's variables "bias" (shape [] dtype float64)`, `variables the model does not make: ["b"]`, "RunConfig.WarmStart"}},
		{"another shape", model.Params{"scale": tensor.Shape{2}},
			[]string{`variable "scale" has shape [2] dtype float64 in the model but shape [3] dtype float64 in checkpoint ` + ckpt}},
		{"another shape and a renamed variable", model.Params{"scale": tensor.Shape{2}, "bias": "bias"},
			[]string{`variable "scale" has shape [2] dtype float64 in the model but shape [3]`, `lacks the model's variables "bias" (shape [] dtype float64)`, `variables the model does not make: ["b"]`}},
	} {
		for _, op := range ops {
			t.Run(tc.name+", "+op.name, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "model")
				if err := os.CopyFS(dir, os.DirFS(trainedDir)); err != nil {
					t.Fatal(err)
				}
				before := dirContents(t, dir)
				var logged bytes.Buffer
				est := newRunEstimator(t, replicated(scaledModel, 2), estimator.RunConfig{ModelDir: dir, LogEvery: -1, Params: tc.params,
					Logger: slog.New(slog.NewTextHandler(&logged, nil))})
				err := op.run(est)
				if err == nil {
					t.Fatalf("%s on a checkpoint without the model's variables: no error", op.name)
				}
				want := append([]string{filepath.Join(dir, checkpoint.Name(3))}, tc.want...)
				for i, w := range want {
					want[i] = strings.ReplaceAll(w, trainedDir, dir)
				}
				wanterr.Mentions(t, err, want...)
				if mm := (*checkpoint.MismatchError)(nil); !errors.As(err, &mm) {
					t.Errorf("%s: error %v is not a *checkpoint.MismatchError", op.name, err)
				}
				if diff := cmp.Diff(before, dirContents(t, dir)); diff != "" {
					t.Errorf("%s changed the model directory (-before +after):\n%s", op.name, diff)
				}
				if _, err := os.Stat(exports); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s made the export directory: %v", op.name, err)
				}
				if strings.Contains(logged.String(), "restored checkpoint") {
					t.Errorf("%s logged a restore that failed:\n%s", op.name, logged.String())
				}
			})
		}
	}
	t.Run("RestoreCheckpoint", func(t *testing.T) {
		est := newRunEstimator(t, replicated(scaledModel, 2), estimator.RunConfig{LogEvery: -1, Params: model.Params{"bias": "bias"}})
		if err := est.RestoreCheckpoint(trainedDir); err != nil {
			t.Fatal(err) // nothing built yet: the build compares
		}
		_, err := est.Evaluate(context.Background(), lineInput(t, xs(4), 4, true))
		var mm *checkpoint.MismatchError
		if !errors.As(err, &mm) {
			t.Fatalf("Evaluate after RestoreCheckpoint = %v, want a *checkpoint.MismatchError", err)
		}
		// Built now: a restore into the model is compared at once.
		err = est.RestoreCheckpoint(trainedDir)
		if !errors.As(err, &mm) {
			t.Fatalf("RestoreCheckpoint into a built model = %v, want a *checkpoint.MismatchError", err)
		}
		wanterr.Mentions(t, err, ckpt, `"bias"`)
	})
}

// TestRestoreWithAnotherOptimizer: optimizer slots are optimizer state,
// not the model's. Slots a new optimizer makes that the checkpoint lacks
// start fresh; slots of the old one are logged, left as they are and saved
// again, so that no checkpointed value is lost.
func TestRestoreWithAnotherOptimizer(t *testing.T) {
	slots := []string{"w/Momentum/momentum", "b/Momentum/momentum"}
	for _, tc := range []struct {
		name             string
		before, after    bool // Params "momentum" of the two runs
		wantWarn         bool
		wantSlotsKept    bool // the restored slots are saved again unchanged
		wantSlotsCreated bool
	}{
		{"Momentum to SGD", true, false, true, true, false},
		{"SGD to Momentum", false, true, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			first := newRunEstimator(t, replicated(knobModel, 2), estimator.RunConfig{ModelDir: dir, LogEvery: -1, Params: model.Params{"momentum": tc.before}})
			if err := first.Train(context.Background(), foreverInput(t, 4), estimator.Steps(2)); err != nil {
				t.Fatal(err)
			}
			var logged bytes.Buffer
			second := newRunEstimator(t, replicated(knobModel, 2), estimator.RunConfig{ModelDir: dir, LogEvery: -1, Params: model.Params{"momentum": tc.after},
				Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			// Batches of 4 and 2 rows: two builds, one warning.
			if err := second.Train(context.Background(), lineInput(t, xs(6), 4, true)); err != nil {
				t.Fatal(err)
			}
			warnings := strings.Count(logged.String(), "neither the model nor its optimizers use")
			if want := map[bool]int{true: 1}[tc.wantWarn]; warnings != want {
				t.Errorf("warned %d times of unused optimizer state, want %d; log:\n%s", warnings, want, logged.String())
			}
			if tc.wantWarn {
				for _, s := range slots {
					if !strings.Contains(logged.String(), s) {
						t.Errorf("the warning does not name %s:\n%s", s, logged.String())
					}
				}
			}
			r, err := checkpoint.Read(dir)
			if err != nil {
				t.Fatal(err)
			}
			if r.Step() != 4 {
				t.Fatalf("latest checkpoint at step %d, want 4", r.Step())
			}
			for _, s := range slots {
				has := slices.Contains(r.Names(), s)
				if has != (tc.wantSlotsKept || tc.wantSlotsCreated) {
					t.Errorf("checkpoint holds %s: %v", s, has)
				}
				if !tc.wantSlotsKept {
					continue
				}
				got, err := r.Tensor(s)
				if err != nil {
					t.Fatal(err)
				}
				want, err := first.VariableValue(s)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want.Data(), got.Data()); diff != "" {
					t.Errorf("%s changed (-restored +saved):\n%s", s, diff)
				}
			}
		})
	}
}

// TestProcessesRestoreWithAnotherOptimizer: across processes, the state of
// an optimizer the model no longer uses stays on every rank alike (rank 0
// restores it, the others take it from rank 0), so that averaging every
// float variable, the slots included, still pairs the ranks' variables;
// the processes train on and agree.
func TestProcessesRestoreWithAnotherOptimizer(t *testing.T) {
	dir := t.TempDir()
	first := ranks(2, acrossRun{Towers: 1, Optimizer: "adam", Dtype: "float64", Rows: 64, Batch: 16, Steps: 3})
	first[0].ModelDir = dir
	for r, res := range runLocal(first) {
		if res.Err != "" {
			t.Fatalf("rank %d: %s", r, res.Err)
		}
	}
	second := ranks(2, acrossRun{Towers: 1, Optimizer: "momentum", Dtype: "float64", Rows: 64, Batch: 16, Steps: 3, Every: 3, Slots: true})
	second[0].ModelDir = dir
	got := runLocal(second)
	for r, res := range got {
		if res.Err != "" {
			t.Fatalf("rank %d: %s", r, res.Err)
		}
		if res.Step != 6 {
			t.Errorf("rank %d: at step %d, want 6", r, res.Step)
		}
	}
	var adam []string
	for name := range got[0].Weights {
		if strings.Contains(name, "/Adam/") {
			adam = append(adam, name)
		}
	}
	if len(adam) == 0 {
		t.Fatalf("rank 0 has no Adam slots: %v", got[0].Weights)
	}
	if diff := cmp.Diff(got[0].Weights, got[1].Weights); diff != "" {
		t.Errorf("the ranks differ after averaging (-rank 0 +rank 1):\n%s", diff)
	}
}

// statModel is knobModel with, in Predict mode only, a non-trainable
// "stat" of the shape Params "stat" gives (3 by default), 7s at first.
func statModel(t *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
	if mode == model.Predict {
		shape := tensor.Shape{3}
		if s, ok := p["stat"].(tensor.Shape); ok {
			shape = s
		}
		if _, err := t.Variable("stat", tensor.Float64, shape, towers.Constant(7), towers.NotTrainable()); err != nil {
			return nil, err
		}
	}
	return knobModel(t, mode, f, l, p)
}

// TestMismatchRefusesEveryStep: once a build has found a model variable
// of another shape than the checkpoint's (made anew, with no trained
// value), no mode runs and no checkpoint is saved, not even a training
// build that does not make the variable: the checkpoint's value survives.
func TestMismatchRefusesEveryStep(t *testing.T) {
	dir := t.TempDir()
	a := newRunEstimator(t, replicated(statModel, 1), estimator.RunConfig{ModelDir: dir, LogEvery: -1})
	predict := func(est *estimator.Estimator) error {
		for _, err := range est.Predict(context.Background(), lineInput(t, xs(2), 2, false)) {
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := a.Train(context.Background(), foreverInput(t, 4), estimator.Steps(1)); err != nil {
		t.Fatal(err)
	}
	if err := predict(a); err != nil { // makes "stat"
		t.Fatal(err)
	}
	if err := a.Train(context.Background(), foreverInput(t, 4), estimator.Steps(1)); err != nil { // saves it
		t.Fatal(err)
	}
	a.Close()
	before := dirContents(t, dir)

	b := newRunEstimator(t, replicated(statModel, 1), estimator.RunConfig{ModelDir: dir, LogEvery: -1, Params: model.Params{"stat": tensor.Shape{2}}})
	type got struct{ Predict, Train, PredictAgain string }
	var g got
	if err := predict(b); err != nil {
		g.Predict = err.Error()
	}
	if err := b.Train(context.Background(), foreverInput(t, 4), estimator.Steps(1)); err != nil {
		g.Train = err.Error()
	}
	if err := predict(b); err != nil {
		g.PredictAgain = err.Error()
	}
	for name, msg := range map[string]string{"Predict": g.Predict, "Train": g.Train, "Predict again": g.PredictAgain} {
		if !strings.Contains(msg, `variable "stat" has shape [2] dtype float64 in the model but shape [3] dtype float64`) {
			t.Errorf("%s: error %q, want one naming stat's shapes", name, msg)
		}
	}
	if diff := cmp.Diff(before, dirContents(t, dir)); diff != "" {
		t.Errorf("the refused runs changed the model directory (-before +after):\n%s", diff)
	}
	r, err := checkpoint.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	stat, err := r.Tensor("stat")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float64{7, 7, 7}, stat.Data()); diff != "" {
		t.Errorf("the checkpoint's stat (-want +got):\n%s", diff)
	}
}
