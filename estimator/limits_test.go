package estimator_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// TestStepLimits: a step count below 1 or a negative MaxSteps is an error
// that trains nothing; a MaxSteps at or below the restored global step
// trains nothing, returns nil and logs that training is skipped; the other
// limits stop where they say. The input has 3 batches, so a limit ignored
// shows as 3 steps more.
func TestStepLimits(t *testing.T) {
	const restored = 2
	tests := []struct {
		name     string
		opts     []estimator.TrainOption
		wantErr  []string // nil: no error
		wantStep int64    // of the latest checkpoint after the run
		skipped  bool     // logs that training is skipped
	}{
		{"Steps(0)", []estimator.TrainOption{estimator.Steps(0)}, []string{"Steps(0)", "at least 1"}, restored, false},
		{"Steps(-1)", []estimator.TrainOption{estimator.Steps(-1)}, []string{"Steps(-1)", "at least 1"}, restored, false},
		{"MaxSteps(-1)", []estimator.TrainOption{estimator.MaxSteps(-1)}, []string{"MaxSteps(-1)"}, restored, false},
		{"MaxSteps(0)", []estimator.TrainOption{estimator.MaxSteps(0)}, nil, restored, true},
		{"MaxSteps below the restored step", []estimator.TrainOption{estimator.MaxSteps(restored - 1)}, nil, restored, true},
		{"MaxSteps at the restored step", []estimator.TrainOption{estimator.MaxSteps(restored)}, nil, restored, true},
		{"MaxSteps at the restored step, with Steps", []estimator.TrainOption{estimator.Steps(2), estimator.MaxSteps(restored)}, nil, restored, true},
		{"MaxSteps one above", []estimator.TrainOption{estimator.MaxSteps(restored + 1)}, nil, restored + 1, false},
		{"Steps(1)", []estimator.TrainOption{estimator.Steps(1)}, nil, restored + 1, false},
		{"Steps before MaxSteps", []estimator.TrainOption{estimator.Steps(1), estimator.MaxSteps(restored + 2)}, nil, restored + 1, false},
		{"no limit", nil, nil, restored + 3, false},
	}
	mdl := replicate.ModelFn(knobModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			first := newRunEstimator(t, mdl, estimator.RunConfig{ModelDir: dir, LogEvery: -1})
			if err := first.Train(context.Background(), foreverInput(t, 2), estimator.Steps(restored)); err != nil {
				t.Fatal(err)
			}
			var logged bytes.Buffer
			est := newRunEstimator(t, mdl, estimator.RunConfig{ModelDir: dir, LogEvery: -1, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
			err := est.Train(context.Background(), lineInput(t, xs(6), 2, true), tc.opts...)
			if tc.wantErr != nil {
				wanterr.Mentions(t, err, tc.wantErr...)
			} else if err != nil {
				t.Fatalf("Train: %v", err)
			}
			if got := latestStep(t, dir); got != tc.wantStep {
				t.Errorf("latest checkpoint at step %d, want %d", got, tc.wantStep)
			}
			if got := strings.Contains(logged.String(), "skipping training"); got != tc.skipped {
				t.Errorf("logged that training is skipped: %t, want %t; the log:\n%s", got, tc.skipped, &logged)
			}
		})
	}
}
