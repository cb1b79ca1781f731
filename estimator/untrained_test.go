package estimator_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/towerflow/towerflow/internal/vartest"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/wanterr"
)

// estimatorOp is one of the Estimator's calls on a model directory.
type estimatorOp struct {
	name string
	run  func(est *estimator.Estimator) error
}

// untrainedOps are the Estimator's calls that need a trained model.
func untrainedOps(t *testing.T) []estimatorOp {
	return []estimatorOp{
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
		{"PredictBatches", func(est *estimator.Estimator) error {
			for _, err := range est.PredictBatches(context.Background(), lineInput(t, xs(2), 2, false)) {
				if err != nil {
					return err
				}
			}
			return nil
		}},
		{"Export", func(est *estimator.Estimator) error {
			_, err := est.Export(context.Background(), t.TempDir(), estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1}}})
			return err
		}},
	}
}

// TestNoTrainedModel: Evaluate, Predict and Export with a model directory
// that has no checkpoint fail with ErrNotTrained naming the directory, as
// TensorFlow's "Could not find trained model in model_dir", instead of
// using freshly initialised variables; they write nothing there. Without a
// model directory, fresh variables are what the caller asked for.
func TestNoTrainedModel(t *testing.T) {
	for _, op := range untrainedOps(t) {
		for _, tc := range []struct {
			name    string
			dir     func(t *testing.T) string
			wantErr bool
		}{
			{"empty model directory", func(t *testing.T) string { return t.TempDir() }, true},
			{"missing model directory", func(t *testing.T) string { return filepath.Join(t.TempDir(), "model") }, true},
			{"no model directory", func(*testing.T) string { return "" }, false},
		} {
			if op.name == "Export" && tc.name == "no model directory" {
				continue // TestExportNeedsTrainedVariables
			}
			t.Run(op.name+", "+tc.name, func(t *testing.T) {
				dir := tc.dir(t)
				var before map[string]string
				if _, err := os.Stat(dir); err == nil {
					before = dirContents(t, dir)
				}
				est := newRunEstimator(t, replicated(knobModel, 2), estimator.RunConfig{ModelDir: dir, LogEvery: -1})
				err := op.run(est)
				if !tc.wantErr {
					if err != nil {
						t.Fatal(err)
					}
					return
				}
				if !errors.Is(err, estimator.ErrNotTrained) {
					t.Fatalf("%s = %v, want an error wrapping ErrNotTrained", op.name, err)
				}
				wanterr.Mentions(t, err, dir, "no checkpoint")
				var after map[string]string
				if _, err := os.Stat(dir); err == nil {
					after = dirContents(t, dir)
				}
				if diff := cmp.Diff(before, after); diff != "" {
					t.Errorf("%s changed the model directory (-before +after):\n%s", op.name, diff)
				}
			})
		}
	}
}

// TestRestoredModelIsTrained: a checkpoint restored by RestoreCheckpoint
// into an Estimator whose model directory has none is the trained model
// Evaluate, Predict and Export use.
func TestRestoredModelIsTrained(t *testing.T) {
	trainedDir := t.TempDir()
	trained := newRunEstimator(t, replicated(knobModel, 2), estimator.RunConfig{ModelDir: trainedDir, LogEvery: -1})
	if err := trained.Train(context.Background(), foreverInput(t, 4), estimator.Steps(3)); err != nil {
		t.Fatal(err)
	}
	for _, op := range untrainedOps(t) {
		t.Run(op.name, func(t *testing.T) {
			est := newRunEstimator(t, replicated(knobModel, 2), estimator.RunConfig{ModelDir: t.TempDir(), LogEvery: -1})
			if err := est.RestoreCheckpoint(trainedDir); err != nil {
				t.Fatal(err)
			}
			if err := op.run(est); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(vartest.Variables(t, trained), vartest.Variables(t, est)); diff != "" {
				t.Errorf("variables (-trained +restored):\n%s", diff)
			}
		})
	}
}

// TestExportNeedsTrainedVariables: without a model directory, Export
// needs steps trained by the Estimator or a restored checkpoint, else it
// fails with ErrNotTrained instead of exporting initial variables, unless
// told AllowUntrained.
func TestExportNeedsTrainedVariables(t *testing.T) {
	serving := estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1}}}
	tests := []struct {
		name    string
		prepare func(t *testing.T, est *estimator.Estimator)
		opts    []estimator.ExportOption
		wantErr bool
	}{
		{"nothing trained", func(*testing.T, *estimator.Estimator) {}, nil, true},
		{"nothing trained, AllowUntrained", func(*testing.T, *estimator.Estimator) {}, []estimator.ExportOption{estimator.AllowUntrained()}, false},
		{"trained", func(t *testing.T, est *estimator.Estimator) {
			if err := est.Train(context.Background(), foreverInput(t, 4), estimator.Steps(2)); err != nil {
				t.Fatal(err)
			}
		}, nil, false},
		{"restored", func(t *testing.T, est *estimator.Estimator) {
			trainedDir := t.TempDir()
			trained := newRunEstimator(t, replicated(knobModel, 2), estimator.RunConfig{ModelDir: trainedDir, LogEvery: -1})
			if err := trained.Train(context.Background(), foreverInput(t, 4), estimator.Steps(2)); err != nil {
				t.Fatal(err)
			}
			if err := est.RestoreCheckpoint(trainedDir); err != nil {
				t.Fatal(err)
			}
		}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est := newRunEstimator(t, replicated(knobModel, 2), estimator.RunConfig{LogEvery: -1})
			tc.prepare(t, est)
			base := t.TempDir()
			_, err := est.Export(context.Background(), base, serving, tc.opts...)
			if !tc.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, estimator.ErrNotTrained) {
				t.Fatalf("Export = %v, want an error wrapping ErrNotTrained", err)
			}
			if diff := cmp.Diff(map[string]string{".": "dir"}, dirContents(t, base)); diff != "" {
				t.Errorf("Export wrote (-want +got):\n%s", diff)
			}
		})
	}
}
