//go:build mpi

package replicate_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/internal/mpitest"
)

// TestMPIProcessesMustBuildTheSameModel runs mismatchCases under mpirun:
// the cases of np ranks one after the other in one job, over one MPI Comm,
// which a mismatch leaves usable (every rank ran the same collectives).
// Before the check, other variable names or optimizers trained on to
// different results, and more variables on one rank aborted the job in MPI
// (MPI_ERR_TRUNCATE).
func TestMPIProcessesMustBuildTheSameModel(t *testing.T) {
	for _, np := range []int{2, 3} {
		var cases []mismatchCase
		for _, tc := range mismatchCases {
			if len(tc.ranks) == np {
				cases = append(cases, tc)
			}
		}
		t.Run("np="+strconv.Itoa(np), func(t *testing.T) {
			if mpitest.Child() {
				c, err := collective.MPI()
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]rankOutcome{}
				for _, tc := range cases {
					got[tc.name] = asProcess(context.Background(), c, tc.ranks[c.Rank()], tc.steps)
				}
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				if err := mpitest.WriteResult(c.Rank(), got); err != nil {
					t.Fatal(err)
				}
				return
			}
			res := mpitest.ReadResults[map[string]rankOutcome](t, mpitest.Run(t, np), np)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					got := make([]rankOutcome, np)
					for r := range got {
						got[r] = res[r][tc.name]
					}
					checkMismatch(t, tc, got)
				})
			}
		})
	}
}
