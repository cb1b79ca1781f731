//go:build mpi

// Command allreducebench measures collective's MPI all-reduce (MPI_Iallreduce
// polled against a context) against a blocking MPI_Allreduce of the same
// bytes, for buffers of 1 KiB to 64 MiB of float32 and float64:
//
//	go build -tags mpi ./cmd/allreducebench
//	mpirun --allow-run-as-root --oversubscribe -np 2 ./allreducebench
//
// For each size and type it runs a few warm-up calls of each, then rounds
// of a batch of collective calls and a batch of MPI_Allreduce calls (the
// ranks meet at a barrier before each batch), timing every call; rank 0
// prints the median µs per call of each and their ratio.
package main

/*
#cgo pkg-config: ompi-c
#include <mpi.h>

static int allreduce(void *buf, int count, int f32) {
	return MPI_Allreduce(MPI_IN_PLACE, buf, count, f32 ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

static int iallreduce_wait(void *buf, int count, int f32) {
	MPI_Request req;
	int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, count, f32 ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
	if (rc != MPI_SUCCESS) {
		return rc;
	}
	return MPI_Wait(&req, MPI_STATUS_IGNORE);
}

static int barrier(void) { return MPI_Barrier(MPI_COMM_WORLD); }
*/
import "C"

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"github.com/towerflow/towerflow/collective"
)

func main() {
	minBytes := flag.Int("min", 1<<10, "smallest buffer, bytes")
	maxBytes := flag.Int("max", 64<<20, "largest buffer, bytes")
	rounds := flag.Int("rounds", 5, "rounds of a batch of each")
	flag.Parse()
	if err := run(*minBytes, *maxBytes, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "allreducebench:", err)
		os.Exit(1)
	}
}

func run(minBytes, maxBytes, rounds int) (err error) {
	c, err := collective.MPI()
	if err != nil {
		return err
	}
	defer func() {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}()
	ctx := context.Background()
	if c.Rank() == 0 {
		fmt.Printf("ranks=%d GOMAXPROCS=%d rounds=%d; median µs per all-reduce of collective (MPI_Iallreduce polled from Go), a blocking MPI_Allreduce, and MPI_Iallreduce+MPI_Wait in C\n", c.Size(), runtime.GOMAXPROCS(0), rounds)
		fmt.Printf("%10s %7s %6s %12s %12s %12s %7s %7s\n", "bytes", "type", "calls", "collective", "allreduce", "iallr+wait", "ratio", "ratio2")
	}
	for bytes := minBytes; bytes <= maxBytes; bytes *= 2 {
		for _, f32 := range []bool{true, false} {
			var p unsafe.Pointer
			var n int
			var coll func() error
			if f32 {
				buf := make([]float32, bytes/4)
				p, n = unsafe.Pointer(&buf[0]), len(buf)
				coll = func() error { return c.AllReduceFloat32(ctx, buf) }
			} else {
				buf := make([]float64, bytes/8)
				p, n = unsafe.Pointer(&buf[0]), len(buf)
				coll = func() error { return c.AllReduceFloat64(ctx, buf) }
			}
			methods := []func() error{
				coll,
				func() error { return mpiCall("MPI_Allreduce", C.allreduce(p, C.int(n), cBool(f32))) },
				func() error { return mpiCall("MPI_Iallreduce+MPI_Wait", C.iallreduce_wait(p, C.int(n), cBool(f32))) },
			}
			times := make([][]time.Duration, len(methods))
			// The same number of calls on every rank, from the size alone.
			calls := min(max((4<<20)/bytes, 3), 100)
			for range 2 { // warm-up
				for _, f := range methods {
					if err := f(); err != nil {
						return err
					}
				}
			}
			for range rounds {
				for i, f := range methods {
					if err := mpiCall("MPI_Barrier", C.barrier()); err != nil {
						return err
					}
					for range calls {
						start := time.Now()
						if err := f(); err != nil {
							return err
						}
						times[i] = append(times[i], time.Since(start))
					}
				}
			}
			if c.Rank() == 0 {
				m := []time.Duration{median(times[0]), median(times[1]), median(times[2])}
				typ := "float64"
				if f32 {
					typ = "float32"
				}
				fmt.Printf("%10d %7s %6d %12.1f %12.1f %12.1f %7.2f %7.2f\n", bytes, typ, len(times[0]), us(m[0]), us(m[1]), us(m[2]),
					float64(m[0])/float64(m[1]), float64(m[0])/float64(m[2]))
			}
		}
	}
	return nil
}

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func mpiCall(name string, rc C.int) error {
	if rc != C.MPI_SUCCESS {
		return fmt.Errorf("%s: MPI error %d", name, int(rc))
	}
	return nil
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
