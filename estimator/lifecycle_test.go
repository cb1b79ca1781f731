package estimator_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/vartest"
)

// TestClosed: after Close every method that would run the model or load a
// checkpoint fails with ErrClosed, named by the method, instead of
// building the towers again; it changes neither the model directory nor
// the variables. Closing twice is not an error.
func TestClosed(t *testing.T) {
	batch := func(t *testing.T) estimator.Batch {
		return estimator.Batch{
			Features: map[string]*tensor.Dense{"x": column(1, 2)},
			Labels:   map[string]*tensor.Dense{"y": column(1, 2)},
		}
	}
	var dir string // the model directory of the subtest
	ops := append(untrainedOps(t), []estimatorOp{
		{"Train", func(est *estimator.Estimator) error {
			return est.Train(context.Background(), foreverInput(t, 4), estimator.Steps(1))
		}},
		{"TrainAndEvaluate", func(est *estimator.Estimator) error {
			_, err := est.TrainAndEvaluate(context.Background(), estimator.TrainSpec{Input: foreverInput(t, 4), Steps: 1}, estimator.EvalSpec{Input: lineInput(t, xs(4), 4, true)})
			return err
		}},
		{"RestoreCheckpoint", func(est *estimator.Estimator) error {
			return est.RestoreCheckpoint(dir)
		}},
		{"ComputeGradients", func(est *estimator.Estimator) error {
			_, err := est.ComputeGradients(context.Background(), batch(t))
			return err
		}},
		{"ApplyGradients", func(est *estimator.Estimator) error {
			return est.ApplyGradients(context.Background(), estimator.Gradients{Flat: []float64{0, 0}})
		}},
	}...)
	prefix := map[string]string{
		"Evaluate": "evaluate: ", "Predict": "predict: ", "PredictBatches": "predict: ", "Export": "export: ",
		"Train": "train: ", "TrainAndEvaluate": "train and evaluate: ", "RestoreCheckpoint": "restore checkpoint: ",
		"ComputeGradients": "compute gradients: ", "ApplyGradients": "apply gradients: ",
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			dir = t.TempDir()
			est := newRunEstimator(t, replicated(knobModel, 2), estimator.RunConfig{ModelDir: dir, LogEvery: -1, SaveSummarySteps: -1})
			if err := est.Train(context.Background(), foreverInput(t, 4), estimator.Steps(2)); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if err := est.Close(); err != nil {
					t.Fatalf("Close #%d: %v", i+1, err)
				}
			}
			before, vars := dirContents(t, dir), vartest.Variables(t, est)
			err := op.run(est)
			if !errors.Is(err, estimator.ErrClosed) || !strings.HasPrefix(err.Error(), prefix[op.name]) {
				t.Errorf("%s after Close = %v, want an error starting %q wrapping ErrClosed", op.name, err, prefix[op.name])
			}
			if diff := cmp.Diff(before, dirContents(t, dir)); diff != "" {
				t.Errorf("%s after Close changed the model directory (-before +after):\n%s", op.name, diff)
			}
			if diff := cmp.Diff(vars, vartest.Variables(t, est)); diff != "" {
				t.Errorf("%s after Close changed the variables (-before +after):\n%s", op.name, diff)
			}
		})
	}
}

// TestEvaluateUnrecorded: metrics computed but not recorded in the model
// directory (its eval history or event file cannot be written) are
// returned together with the error, which wraps the write's.
func TestEvaluateUnrecorded(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(t *testing.T, dir string)
		want  error
	}{
		{"eval history is a directory", func(t *testing.T, dir string) {
			replaceWithDir(t, filepath.Join(dir, estimator.EvalHistoryFile))
		}, syscall.EISDIR},
		{"eval summary directory is a file", func(t *testing.T, dir string) {
			path := filepath.Join(dir, estimator.EvalDir(""))
			if err := os.RemoveAll(path); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, syscall.ENOTDIR},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := estimator.RunConfig{ModelDir: dir, LogEvery: -1}
			est := newRunEstimator(t, replicated(knobModel, 2), cfg)
			if err := est.Train(context.Background(), foreverInput(t, 4), estimator.Steps(2)); err != nil {
				t.Fatal(err)
			}
			want, err := est.Evaluate(context.Background(), lineInput(t, xs(4), 4, true))
			if err != nil {
				t.Fatal(err)
			}
			if err := est.Close(); err != nil {
				t.Fatal(err)
			}
			tc.spoil(t, dir)
			got, err := newRunEstimator(t, replicated(knobModel, 2), cfg).Evaluate(context.Background(), lineInput(t, xs(4), 4, true))
			if !errors.Is(err, tc.want) {
				t.Errorf("Evaluate error = %v, want one wrapping %v", err, tc.want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("metrics returned with the error (-want +got):\n%s", diff)
			}
		})
	}
}

// replaceWithDir replaces the file at path by an empty directory.
func replaceWithDir(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestClosedWhilePredicting: PredictBatches leaves the Estimator unlocked
// between batches, so its loop body may Close it; the next batch is then
// ErrClosed rather than towers built again.
func TestClosedWhilePredicting(t *testing.T) {
	est := newRunEstimator(t, replicated(knobModel, 2), estimator.RunConfig{LogEvery: -1})
	var batches int
	var err error
	for _, err = range est.PredictBatches(context.Background(), lineInput(t, xs(4), 2, false)) {
		if err != nil {
			break
		}
		batches++
		if cerr := est.Close(); cerr != nil {
			t.Fatal(cerr)
		}
	}
	if batches != 1 || !errors.Is(err, estimator.ErrClosed) {
		t.Errorf("PredictBatches closed after its first batch: %d batches, then %v; want 1, then an error wrapping ErrClosed", batches, err)
	}
}
