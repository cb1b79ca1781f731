//go:build !mpi

package collective

// MPI would join the processes mpirun started; this build has no MPI (see
// ErrNoMPI for how to build with it).
func MPI() (Comm, error) { return nil, ErrNoMPI }
