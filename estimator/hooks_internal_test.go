package estimator

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// recordHandler keeps the step and steps/s of every record.
type recordHandler struct{ lines *[]logged }

type logged struct {
	Step  int64
	Speed float64
}

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h recordHandler) WithGroup(string) slog.Handler            { return h }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	var l logged
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "step":
			l.Step = a.Value.Int64()
		case "steps_per_sec":
			l.Speed = a.Value.Float64()
		}
		return true
	})
	*h.lines = append(*h.lines, l)
	return nil
}

// TestLoggingHookByTime drives a LoggingHook with a clock that advances a
// fixed time per step: it logs after the run's first step, every Every
// steps, and after any step that ends Interval or more after the last
// line.
func TestLoggingHookByTime(t *testing.T) {
	tests := []struct {
		name     string
		every    int64
		interval time.Duration
		perStep  time.Duration
		start    int64
		steps    int
		want     []logged
	}{
		{name: "first step, then by time", every: 100, interval: 30 * time.Second, perStep: 10 * time.Second, steps: 7,
			want: []logged{{1, 0.1}, {4, 0.1}, {7, 0.1}}},
		{name: "by steps and by time", every: 3, interval: 40 * time.Second, perStep: 20 * time.Second, steps: 6,
			want: []logged{{1, 0.05}, {3, 0.05}, {5, 0.05}, {6, 0.05}}},
		{name: "by steps alone", every: 2, interval: -1, perStep: time.Hour, steps: 5,
			want: []logged{{1, 1.0 / 3600}, {2, 1.0 / 3600}, {4, 1.0 / 3600}}},
		{name: "resumed run", every: 100, interval: time.Minute, perStep: 45 * time.Second, start: 40, steps: 4,
			want: []logged{{41, 0.0222}, {43, 0.0222}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []logged
			clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			h := &LoggingHook{Every: tc.every, Interval: tc.interval, now: func() time.Time { return clock }}
			ctx := context.Background()
			if err := h.Begin(ctx, RunInfo{Logger: slog.New(recordHandler{&got}), StartStep: tc.start, LastStep: -1}); err != nil {
				t.Fatal(err)
			}
			for s := tc.start + 1; s <= tc.start+int64(tc.steps); s++ {
				clock = clock.Add(tc.perStep)
				if _, err := h.AfterStep(ctx, StepResult{Step: s, Loss: 1, Examples: 8}); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b float64) bool { return roundRate(a) == roundRate(b) })); diff != "" {
				t.Errorf("logged (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLogIntervalDefault: the Estimator's logging hook logs by time every
// RunConfig.LogInterval, DefaultLogInterval when it is 0, and by steps
// alone when it is negative.
func TestLogIntervalDefault(t *testing.T) {
	fn := func(s *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
		c := s.MustVariable("c", tensor.Float64, tensor.Shape{1, 1}, towers.Constant(1))
		pred := G.Must(G.Mul(f["x"], c))
		return &model.Spec{Predictions: map[string]*G.Node{"pred": pred}}, nil
	}
	tests := []struct {
		name string
		set  time.Duration
		want time.Duration
	}{
		{"default", 0, DefaultLogInterval},
		{"set", 5 * time.Second, 5 * time.Second},
		{"off", -1, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est, err := New(replicate.ModelFn(fn, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), RunConfig{LogInterval: tc.set})
			if err != nil {
				t.Fatal(err)
			}
			defer est.Close()
			h, ok := est.progressHook().(*LoggingHook)
			if !ok {
				t.Fatalf("progress hook %T, want *LoggingHook", est.progressHook())
			}
			if diff := cmp.Diff([]any{int64(100), tc.want}, []any{h.Every, h.Interval}); diff != "" {
				t.Errorf("every, interval (-want +got):\n%s", diff)
			}
		})
	}
}
