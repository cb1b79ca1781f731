package estimator_test

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"log/slog"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/wanterr"
)

// batch12 is x = y = 1, 2.
func batch12() estimator.Batch {
	return estimator.Batch{Features: map[string]*tensor.Dense{"x": column(1, 2)}, Labels: map[string]*tensor.Dense{"y": column(1, 2)}}
}

// panicsAfter yields good batches, then panics.
func panicsAfter(good int) estimator.InputFn {
	return func(context.Context) iter.Seq2[estimator.Batch, error] {
		return func(yield func(estimator.Batch, error) bool) {
			for range good {
				if !yield(batch12(), nil) {
					return
				}
			}
			panic("input boom")
		}
	}
}

func panicsWhenCalled(context.Context) iter.Seq2[estimator.Batch, error] { panic("input boom") }

func nilSequence(context.Context) iter.Seq2[estimator.Batch, error] { return nil }

// ignoresStop yields batches without end, whatever yield returns.
func ignoresStop(context.Context) iter.Seq2[estimator.Batch, error] {
	return func(yield func(estimator.Batch, error) bool) {
		for {
			yield(batch12(), nil)
		}
	}
}

// TestInputPanicIsAnError: an input whose function or sequence panics, that
// returns a nil sequence, or that goes on yielding after it was told to
// stop fails Train, Evaluate and Predict with an error naming the input,
// a panic with its stack, and leaves the process running. Predict, whose
// caller has stopped reading when the input goes on, logs it.
func TestInputPanicIsAnError(t *testing.T) {
	inputs := []struct {
		name  string
		input estimator.InputFn
		want  []string
		stack string // "": not a panic
	}{
		{"sequence panics", panicsAfter(1), []string{"input github.com/towerflow/towerflow/estimator_test.", "panicsAfter", "panic during read", "input boom"}, "panicsAfter"},
		{"function panics", panicsWhenCalled, []string{"input github.com/towerflow/towerflow/estimator_test.panicsWhenCalled", "panic during call", "input boom"}, "panicsWhenCalled"},
		{"nil sequence", nilSequence, []string{"input github.com/towerflow/towerflow/estimator_test.nilSequence", "nil sequence"}, ""},
		{"yields after stop", ignoresStop, []string{"input github.com/towerflow/towerflow/estimator_test.ignoresStop", "told to stop", "continued iteration"}, "ignoresStop"},
	}
	runs := []struct {
		name string
		run  func(est *estimator.Estimator, in estimator.InputFn) error
	}{
		{"train", func(est *estimator.Estimator, in estimator.InputFn) error {
			return est.Train(context.Background(), in, estimator.Steps(2))
		}},
		{"evaluate", func(est *estimator.Estimator, in estimator.InputFn) error {
			_, err := est.Evaluate(context.Background(), in, estimator.EvalSteps(2))
			return err
		}},
		{"predict", func(est *estimator.Estimator, in estimator.InputFn) error {
			n := 0
			for _, err := range est.Predict(context.Background(), in) {
				if err != nil {
					return err
				}
				if n++; n == 4 { // two batches
					break
				}
			}
			return nil
		}},
	}
	for _, r := range runs {
		for _, in := range inputs {
			t.Run(r.name+"/"+in.name, func(t *testing.T) {
				var logged bytes.Buffer
				est := newRunEstimator(t, replicated(lineModel, 2), estimator.RunConfig{LogEvery: -1, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
				err := r.run(est, in.input)
				if r.name == "predict" && in.name == "yields after stop" {
					if err != nil {
						t.Fatalf("Predict: %v, want no error once the caller stopped", err)
					}
					err = errors.New(logged.String())
					if !strings.Contains(logged.String(), "level=WARN") {
						t.Errorf("no warning logged:\n%s", &logged)
					}
				}
				wanterr.Mentions(t, err, in.want...)
				if in.stack == "" || r.name == "predict" && in.name == "yields after stop" {
					return
				}
				var pe *estimator.PanicError
				if !errors.As(err, &pe) {
					t.Fatalf("%v: not a *PanicError", err)
				}
				if !strings.Contains(string(pe.Stack), in.stack) {
					t.Errorf("the stack does not show %s:\n%s", in.stack, pe.Stack)
				}
			})
		}
	}
}

// TestPredictLoopPanicIsTheCallers: a panic in the body of a loop over
// Predict is the caller's and stays a panic; Predict does not take it for
// its input's.
func TestPredictLoopPanicIsTheCallers(t *testing.T) {
	est := newEstimator(t, replicated(lineModel, 2))
	defer func() {
		if r := recover(); r != "caller boom" {
			t.Errorf("recovered %v, want the loop's own panic", r)
		}
	}()
	for range est.Predict(context.Background(), lineInput(t, xs(4), 2, false)) {
		panic("caller boom")
	}
	t.Error("the loop did not panic")
}

// panicHook panics in its method named in.
type panicHook struct {
	estimator.BaseHook
	in string
}

func (h panicHook) maybe(method string) {
	if h.in == method {
		panic("hook boom")
	}
}

func (h panicHook) Begin(context.Context, estimator.RunInfo) error { h.maybe("Begin"); return nil }

func (h panicHook) BeforeStep(context.Context, int64) (estimator.StepRequest, error) {
	h.maybe("BeforeStep")
	return estimator.StepRequest{}, nil
}

func (h panicHook) AfterStep(context.Context, estimator.StepResult) (bool, error) {
	h.maybe("AfterStep")
	return false, nil
}

func (h panicHook) End(context.Context, estimator.RunInfo, error) error { h.maybe("End"); return nil }

func (h panicHook) CheckLoss(int64, float64) error { h.maybe("CheckLoss"); return nil }

// TestHookPanicIsAnError: a hook that panics in any of its methods fails
// Train with an error naming the hook's type and the method, a panic with
// its stack.
func TestHookPanicIsAnError(t *testing.T) {
	tests := []struct {
		name string
		hook estimator.TrainOption
		want []string
	}{
		{"Begin", estimator.Hooks(panicHook{in: "Begin"}), []string{"hook estimator_test.panicHook", "panic during Begin", "hook boom"}},
		{"BeforeStep", estimator.Hooks(panicHook{in: "BeforeStep"}), []string{"hook estimator_test.panicHook", "panic during BeforeStep", "hook boom"}},
		{"CheckLoss", estimator.Hooks(panicHook{in: "CheckLoss"}), []string{"hook estimator_test.panicHook", "panic during CheckLoss", "hook boom"}},
		{"AfterStep", estimator.Hooks(panicHook{in: "AfterStep"}), []string{"hook estimator_test.panicHook", "panic during AfterStep", "hook boom"}},
		{"End", estimator.Hooks(panicHook{in: "End"}), []string{"hook estimator_test.panicHook", "panic during End", "hook boom"}},
		{"OnStep", estimator.OnStep(func(int64, float64) { panic("hook boom") }), []string{"OnStep function github.com/towerflow/towerflow/estimator_test.TestHookPanicIsAnError", "panic during AfterStep", "hook boom"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est := newEstimator(t, replicated(lineModel, 2))
			err := est.Train(context.Background(), foreverInput(t, 2), estimator.Steps(2), tc.hook)
			wanterr.Mentions(t, err, tc.want...)
			var pe *estimator.PanicError
			if !errors.As(err, &pe) {
				t.Fatalf("%v: not a *PanicError", err)
			}
			if !strings.Contains(string(pe.Stack), "estimator_test.") {
				t.Errorf("the stack does not show the hook:\n%s", pe.Stack)
			}
		})
	}
}
