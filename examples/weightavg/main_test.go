package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/runner"
)

// small are the flags of a short run on a small synthetic data set.
func small(t *testing.T, args ...string) options {
	t.Helper()
	o, err := parse(append([]string{"-steps", "40", "-compute_steps", "10", "-batch", "25", "-synthetic_train", "600", "-synthetic_test", "200"}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

var (
	synthetic = regexp.MustCompile(`^no -data: training on a synthetic data set in (MNIST's files|CIFAR-10's binary files) \(\d+ training and \d+ test images of [a-z -]+\) in (\S+), removed once read$`)
	header    = regexp.MustCompile(`^weight averaging: (mlp|resnet20) on (\d+) workers \((goroutines of one process|processes)\), (\d+) rounds × (\d+) local steps \(batch (\d+) per worker\), each round then an average$`)
	progress  = regexp.MustCompile(`^round=(\d+) step=(\d+) loss=\d+\.\d{4} accuracy=(\d\.\d{4}) test_loss=\d+\.\d{4} seconds=\d+\.\d$`)
	summary   = regexp.MustCompile(`^workers=(\d+) compute_steps=(\d+) rounds=(\d+) steps=(\d+) steps_per_sec=\d+\.\d ms_per_step=\d+\.\d\d accuracy=(\d\.\d{4}) test_loss=\d+\.\d{4} seconds=\d+\.\d$`)
)

// TestEndToEnd runs the command's work as `go run ./examples/weightavg`
// with small flags: it says the data is synthetic (and removes it), names
// the run, prints a progress line per evaluated round and a summary.
func TestEndToEnd(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		workers int
		// rounds are the rounds printed.
		rounds []string
		header []string
	}{
		{"mlp, 2 workers", nil, 2, []string{"1", "2", "3", "4"}, []string{"mlp", "2", "goroutines of one process", "4", "10", "25"}},
		{"mlp, 3 workers, evaluated every 25 steps", []string{"-eval_every", "25"}, 3, []string{"3", "4"}, []string{"mlp", "3", "goroutines of one process", "4", "10", "25"}},
		{"resnet20", []string{"-model", "resnet20", "-steps", "2", "-compute_steps", "1", "-batch", "2", "-synthetic_train", "8", "-synthetic_test", "4"}, 2, []string{"1", "2"}, []string{"resnet20", "2", "goroutines of one process", "2", "1", "2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := small(t, tc.args...)
			var out strings.Builder
			rep, err := train(t.Context(), o, collective.Local(tc.workers), &out)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", out.String())
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != 3+len(tc.rounds) {
				t.Fatalf("printed %d lines, want the data, the run, %d rounds and the summary", len(lines), len(tc.rounds))
			}
			m := synthetic.FindStringSubmatch(lines[0])
			if m == nil {
				t.Fatalf("first line %q does not say the data is synthetic", lines[0])
			}
			if _, err := os.Stat(m[2]); !os.IsNotExist(err) {
				t.Errorf("the synthetic data's directory %s: %v, want it removed", m[2], err)
			}
			if h := header.FindStringSubmatch(lines[1]); h == nil {
				t.Errorf("second line %q does not name the run", lines[1])
			} else if diff := cmp.Diff(tc.header, h[1:]); diff != "" {
				t.Errorf("the run's line (-want +got):\n%s", diff)
			}
			var rounds []string
			for _, l := range lines[2 : len(lines)-1] {
				p := progress.FindStringSubmatch(l)
				if p == nil {
					t.Fatalf("line %q is not a round's progress", l)
				}
				rounds = append(rounds, p[1])
			}
			if diff := cmp.Diff(tc.rounds, rounds); diff != "" {
				t.Errorf("rounds printed (-want +got):\n%s", diff)
			}
			s := summary.FindStringSubmatch(lines[len(lines)-1])
			if s == nil {
				t.Fatalf("last line %q is not the summary", lines[len(lines)-1])
			}
			if want := []string{fmt.Sprint(tc.workers), h(o.computeSteps), h(o.steps / o.computeSteps), h(o.steps), fmt.Sprintf("%.4f", rep.Last().Accuracy)}; !cmp.Equal(want, s[1:]) {
				t.Errorf("summary %v, want %v", s[1:], want)
			}
			if o.net == "mlp" && rep.Last().Accuracy < 0.5 {
				t.Errorf("test accuracy %.4f after %d steps of each worker, want above 0.5", rep.Last().Accuracy, o.steps)
			}
		})
	}
}

func h(n int64) string { return fmt.Sprint(n) }

// TestProcesses: one process per worker, as under mpirun: the driver's
// process prints the run, the other nothing.
func TestProcesses(t *testing.T) {
	o := small(t)
	outs := make([]strings.Builder, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, c := range collective.Local(2) {
		wg.Go(func() { _, errs[r] = train(t.Context(), o, []collective.Comm{c}, &outs[r]) })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if outs[1].Len() != 0 {
		t.Errorf("rank 1 printed %q, want nothing", outs[1].String())
	}
	lines := strings.Split(outs[0].String(), "\n")
	if len(lines) < 2 || !strings.Contains(lines[1], "on 2 workers (processes)") {
		t.Errorf("rank 0 printed %q, want the run on 2 workers (processes)", outs[0].String())
	}
}

// TestModelDir: -model_dir gets a checkpoint of the averaged model at the
// last step; a second run into it is an error, as the example does not
// resume, and leaves it as it was.
func TestModelDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	o := small(t, "-model_dir", dir)
	var out strings.Builder
	if _, err := train(t.Context(), o, collective.Local(2), &out); err != nil {
		t.Fatal(err)
	}
	r, err := checkpoint.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Step() != 40 {
		t.Errorf("checkpoint at step %d, want 40", r.Step())
	}
	if !strings.Contains(out.String(), "saved the averaged model in "+r.Path()+"\n") {
		t.Errorf("printed %q, want it to say where it saved the model", out.String())
	}
	_, err = train(t.Context(), o, collective.Local(2), io.Discard)
	wanterr.Mentions(t, err, "worker 0", dir, "already holds checkpoint", "does not resume")
	if latest, _ := checkpoint.Latest(dir); latest != r.Path() {
		t.Errorf("latest checkpoint %s after the refused run, want %s", latest, r.Path())
	}
}

// TestFlagErrors: flags that cannot work together are errors naming them.
func TestFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"-model", "rnn"}, []string{`-model "rnn": want mlp or resnet20`}},
		{[]string{"-steps", "25", "-compute_steps", "10"}, []string{"-steps 25 is not a multiple of -compute_steps 10"}},
		{[]string{"-compute_steps", "0"}, []string{"-compute_steps 0: want at least 1"}},
		{[]string{"-workers", "-1"}, []string{"-workers -1: want 0 to 1024"}},
		{[]string{"-workers", "100000"}, []string{"-workers 100000: want 0 to 1024"}},
		{[]string{"-batch", "-5"}, []string{"-batch -5: want at least 1"}},
		{[]string{"-steps", "-10"}, []string{"-steps -10: want at least 1"}},
		{[]string{"-eval_every", "-1"}, []string{"-eval_every -1: want at least 0"}},
		{[]string{"-lr", "NaN"}, []string{"-lr NaN: want a finite number, at least 0"}},
		{[]string{"-lr", "-1"}, []string{"-lr -1: want a finite number, at least 0"}},
		{[]string{"-optimizer", "rmsprop"}, []string{`-optimizer "rmsprop": want sgd or momentum or adam`}},
		{[]string{"-synthetic_train", "-5"}, []string{"-synthetic_train -5: want at least 1"}},
		{[]string{"-synthetic_test", "-1"}, []string{"-synthetic_test -1: want at least 1"}},
		{[]string{"-synthetic_train", "1000000000000"}, []string{"-synthetic_train 1000000000000 -synthetic_test 1000 needs about 3920000 GB for the data"}},
		{[]string{"-towers", "-1"}, []string{"-towers -1: want 0 to 1024"}},
		{[]string{"-mode", "gradients", "-workers", "-2"}, []string{"-workers -2: want 0 to 1024"}},
		{[]string{"-mode", "gradients", "-steps", "-2"}, []string{"-steps -2: want at least 0"}},
		{[]string{"-mode", "gradients", "-lr", "Inf"}, []string{"-lr +Inf: want a finite number, at least 0"}},
		{[]string{"-mode", "gradients", "-eval_every", "-3"}, []string{"-eval_every -3: want at least 0"}},
		{[]string{"-steps", "ten"}, []string{"invalid value", "-steps"}},
		{[]string{"extra"}, []string{`unexpected arguments ["extra"]`}},
		{[]string{"-mode", "average"}, []string{`-mode "average": want weights or gradients`}},
		{[]string{"-mode", "gradients", "-compute_steps", "5"}, []string{"-mode gradients", "-compute_steps", "belong to -mode weights"}},
		{[]string{"-mode", "gradients", "-batch", "-1"}, []string{"-batch -1: want at least 0"}},
	}
	old := runner.AvailableMemory
	runner.AvailableMemory = func() (int64, bool) { return 24e9, true }
	t.Cleanup(func() { runner.AvailableMemory = old })
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parse(tc.args, io.Discard)
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}

