//go:build !mpi

package collective_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/collective"
)

// TestJoinWithoutMPI: in the default build a process mpirun started among
// several gets an error that says how to build with MPI; one started alone
// (or by mpirun -np 1) trains alone.
func TestJoinWithoutMPI(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		wantSize  int
		wantError bool
	}{
		{"alone", nil, 1, false},
		{"mpirun -np 1", map[string]string{"OMPI_COMM_WORLD_SIZE": "1"}, 1, false},
		{"mpirun -np 2", map[string]string{"OMPI_COMM_WORLD_SIZE": "2"}, 2, true},
		{"another launcher", map[string]string{"PMI_SIZE": "3"}, 3, true},
		{"garbage", map[string]string{"OMPI_COMM_WORLD_SIZE": "two"}, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OMPI_COMM_WORLD_SIZE", "")
			t.Setenv("PMI_SIZE", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if got := collective.LaunchedSize(); got != tc.wantSize {
				t.Errorf("LaunchedSize() = %d, want %d", got, tc.wantSize)
			}
			c, err := collective.Join()
			if tc.wantError {
				if !errors.Is(err, collective.ErrNoMPI) || !strings.Contains(err.Error(), "-tags mpi") {
					t.Errorf("Join() error %v, want ErrNoMPI saying how to build with MPI", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff([2]int{0, 1}, [2]int{c.Rank(), c.Size()}); d != "" {
				t.Errorf("Join() alone: rank and size (-want +got):\n%s", d)
			}
		})
	}
}
