package estimator_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/parallel"
)

// Train holds one processor more than the cores while two towers train on
// two cores in cgo kernels (the openblas build; none in the pure-Go one),
// and sets GOMAXPROCS back when it returns, whether the run ends well or
// fails.
func TestTrainHoldsSpareProcessor(t *testing.T) {
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
	cases := []struct {
		name    string
		input   estimator.InputFn
		wantErr bool
	}{
		{name: "three steps", input: foreverInput(t, 4)},
		{name: "input fails at step 2", input: takeBatches(foreverInput(t, 4), 1, boom), wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			est := newEstimator(t, replicated(lineModel, 2))
			var seen []int
			err := est.Train(context.Background(), c.input, estimator.Steps(3),
				estimator.OnStep(func(int64, float64) { seen = append(seen, runtime.GOMAXPROCS(0)) }))
			if (err != nil) != c.wantErr {
				t.Fatalf("Train: %v, want an error: %v", err, c.wantErr)
			}
			want := []int{during, during, during}
			if c.wantErr {
				want = want[:1]
			}
			if diff := cmp.Diff(want, seen); diff != "" {
				t.Errorf("GOMAXPROCS at each step (-want +got):\n%s", diff)
			}
			if got := runtime.GOMAXPROCS(0); got != 2 {
				t.Errorf("GOMAXPROCS after Train: %d, want 2 as before", got)
			}
		})
	}
}