// TestRunErrors: flags that parse but cannot run are errors of the run
// naming what is wrong.
func TestRunErrors(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	missing := filepath.Join(t.TempDir(), "nothing")
	tests := []struct {
		name string
		ctx  context.Context
		args []string
		want []string
	}{
		{"no data", context.Background(), []string{"-data", missing}, []string{missing, "neither train-images-idx3-ubyte"}},
		{"batch larger than the data", context.Background(), []string{"-batch", "400"}, []string{"600 rows make no whole batch of 800"}},
		{"cancelled", cancelled, nil, []string{"round 1", "context canceled"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := train(tc.ctx, small(t, tc.args...), collective.Local(2), io.Discard)
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}

// TestGroup: in one process -workers goroutines (2 by default); under
// mpirun one worker per process, and -workers more than 1 is an error.
func TestGroup(t *testing.T) {
	for _, tc := range []struct{ workers, want int }{{0, 2}, {1, 1}, {3, 3}} {
		comms, err := group(tc.workers)
		if err != nil {
			t.Fatal(err)
		}
		if len(comms) != tc.want || comms[0].Size() != tc.want {
			t.Errorf("-workers %d: %d workers of a group of %d, want %d", tc.workers, len(comms), comms[0].Size(), tc.want)
		}
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	_, err := group(2)
	wanterr.Mentions(t, err, "-workers 2", "mpirun started 2 processes", "leave -workers unset")
}

// TestGradientMode: -mode gradients runs the Ray page's program — the run,
// then the weights every 20 iterations up to 200 — and learns the line.
func TestGradientMode(t *testing.T) {
	o, err := parse([]string{"-mode", "gradients", "-workers", "3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep, err := trainGradients(t.Context(), o, collective.Local(3), &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if want := "gradient averaging: linear model y = 0.1·x + 0.3 on 3 workers, batch 100 split over them, SGD 0.5, 201 iterations"; lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	line := regexp.MustCompile(`^iteration=(\d+) loss=\S+ w=\d\.\d{6} b=\d\.\d{6}$`)
	var its []string
	for _, l := range lines[1:] {
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %q is not an iteration's", l)
		}
		its = append(its, m[1])
	}
	if diff := cmp.Diff(strings.Fields("0 20 40 60 80 100 120 140 160 180 200"), its); diff != "" {
		t.Errorf("iterations printed (-want +got):\n%s", diff)
	}
	last := rep.Printed[len(rep.Printed)-1]
	if diff := cmp.Diff([]float64{0.1, 0.3}, []float64{last.W, last.B}, cmpopts.EquateApprox(0, 1e-4)); diff != "" {
		t.Errorf("last weights (-want +got):\n%s", diff)
	}
}
