//go:build !mpi

package main

import (
	"testing"

	"github.com/towerflow/towerflow/internal/wanterr"
)

// TestGroupWithoutMPI: started by mpirun, a build without MPI says how to
// build with it.
func TestGroupWithoutMPI(t *testing.T) {
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	for _, workers := range []int{0, 1} {
		_, err := group(workers)
		wanterr.Mentions(t, err, "launched as one of 2 processes", "build with -tags mpi")
	}
}
