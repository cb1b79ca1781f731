package main

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/runner"
)

// Example_run is what `go run ./examples/linear` prints on stdout (progress
// goes to stderr): the learned line, whatever the number of local devices.
func Example_run() {
	if err := train(context.Background(), options{steps: 400, batch: 100, lr: 0.5, examples: 1000}); err != nil {
		panic(err)
	}
	// Output: w=0.1000 b=0.3000
}

func TestRunErrors(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		ctx   context.Context
		batch int
		is    error
		want  string
	}{
		{"batch size 0", context.Background(), 0, nil, "batch size 0"},
		{"cancelled", cancelled, 100, context.Canceled, "train"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := train(tc.ctx, options{steps: 400, batch: tc.batch, lr: 0.5, examples: 1000})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v does not wrap %v", err, tc.is)
			}
		})
	}
}

// TestFlagErrors: flags out of their range, or asking for more memory than
// the machine has, are refused up front with an error naming the flag and
// what it may be.
func TestFlagErrors(t *testing.T) {
	old := runner.AvailableMemory
	runner.AvailableMemory = func() (int64, bool) { return 8e9, true }
	t.Cleanup(func() { runner.AvailableMemory = old })
	good := options{steps: 400, batch: 100, lr: 0.5, examples: 1000}
	if err := good.check(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	tests := []struct {
		name string
		edit func(*options)
		want string
	}{
		{"negative examples", func(o *options) { o.examples = -5 }, "-examples -5: want at least 1"},
		{"no examples", func(o *options) { o.examples = 0 }, "-examples 0: want at least 1"},
		{"too many examples", func(o *options) { o.examples = 1e12 }, "-examples 1000000000000 needs about 16000 GB for the data; this machine has 8.0 GB available"},
		{"negative steps", func(o *options) { o.steps = -1 }, "-steps -1: want at least 0"},
		{"batch", func(o *options) { o.batch = 0 }, "-batch 0: want at least 1"},
		{"lr", func(o *options) { o.lr = math.NaN() }, "-lr NaN: want a finite number, at least 0"},
		{"negative lr", func(o *options) { o.lr = -0.5 }, "-lr -0.5: want a finite number, at least 0"},
		{"towers", func(o *options) { o.Towers = -1 }, "-towers -1: want 0 to 1024"},
		{"serve", func(o *options) { o.Serve = ":8501" }, "-serve needs -model_dir"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			tc.edit(&o)
			wanterr.Mentions(t, o.check(), tc.want)
		})
	}
}
