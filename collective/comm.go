package collective

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Comm is one rank of a group that runs collectives together.
type Comm interface {
	// Rank is this member's index, 0 ≤ Rank < Size.
	Rank() int
	// Size is the number of members.
	Size() int
	// AllReduceFloat64 replaces buf on every rank with the elementwise sum
	// of every rank's buf.
	AllReduceFloat64(ctx context.Context, buf []float64) error
	// AllReduceFloat32 is AllReduceFloat64 for float32 buffers.
	AllReduceFloat32(ctx context.Context, buf []float32) error
	// Broadcast copies root's buf into every other rank's buf.
	Broadcast(ctx context.Context, root int, buf []byte) error
	// AllGatherInt64 gathers contributions of different lengths, in place:
	// counts[r] is the length of rank r's contribution (every rank passes
	// the same counts; AllGather exchanges them first), buf has their sum
	// of elements, and this rank's contribution is already at its offset,
	// the sum of counts before its rank. On return buf holds every rank's
	// contribution, in rank order. A count may be 0; when all are, nothing
	// is exchanged. MPI's takes at most 2³¹-1 elements in all (its
	// displacements are C ints): more is an error on every rank, before
	// any of them starts it.
	AllGatherInt64(ctx context.Context, buf []int64, counts []int) error
	// AllGatherFloat32 is AllGatherInt64 for float32 buffers.
	AllGatherFloat32(ctx context.Context, buf []float32, counts []int) error
	// AllGatherFloat64 is AllGatherInt64 for float64 buffers.
	AllGatherFloat64(ctx context.Context, buf []float64, counts []int) error
	// Close leaves the group; for MPI it finalizes MPI, after which the
	// process cannot start it again.
	Close() error
}

// ErrNoMPI is returned by MPI in a build without the mpi tag.
var ErrNoMPI = errors.New("collective: towerflow was built without MPI: build with -tags mpi (cgo; needs Debian's openmpi-bin and libopenmpi-dev) and start the processes with mpirun -np N")

// LaunchedSize returns the number of processes mpirun (OpenMPI, or a
// launcher that sets PMI_SIZE) started this process among, or 1 when none
// did: how a program tells that it was asked to train across processes,
// in any build.
func LaunchedSize() int {
	for _, name := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"} {
		if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
			return n
		}
	}
	return 1
}

// Join returns the group the process was launched in: MPI's when mpirun
// started several processes (an error naming the build tag in a build
// without MPI), else a group of one. A program calls it once, at start,
// and Close when done.
func Join() (Comm, error) {
	if n := LaunchedSize(); n > 1 {
		c, err := MPI()
		if err != nil {
			return nil, fmt.Errorf("launched as one of %d processes: %w", n, err)
		}
		return c, nil
	}
	return Local(1)[0], nil
}

// BroadcastBytes copies root's data to every rank, whatever its length:
// root passes its data, the others anything (nil); every rank gets root's.
func BroadcastBytes(ctx context.Context, c Comm, root int, data []byte) ([]byte, error) {
	var n [8]byte
	if c.Rank() == root {
		binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
	}
	if err := c.Broadcast(ctx, root, n[:]); err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint64(n[:])
	if c.Rank() != root {
		data = make([]byte, size)
	}
	if size == 0 {
		return data, nil
	}
	if err := c.Broadcast(ctx, root, data); err != nil {
		return nil, err
	}
	return data, nil
}
