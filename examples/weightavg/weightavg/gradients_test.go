package weightavg_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/examples/weightavg/weightavg"
	"github.com/towerflow/towerflow/internal/wanterr"
)

// TestGradientsConverge: the Ray page's program (batch 100, SGD 0.5, 201
// iterations, printed every 20) learns w ≈ 0.1 and b ≈ 0.3 with one to
// four goroutine workers, parts uneven with three.
func TestGradientsConverge(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("workers%d", n), func(t *testing.T) {
			var out strings.Builder
			rep, err := weightavg.RunGradients(testContext(t), weightavg.GradientConfig{Seed: 1, Out: &out}, collective.Local(n))
			if err != nil {
				t.Fatal(err)
			}
			var its []int
			for _, p := range rep.Printed {
				its = append(its, p.Iteration)
			}
			if diff := cmp.Diff([]int{0, 20, 40, 60, 80, 100, 120, 140, 160, 180, 200}, its); diff != "" {
				t.Errorf("printed iterations (-want +got):\n%s", diff)
			}
			last := rep.Printed[len(rep.Printed)-1]
			want := weightavg.Iteration{Iteration: 200, W: linreg.TrueW, B: linreg.TrueB}
			if diff := cmp.Diff(want, last, cmpopts.EquateApprox(0, 1e-4)); diff != "" {
				t.Errorf("last iteration (-want +got):\n%s", diff)
			}
			if lines := strings.Count(out.String(), "\n"); lines != 12 {
				t.Errorf("printed %d lines, want the run and 11 iterations:\n%s", lines, out.String())
			}
		})
	}
}

// TestGradientsIterationIsATrainStep: K workers each holding 1/K of a
// batch (uneven parts included) take, in one iteration, one Train step of
// the same model on the whole batch: the averaged gradient is the
// batch-weighted mean. Every worker holds the driver's weights after it.
func TestGradientsIterationIsATrainStep(t *testing.T) {
	const batch, seed, lr = 10, 3, 0.5
	task, err := weightavg.LinearTask(1, lr)
	if err != nil {
		t.Fatal(err)
	}
	est := taskEstimator(t, task, seed)
	defer est.Close()
	x, y := linreg.Data(batch, seed)
	in, _ := estimator.FromTensors(x, y, estimator.TensorInput{BatchSize: batch})
	if err := est.Train(t.Context(), in, estimator.Steps(1)); err != nil {
		t.Fatal(err)
	}
	want, err := est.Store().Flat()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("workers%d", n), func(t *testing.T) {
			var mu sync.Mutex
			got := map[int][]float64{}
			cfg := weightavg.GradientConfig{Iterations: 1, Batch: batch, LR: lr, Seed: seed, AfterIteration: func(w *weightavg.Worker, _ int) error {
				flat, err := w.Estimator().Store().Flat()
				mu.Lock()
				defer mu.Unlock()
				got[w.Rank()] = flat
				return err
			}}
			if _, err := weightavg.RunGradients(testContext(t), cfg, collective.Local(n)); err != nil {
				t.Fatal(err)
			}
			for r := range n {
				if diff := cmp.Diff(want, got[r], cmpopts.EquateApprox(0, 1e-15)); diff != "" {
					t.Errorf("worker %d's weights after one iteration (-Train step +gradient averaging):\n%s", r, diff)
				}
			}
		})
	}
}

// TestGradientConfigErrors: settings that cannot run are errors naming
// them.
func TestGradientConfigErrors(t *testing.T) {
	_, err := weightavg.RunGradients(t.Context(), weightavg.GradientConfig{Batch: 2}, collective.Local(3))
	wanterr.Mentions(t, err, "batch 2 is smaller than the 3 workers")
	_, err = weightavg.RunGradients(t.Context(), weightavg.GradientConfig{Iterations: -1}, collective.Local(1))
	wanterr.Mentions(t, err, "-1 iterations", "negative")
}
