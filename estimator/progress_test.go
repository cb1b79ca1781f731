package estimator_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// cancelAt cancels a run's context after the step it names.
type cancelAt struct {
	estimator.BaseHook
	step   int64
	cancel context.CancelFunc
}

func (h cancelAt) AfterStep(_ context.Context, r estimator.StepResult) (bool, error) {
	if r.Step == h.step {
		h.cancel()
	}
	return false, nil
}

// drawings splits a progress bar's output into its drawings (each begins
// with a carriage return), the figures that depend on the clock (speed,
// time left) and the loss replaced by placeholders, trailing blanks and
// the final newline trimmed.
func drawings(out string) []string {
	timed := []struct {
		re   *regexp.Regexp
		with string
	}{
		{regexp.MustCompile(`, [0-9.e+]+ steps/s`), ", R steps/s"},
		{regexp.MustCompile(`, [0-9hms.]+ left`), ", T left"},
		{regexp.MustCompile(`, loss [-0-9.e+]+`), ", loss L"},
	}
	var out2 []string
	for _, d := range strings.Split(out, "\r")[1:] {
		for _, r := range timed {
			d = r.re.ReplaceAllString(d, r.with)
		}
		out2 = append(out2, strings.TrimRight(d, " \n"))
	}
	return out2
}

// TestProgressBar: the bar counts global steps toward the run's last step,
// on a fresh and on a resumed run, and a run cancelled from inside (as
// Ctrl-C cancels the context) leaves it where training stopped.
func TestProgressBar(t *testing.T) {
	one := replicate.Config{Devices: []towers.Device{towers.CPU(0)}}
	finite, err := estimator.FromTensors(
		map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(3, 1), tensor.WithBacking([]float64{1, 1, 1}))},
		map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(3, 1), tensor.WithBacking([]float64{2, 2, 2}))},
		estimator.TensorInput{BatchSize: 1, Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		before      int64 // steps of an earlier run, checkpointed
		opts        []estimator.TrainOption
		cancel      int64 // cancel the context after this global step
		input       estimator.InputFn
		first, last string
	}{
		{name: "fresh", opts: []estimator.TrainOption{estimator.Steps(4)},
			first: "train   0% [                              ] 0/4",
			last:  "train 100% [==============================] 4/4, R steps/s, loss L"},
		{name: "resumed toward MaxSteps", before: 4, opts: []estimator.TrainOption{estimator.MaxSteps(10)},
			first: "train  40% [============                  ] 4/10",
			last:  "train 100% [==============================] 10/10, R steps/s, loss L"},
		{name: "resumed for more Steps", before: 4, opts: []estimator.TrainOption{estimator.Steps(3)},
			first: "train  57% [=================             ] 4/7",
			last:  "train 100% [==============================] 7/7, R steps/s, loss L"},
		{name: "cancelled", opts: []estimator.TrainOption{estimator.Steps(10)}, cancel: 3,
			first: "train   0% [                              ] 0/10",
			last:  "train  30% [=========                     ] 3/10, R steps/s, loss L, stopped"},
		{name: "resumed and cancelled", before: 4, opts: []estimator.TrainOption{estimator.MaxSteps(10)}, cancel: 5,
			first: "train  40% [============                  ] 4/10",
			last:  "train  50% [===============               ] 5/10, R steps/s, stopped"},
		{name: "no step limit", input: finite,
			first: "train step 0",
			last:  "train step 3, R steps/s, loss L"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := estimator.RunConfig{ModelDir: dir, LogEvery: -1, SaveSummarySteps: -1}
			if tt.before > 0 {
				est, err := estimator.New(replicate.ModelFn(scaleModel, one), cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := est.Train(context.Background(), scaleInput(t, 1), estimator.Steps(tt.before)); err != nil {
					t.Fatal(err)
				}
			}
			est, err := estimator.New(replicate.ModelFn(scaleModel, one), cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out bytes.Buffer
			opts := append(tt.opts, estimator.Hooks(&estimator.ProgressBar{Out: &out, Every: 2, Width: 200}, cancelAt{step: tt.cancel, cancel: cancel}))
			input := tt.input
			if input == nil {
				input = scaleInput(t, 1)
			}
			err = est.Train(ctx, input, opts...)
			if wantErr := tt.cancel > 0; wantErr != errors.Is(err, context.Canceled) {
				t.Fatalf("Train: %v, want a cancelled run: %v", err, wantErr)
			}
			if !strings.HasSuffix(out.String(), "\n") {
				t.Errorf("the bar's line does not end: %q", out.String())
			}
			d := drawings(out.String())
			if len(d) < 2 {
				t.Fatalf("%d drawings, want at least the first and the last:\n%q", len(d), out.String())
			}
			if diff := cmp.Diff([]string{tt.first, tt.last}, []string{d[0], d[len(d)-1]}); diff != "" {
				t.Errorf("first and last drawings (-want +got):\n%s\noutput: %q", diff, out.String())
			}
			if tt.cancel > 0 && strings.Contains(out.String(), "100%") {
				t.Errorf("a cancelled run's bar reached 100%%: %q", out.String())
			}
		})
	}
}

// TestProgressBarWidth: every drawing fits the width, dropping the loss,
// the time left and the speed before narrowing the bar.
func TestProgressBarWidth(t *testing.T) {
	tests := []struct {
		width int
		last  string // the last drawing, as drawings writes it
	}{
		{200, "train 100% [==============================] 800/800, R steps/s, loss L"},
		// Widths away from where a speed of more or fewer digits, or a
		// longer loss, would change what fits.
		{70, "train 100% [==============================] 800/800, R steps/s"},
		{55, "train 100% [==============================] 800/800"},
		{40, "train 100% [==========] 800/800"},
		{20, "train 800/800"},
		{10, "train 800/"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.width), func(t *testing.T) {
			est, err := estimator.New(replicate.ModelFn(scaleModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{LogEvery: -1})
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			bar := &estimator.ProgressBar{Out: &out, Every: 400, Width: tt.width}
			if err := est.Train(context.Background(), scaleInput(t, 1), estimator.Steps(800), estimator.Hooks(bar)); err != nil {
				t.Fatal(err)
			}
			for _, d := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\r")[1:] {
				if len(d) > tt.width {
					t.Errorf("drawing %q is %d wide, over %d", d, len(d), tt.width)
				}
			}
			d := drawings(out.String())
			if diff := cmp.Diff(tt.last, d[len(d)-1]); diff != "" {
				t.Errorf("last drawing (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProgressBarKeepsLogLinesApart: with RunConfig.Progress, a log record
// written to the same terminal (here a checkpoint saved each step) blanks
// the bar first and starts a line of its own.
func TestProgressBarKeepsLogLinesApart(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	est, err := estimator.New(replicate.ModelFn(scaleModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}),
		estimator.RunConfig{ModelDir: t.TempDir(), SaveCheckpointsSteps: 1, SaveSummarySteps: -1, Progress: &out, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := est.Train(context.Background(), scaleInput(t, 1), estimator.Steps(3)); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	records := strings.Count(s, "time=")
	if records < 3 {
		t.Fatalf("%d log records, want one a checkpoint at least: %q", records, s)
	}
	// Each record starts its line: after a newline, or after the blanked
	// bar's carriage return.
	if apart := strings.Count(s, "\rtime=") + strings.Count(s, "\ntime="); apart != records || strings.HasPrefix(s, "time=") {
		t.Errorf("%d of %d log records start a line of their own:\n%q", apart, records, s)
	}
	if !strings.Contains(s, "3/3") {
		t.Errorf("the bar did not reach 3/3: %q", s)
	}
}
