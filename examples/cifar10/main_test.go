package main

import (
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/runner"
)

// small is a quick run: ResNet-8 on a small synthetic set, two towers.
func small(modelDir string) options {
	o := defaults
	o.depth, o.steps, o.evalEvery, o.batch = 8, 20, 10, 32
	o.boundaries = []int64{15}
	o.synthetic = [2]int{200, 100}
	o.Towers, o.ModelDir, o.logEvery = 2, modelDir, -1
	return o
}

var evalLine = regexp.MustCompile(`^step=(\d+) accuracy=[01]\.\d{4} top5=[01]\.\d{4} loss=\d+\.\d{4}$`)

// steps returns the steps of out's evaluation lines, and checks that the
// synthetic data set was announced.
func steps(t *testing.T, out string) []string {
	t.Helper()
	if !strings.Contains(out, "no -data: training on a synthetic data set") {
		t.Errorf("the synthetic data set is not announced:\n%s", out)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if m := evalLine.FindStringSubmatch(line); m != nil {
			got = append(got, m[1])
		}
	}
	return got
}

// TestOptionErrors: flags the command cannot run with, out of their range
// or asking for more memory than the machine has, are errors naming them
// and what they may be.
func TestOptionErrors(t *testing.T) {
	old := runner.AvailableMemory
	runner.AvailableMemory = func() (int64, bool) { return 24e9, true }
	t.Cleanup(func() { runner.AvailableMemory = old })
	if err := defaults.check(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	tests := []struct {
		name string
		edit func(*options)
		want string
	}{
		{"depth", func(o *options) { o.depth = 21 }, "-depth 21: ResNet: depth 21 is not 6n + 2"},
		{"depth too small", func(o *options) { o.depth = 2 }, "-depth 2: want 8 to 1202"},
		{"depth too large", func(o *options) { o.depth = 6000002 }, "-depth 6000002: want 8 to 1202"},
		{"batch", func(o *options) { o.batch = 0 }, "-batch 0: want at least 1"},
		{"steps", func(o *options) { o.steps = -1 }, "-steps -1: want at least 1"},
		{"eval_every", func(o *options) { o.evalEvery = 0 }, "-eval_every 0: want at least 1"},
		{"lr", func(o *options) { o.lr = math.NaN() }, "-lr NaN: want a finite number, at least 0"},
		{"weight_decay", func(o *options) { o.weightDecay = -1e-4 }, "-weight_decay -0.0001: want a finite number, at least 0"},
		{"synthetic_train", func(o *options) { o.synthetic[0] = -5 }, "-synthetic_train -5: want at least 128"},
		{"synthetic_test", func(o *options) { o.synthetic[1] = -1 }, "-synthetic_test -1: want at least 1"},
		{"synthetic data too large", func(o *options) { o.synthetic[0] = 1e9 }, "-synthetic_train 1000000000 -synthetic_test 500 needs about 15360 GB for the data; this machine has 24 GB available"},
		{"towers", func(o *options) { o.Towers = -2 }, "-towers -2: want 0 to 1024"},
		{"format", func(o *options) { o.format = "chw" }, `-format: unknown data format "chw" (want nchw, nhwc or auto)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := defaults
			tc.edit(&o)
			wanterr.Mentions(t, o.check(), tc.want)
		})
	}
	if _, err := parseInts("100,x"); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("-boundaries 100,x: err = %v", err)
	}
}
