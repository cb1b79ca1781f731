//go:build mpi

package estimator_test

import (
	"errors"
	"testing"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/internal/mpitest"
)

// rankEnd is what a rank of TestMPIProcessesBuildDifferentModels reports.
type rankEnd struct {
	Err  string
	Step int64
}

// TestMPIProcessesBuildDifferentModels is TestProcessesBuildDifferentModels
// under mpirun, every case in one job.
func TestMPIProcessesBuildDifferentModels(t *testing.T) {
	if mpitest.Child() {
		c, err := collective.MPI()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]rankEnd{}
		for _, tc := range differentModels {
			step, err := modelAsRank(c, tc.ranks[c.Rank()], tc.evaluate)
			got[tc.name] = rankEnd{Step: step}
			if err != nil {
				got[tc.name] = rankEnd{Err: err.Error(), Step: step}
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := mpitest.WriteResult(c.Rank(), got); err != nil {
			t.Fatal(err)
		}
		return
	}
	res := mpitest.ReadResults[map[string]rankEnd](t, mpitest.Run(t, 2), 2)
	for _, tc := range differentModels {
		t.Run(tc.name, func(t *testing.T) {
			errs, steps := make([]error, 2), make([]int64, 2)
			for r := range 2 {
				if e := res[r][tc.name].Err; e != "" {
					errs[r] = errors.New(e)
				}
				steps[r] = res[r][tc.name].Step
			}
			checkDifferentModels(t, tc.evaluate, tc.want, errs, steps)
		})
	}
}
