package main

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/runner"
)

// TestSyntheticLearns: without -data the example trains on synthetic rows
// in adult.data's format and its evaluation on synthetic adult.test is far
// above chance (AUC 0.5).
func TestSyntheticLearns(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	line, err := run(context.Background(), options{Flags: runner.Flags{Towers: 2}, rows: 4000, steps: 300, batch: 40, linearLR: 0.05, dnnLR: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	var acc, auc float64
	if _, err := fmt.Sscanf(line, "accuracy=%f auc=%f", &acc, &auc); err != nil {
		t.Fatalf("last line %q: %v", line, err)
	}
	if auc < 0.75 || acc < 0.75 {
		t.Errorf("%s, want auc >= 0.75 and accuracy >= 0.75", line)
	}
}

func TestFlagErrors(t *testing.T) {
	good := options{rows: 100, steps: 10, batch: 40, linearLR: 0.05, dnnLR: 0.05}
	if err := good.check(); err != nil {
		t.Fatalf("good flags: %v", err)
	}
	tests := []struct {
		name string
		edit func(*options)
		want string
	}{
		{"rows", func(o *options) { o.rows = 1 }, "-rows 1: want at least 2"},
		{"steps", func(o *options) { o.steps = -1 }, "-steps -1: want at least 0"},
		{"batch", func(o *options) { o.batch = 0 }, "-batch 0: want at least 1"},
		{"lr", func(o *options) { o.dnnLR = math.NaN() }, "-dnn_lr NaN"},
		{"serve", func(o *options) { o.ModelDir, o.Serve = "m", ":8501" }, "census does not serve"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			tc.edit(&o)
			wanterr.Mentions(t, o.check(), tc.want)
		})
	}
}

// TestMissingData: -data without the UCI files is an error naming the file.
func TestMissingData(t *testing.T) {
	_, err := run(context.Background(), options{data: t.TempDir(), rows: 100, steps: 1, batch: 40, linearLR: 0.05, dnnLR: 0.05})
	wanterr.Mentions(t, err, "adult.data")
}
