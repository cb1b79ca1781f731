package estimator_test

import (
	"context"
	"errors"
	"iter"
	"os"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/parallel"
)

// Train and Evaluate hold one processor more than the cores while two
// towers run on two cores in cgo kernels (the openblas build; none in the
// pure-Go one), and set GOMAXPROCS back when they return, whether the run
// ends well or fails.
func TestRunsHoldSpareProcessor(t *testing.T) {
	old := runtime.GOMAXPROCS(2)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	if v, ok := os.LookupEnv("GOMAXPROCS"); ok {
		t.Setenv("GOMAXPROCS", v) // restored after the test
		os.Unsetenv("GOMAXPROCS")
	}
	during := 2
	if parallel.ForeignKernels {
		during = 3
	}
	boom := errors.New("input failed on purpose")
	var seen []int
	// seeing records GOMAXPROCS as each batch of in is taken.
	seeing := func(in estimator.InputFn) estimator.InputFn {
		return func(ctx context.Context) iter.Seq2[estimator.Batch, error] {
			return func(yield func(estimator.Batch, error) bool) {
				for b, err := range in(ctx) {
					seen = append(seen, runtime.GOMAXPROCS(0))
					if !yield(b, err) {
						return
					}
				}
			}
		}
	}
	train := func(in estimator.InputFn) func(*estimator.Estimator) error {
		return func(est *estimator.Estimator) error {
			return est.Train(context.Background(), seeing(in), estimator.Steps(3))
		}
	}
	cases := []struct {
		name    string
		run     func(*estimator.Estimator) error
		batches int // read at least
		wantErr bool
	}{
		{name: "train three steps", run: train(foreverInput(t, 4)), batches: 3},
		{name: "train, input fails at step 2", run: train(takeBatches(foreverInput(t, 4), 1, boom)), batches: 1, wantErr: true},
		{name: "evaluate three batches", run: func(est *estimator.Estimator) error {
			_, err := est.Evaluate(context.Background(), seeing(takeBatches(foreverInput(t, 4), 3, nil)))
			return err
		}, batches: 3},
		{name: "evaluate, input fails at batch 2", run: func(est *estimator.Estimator) error {
			_, err := est.Evaluate(context.Background(), seeing(takeBatches(foreverInput(t, 4), 1, boom)))
			return err
		}, batches: 1, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			est := newEstimator(t, replicated(lineModel, 2))
			seen = nil
			err := c.run(est)
			if (err != nil) != c.wantErr {
				t.Fatalf("%v, want an error: %v", err, c.wantErr)
			}
			// The runs read ahead: at least the batches run, maybe more.
			if len(seen) < c.batches {
				t.Errorf("%d batches read, want at least %d", len(seen), c.batches)
			}
			want := make([]int, len(seen))
			for i := range want {
				want[i] = during
			}
			if diff := cmp.Diff(want, seen); diff != "" {
				t.Errorf("GOMAXPROCS as each batch was read (-want +got):\n%s", diff)
			}
			if got := runtime.GOMAXPROCS(0); got != 2 {
				t.Errorf("GOMAXPROCS after the run: %d, want 2 as before", got)
			}
		})
	}
}
