//go:build mpi

// Command allreducebench measures collective's MPI all-reduce against a
// plain blocking MPI_Allreduce of the same bytes, for buffers of 1 KiB to
// 64 MiB of float32 and float64:
//
//	go build -tags mpi ./cmd/allreducebench
//	mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 ./allreducebench
//
// Columns, median µs per call:
//
//   - comm: Comm.AllReduceFloat32/64 on one buffer (MPI_Iallreduce,
//     polled against a context). A training step across processes does
//     exactly this: its gradient sums lie in one slice per float type (the
//     build's arena, replicate/arena.go), all-reduced in place in buckets
//     of Config.BucketBytes, 64 MiB by default.
//   - fused: collective.Fusion over the same bytes in 64 separate slices of
//     varied sizes, packed into a bucket and unpacked again: what weight
//     averaging and metric states go through.
//   - allreduce: MPI_Allreduce in C.
//
// For each size and type it runs a few warm-up calls of each, then rounds
// of a batch of calls of each (the ranks meet at a barrier before each
// batch), timing every call; rank 0 prints the medians and the ratios to
// the plain call.
package main

/*
#cgo pkg-config: ompi-c
#include <mpi.h>

static int allreduce(void *buf, int count, int f32) {
	return MPI_Allreduce(MPI_IN_PLACE, buf, count, f32 ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
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
		fmt.Printf("ranks=%d GOMAXPROCS=%d rounds=%d; median µs per all-reduce of collective's Comm, of collective.Fusion over %d slices, and of a plain MPI_Allreduce in C; ratios to the plain one\n", c.Size(), runtime.GOMAXPROCS(0), rounds, nSlices)
		fmt.Printf("%10s %7s %6s %12s %12s %12s %7s %7s\n", "bytes", "type", "calls", "comm", "fused", "allreduce", "comm/ar", "fused/ar")
	}
	for bytes := minBytes; bytes <= maxBytes; bytes *= 2 {
		for _, f32 := range []bool{true, false} {
			var p unsafe.Pointer
			var n int
			var coll func() error
			var segs []collective.Segment
			if f32 {
				buf := make([]float32, bytes/4)
				p, n = unsafe.Pointer(&buf[0]), len(buf)
				coll = func() error { return c.AllReduceFloat32(ctx, buf) }
				for _, k := range split(n) {
					segs = append(segs, collective.Segment{Data: make([]float32, k), Scale: 1})
				}
			} else {
				buf := make([]float64, bytes/8)
				p, n = unsafe.Pointer(&buf[0]), len(buf)
				coll = func() error { return c.AllReduceFloat64(ctx, buf) }
				for _, k := range split(n) {
					segs = append(segs, collective.Segment{Data: make([]float64, k), Scale: 1})
				}
			}
			var fusion collective.Fusion
			methods := []func() error{
				coll,
				func() error { return fusion.AllReduce(ctx, c, segs) },
				func() error { return mpiCall("MPI_Allreduce", C.allreduce(p, C.int(n), cBool(f32))) },
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
					float64(m[0])/float64(m[2]), float64(m[1])/float64(m[2]))
			}
		}
	}
	return nil
}

// nSlices is how many slices the fused all-reduce packs.
const nSlices = 64

// split divides n elements into at most nSlices parts of varied sizes, as a
// model's variables are: part i is about twice part i-1 within each group
// of eight, the last taking what is left.
func split(n int) []int {
	var parts []int
	left := n
	for i := 0; i < nSlices-1 && left > 0; i++ {
		k := max(1, n/(nSlices*8)*(1<<(i%8))/16)
		k = min(k, left)
		parts = append(parts, k)
		left -= k
	}
	if left > 0 {
		parts = append(parts, left)
	}
	return parts
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
