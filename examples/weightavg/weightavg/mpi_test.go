//go:build mpi

package weightavg_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/examples/weightavg/weightavg"
	"github.com/towerflow/towerflow/internal/mpitest"
)

// mpiResult is what a rank of TestMPI reports.
type mpiResult struct {
	// Values are the rank's model values after each round.
	Values []map[string][]float64
	Rounds []weightavg.Round
	Err    string
	Peer   *weightavg.PeerError
}

// TestMPI: under mpirun, one worker per process, after every round every
// rank holds the same model, after the first the mean of what each would
// have alone; a rank whose input fails stops the job's Runs with its own
// error and, on the others, a PeerError naming it.
func TestMPI(t *testing.T) {
	const steps, rounds, seed = 3, 2, 7
	for _, np := range []int{2, 3} {
		for _, fail := range []bool{false, true} {
			t.Run(fmt.Sprintf("np=%d failing=%v", np, fail), func(t *testing.T) {
				task := mlpTask(t, 16, 10, "momentum")
				if fail {
					task = failingInput(task, 1, 2)
				}
				if mpitest.Child() {
					mpiWorker(t, task, weightavg.Config{ComputeSteps: steps, Rounds: rounds, Seed: seed})
					return
				}
				res := mpitest.ReadResults[mpiResult](t, mpitest.Run(t, np), np)
				if fail {
					if res[1].Err == "" || res[1].Peer != nil {
						t.Errorf("the failing rank's error %q, want its own", res[1].Err)
					}
					for r, got := range res {
						if r != 1 && (got.Peer == nil || *got.Peer != (weightavg.PeerError{Worker: 1, Round: 2})) {
							t.Errorf("rank %d's error %q, want a PeerError naming worker 1 in round 2", r, got.Err)
						}
						if len(got.Values) != 1 {
							t.Errorf("rank %d finished %d rounds, want 1", r, len(got.Values))
						}
					}
					return
				}
				var each []map[string][]float64
				for w := range np {
					each = append(each, alone(t, task, seed, 1, w, np, steps))
				}
				want := mean(each)
				for r, got := range res {
					if got.Err != "" {
						t.Fatalf("rank %d: %s", r, got.Err)
					}
					if diff := cmp.Diff(want, got.Values[0], cmpopts.EquateApprox(1e-6, 1e-9)); diff != "" {
						t.Errorf("rank %d after round 1 (-mean of the workers alone +got):\n%s", r, diff)
					}
					if diff := cmp.Diff(res[0].Values, got.Values); diff != "" {
						t.Errorf("rank %d's models (-rank 0's +rank %d's):\n%s", r, r, diff)
					}
				}
				if len(res[0].Rounds) != rounds || res[1].Rounds != nil {
					t.Errorf("rank 0 reported %d rounds, rank 1 %d: want %d and none", len(res[0].Rounds), len(res[1].Rounds), rounds)
				}
			})
		}
	}
}

// mpiWorker is one rank of TestMPI: a Run of this process's worker.
func mpiWorker(t *testing.T, task weightavg.Task, cfg weightavg.Config) {
	c, err := collective.Join()
	if err != nil {
		t.Fatal(err)
	}
	var res mpiResult
	cfg.AfterRound = func(w *weightavg.Worker, _ int) error {
		res.Values = append(res.Values, modelValues(t, w.Estimator().Store()))
		return nil
	}
	rep, err := weightavg.Run(testContext(t), task, cfg, []collective.Comm{c})
	if err != nil {
		res.Err = err.Error()
		var pe *weightavg.PeerError
		if errors.As(err, &pe) {
			res.Peer = pe
		}
	}
	if rep != nil {
		res.Rounds = rep.Rounds
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mpitest.WriteResult(c.Rank(), res); err != nil {
		t.Fatal(err)
	}
}
