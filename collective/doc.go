// Package collective is what a group of training processes does together:
// sum buffers across all of them (all-reduce) and copy one member's buffer
// to the others (broadcast). It is the transport under replicate's
// cross-process training and under weight averaging; it moves values, never
// graphs.
//
// A Comm is one member (a rank) of a group. Two implementations:
//
//   - Local(n) makes a group of n ranks inside one process, one per
//     goroutine: for tests, and for workers that run as goroutines (as Ray
//     actors on one machine).
//   - MPI() joins the group of processes that mpirun started, over
//     OpenMPI. It needs the build tag mpi (cgo, Debian's libopenmpi-dev);
//     without it MPI returns an error that says how to build with it.
//
// Every rank calls the same collectives in the same order with buffers of
// the same length. A collective waits for every rank; a cancelled context
// makes it return, and leaves the Comm broken: every later call fails with
// the first error (an MPI collective cannot be taken back half done, so the
// process should stop; mpirun then stops the others).
package collective
