package estimator_test

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// TestLogLinesRounded: the train and evaluation log lines carry metrics to
// 5 significant digits and speeds as whole numbers (or 3 significant
// digits below 100); training logs after its first step and every
// LogEvery steps.
func TestLogLinesRounded(t *testing.T) {
	var buf bytes.Buffer
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
			return slog.Attr{}
		}
		return a
	}
	est, err := estimator.New(replicate.ModelFn(meanPredModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}),
		estimator.RunConfig{LogEvery: 2, LogInterval: -1, Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: noTime}))})
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	ctx := context.Background()
	if err := est.Train(ctx, scaleInput(t, 1), estimator.Steps(4)); err != nil {
		t.Fatal(err)
	}
	if _, err := est.Evaluate(ctx, scaleInput(t, 1), estimator.EvalSteps(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := est.Evaluate(ctx, scaleInput(t, 1), estimator.EvalSteps(1), estimator.EvalName("holdout")); err != nil {
		t.Fatal(err)
	}
	// A speed: a whole number, or at most 3 significant digits.
	speed := regexp.MustCompile(`(steps|examples)_per_sec=(\d+|0\.0*[1-9]\d{0,2}|[1-9]\d\.\d|[1-9]\.\d{1,2})( |$)`)
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.HasPrefix(line, "msg=train ") {
			if n := len(speed.FindAllString(line, -1)); n != 2 {
				t.Errorf("%q: %d rounded speeds, want 2", line, n)
			}
			line = speed.ReplaceAllString(line, "${1}_per_sec=S$3")
		}
		got = append(got, line)
	}
	// Step k's loss is 0.64^(k-1); after 4 steps c = 2 - 0.8^4 = 1.5904
	// and its loss 0.8^8 = 0.16777216.
	want := []string{
		"msg=train step=1 loss=1 steps_per_sec=S examples_per_sec=S",
		"msg=train step=2 loss=0.64 steps_per_sec=S examples_per_sec=S",
		"msg=train step=4 loss=0.26214 steps_per_sec=S examples_per_sec=S",
		"msg=evaluation step=4 loss=0.16777 mean_pred=1.5904",
		"msg=evaluation step=4 name=holdout loss=0.16777 mean_pred=1.5904",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
}
