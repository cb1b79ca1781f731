package replicate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// TestPeerTimeout: when one process stops taking part (stopped, hung, its
// network silent), every live process stops once Config.PeerTimeout has
// passed in a collective phase, with a PeerError that says so and wraps
// the deadline, instead of waiting for ever. Rank 2 of three takes part in
// the start's sync of variables, then no more.
func TestPeerTimeout(t *testing.T) {
	const timeout = 50 * time.Millisecond
	batch := sharding.Batch{Features: map[string]*tensor.Dense{"x": column(1, 2)}, Labels: map[string]*tensor.Dense{"y": column(3, 4)}}
	for _, tc := range []struct {
		name  string
		phase func(ctx context.Context, e *replicate.Engine) error
	}{
		{"train step", func(ctx context.Context, e *replicate.Engine) error {
			_, err := e.TrainStep(ctx, batch, replicate.StepHooks{})
			return err
		}},
		{"sync of variables", func(ctx context.Context, e *replicate.Engine) error { return e.SyncFromRoot(ctx) }},
		{"sum of metrics", func(ctx context.Context, e *replicate.Engine) error {
			if _, err := e.EvalStep(ctx, batch); err != nil {
				return err
			}
			return e.ReduceMetrics(ctx, []float64{1})
		}},
		{"leave", func(ctx context.Context, e *replicate.Engine) error { return e.Leave(ctx, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms := collective.Local(3)
			errs := make([]error, 3)
			var wg sync.WaitGroup
			for r, c := range comms {
				wg.Go(func() {
					cfg := replicate.Config{Devices: towers.CPUs(1), Optimizer: optimizers.SGD(0.1), Processes: c, PeerTimeout: timeout}
					e, err := replicate.NewEngine(replicate.ModelFn(constModel, cfg), replicate.EngineConfig{})
					if err != nil {
						errs[r] = err
						return
					}
					defer e.Close()
					ctx := context.Background()
					e.Open()
					if errs[r] = e.SyncFromRoot(ctx); errs[r] != nil || r == 2 {
						return
					}
					errs[r] = tc.phase(ctx, e)
				})
			}
			wg.Wait()
			if errs[2] != nil {
				t.Fatalf("rank 2: %v", errs[2])
			}
			for r, err := range errs[:2] {
				pe, ok := errors.AsType[*replicate.PeerError](err)
				if !ok {
					t.Errorf("rank %d: %v, want a PeerError", r, err)
					continue
				}
				if d := cmp.Diff(&replicate.PeerError{Rank: -1, Failed: true, Timeout: timeout}, pe, cmpopts.IgnoreUnexported(replicate.PeerError{})); d != "" {
					t.Errorf("rank %d: PeerError (-want +got):\n%s", r, d)
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("rank %d: %v does not wrap context.DeadlineExceeded", r, err)
				}
			}
		})
	}
}
