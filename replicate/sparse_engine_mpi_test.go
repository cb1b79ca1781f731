//go:build mpi

package replicate_test

import (
	"context"
	"testing"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/internal/mpitest"
	"github.com/towerflow/towerflow/replicate"
)

// TestMPIEmbeddingProcessesEqualOneDevice: under mpirun, 2 processes × 2
// towers train embedModel, rank 1's part of every batch touching no row
// of either table (its sparse gradients empty), in every SparseAsDense
// mode and with the bag table in 3 partitions, one after the other over
// one MPI group: both ranks end with the same variables, bit for bit,
// within acrossTolerance of one device on the whole batches.
func TestMPIEmbeddingProcessesEqualOneDevice(t *testing.T) {
	const np = 2
	var cases []acrossCase
	for _, mode := range []replicate.SparseAsDense{replicate.SparseAsDenseAuto, replicate.SparseAsDenseNever, replicate.SparseAsDenseAlways} {
		cases = append(cases, acrossCase{name: mode.String(), mode: mode, empty: true})
	}
	cases = append(cases, acrossCase{name: "3 partitions", parts: 3, empty: true})
	if mpitest.Child() {
		c, err := collective.MPI()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]map[string][]float64{}
		for _, tc := range cases {
			if got[tc.name], err = acrossRank(context.Background(), c, tc); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
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
	res := mpitest.ReadResults[map[string]map[string][]float64](t, mpitest.Run(t, np), np)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := make([]map[string][]float64, np)
			for r := range got {
				got[r] = res[r][tc.name]
			}
			checkAcross(t, acrossOneDevice(t, tc), got)
		})
	}
}
