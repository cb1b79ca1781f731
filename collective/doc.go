// Package collective is what a group of training processes does together:
// sum buffers across all of them (all-reduce), copy one member's buffer to
// the others (broadcast), and give every member every member's
// contribution, of any length (all-gather: the ids and rows of sparse
// gradients). It is the transport under replicate's cross-process training
// and under weight averaging; it moves values, never graphs.
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
// the same length. An all-gather's contributions differ in length, so every
// rank passes the same counts instead: AllGather exchanges the lengths
// first, in an all-gather of one count per rank, then the data in one
// MPI_Iallgatherv; a rank that contributes nothing (count 0) takes part as
// the others do. A collective waits for every rank; a cancelled context
// makes it return, and leaves the Comm broken: every later call fails with
// the first error (an MPI collective cannot be taken back half done, so the
// process should stop; mpirun then stops the others).
package collective
