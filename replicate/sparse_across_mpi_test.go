//go:build mpi

package replicate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/internal/mpitest"
	"github.com/towerflow/towerflow/towers"
)

// sparseSummary is what a rank of TestMPIReduceSparse reports of its
// sums: each table's ids, in the order they came, and its dense sum.
type sparseSummary struct {
	Indices [][]int
	Sums    []denseSum
}

func summarize(gs []towers.IndexedSlices) sparseSummary {
	var s sparseSummary
	for _, g := range gs {
		s.Indices = append(s.Indices, append([]int{}, g.Indices...))
		s.Sums = append(s.Sums, densified(g))
	}
	return s
}

// mpiSparseCases are the cases of TestMPIReduceSparse: rank 0 contributes
// nothing; every rank touches every row many times (which the default
// densifies).
var mpiSparseCases = []int{0, 4}

// TestMPIReduceSparse: under mpirun, 2 processes, one with an empty
// contribution, get every process's sparse gradients summed, gathered
// (ids in rank order), densified (each touched row once, ascending) or as
// the default chooses; the ways agree to sparseTolerance, and the
// processes get the same sums.
func TestMPIReduceSparse(t *testing.T) {
	const np = 2
	modes := []SparseAsDense{SparseAsDenseNever, SparseAsDenseAlways, SparseAsDenseAuto}
	if mpitest.Child() {
		c, err := collective.MPI()
		if err != nil {
			t.Fatal(err)
		}
		x := sparseAcross(c, time.Minute)
		got := map[string]sparseSummary{}
		for _, k := range mpiSparseCases {
			for _, mode := range modes {
				ctx, cancel := x.bound(context.Background())
				gs, err := x.reduceSparse(ctx, mode, nil, sparseGrads(sparseCases[k].ids, c.Rank(), np))
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				got[sparseCases[k].name+"/"+mode.String()] = summarize(gs)
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
	res := mpitest.ReadResults[map[string]sparseSummary](t, mpitest.Run(t, np), np)
	for _, k := range mpiSparseCases {
		tc := sparseCases[k]
		sums, concat := wantSparse(t, tc.ids, np)
		for _, mode := range modes {
			name := tc.name + "/" + mode.String()
			for r := range np {
				got := res[r][name]
				if d := cmp.Diff(sums, got.Sums, sparseTolerance); d != "" {
					t.Errorf("%s: rank %d: the sums (-want +got):\n%s", name, r, d)
				}
				if d := cmp.Diff(res[0][name], got); d != "" {
					t.Errorf("%s: rank %d's sums differ from rank 0's (-0 +%d):\n%s", name, r, r, d)
				}
				for i, ids := range got.Indices {
					want := map[SparseAsDense][]int{SparseAsDenseNever: concat[i].Indices, SparseAsDenseAlways: sums[i].Touched}[mode]
					if d := cmp.Diff(want, ids, cmpopts.EquateEmpty()); mode != SparseAsDenseAuto && d != "" {
						t.Errorf("%s: rank %d, table %d: the ids (-want +got):\n%s", name, r, i, d)
					}
				}
			}
		}
	}
}

// peerStopResult is what rank 0 of TestMPIReduceSparsePeerStops reports.
type peerStopResult struct {
	Err        string
	Peer       *PeerError
	IsDeadline bool
}

// TestMPIReduceSparsePeerStops: under mpirun, rank 1 takes part in the
// exchange of counts of a sum of sparse gradients, then in nothing more;
// rank 0 stops in the gather of ids once Config.PeerTimeout (1 s) has
// passed, with a PeerError that says so, and exits non-zero, as a program
// whose group broke should.
func TestMPIReduceSparsePeerStops(t *testing.T) {
	const timeout = time.Second
	if mpitest.Child() {
		c, err := collective.MPI()
		if err != nil {
			t.Fatal(err)
		}
		if c.Rank() == 1 {
			c = &stoppingComm{Comm: c, hook: stopsAt(1)}
		}
		x := sparseAcross(c, timeout)
		ctx, cancel := x.bound(context.Background())
		defer cancel()
		_, err = x.reduceSparse(ctx, SparseAsDenseNever, nil, sparseGrads(sparseCases[0].ids, c.Rank(), 2))
		if c.Rank() == 1 {
			time.Sleep(time.Hour) // a process that hangs, until mpirun stops it
		}
		res := peerStopResult{Err: errString(err), IsDeadline: errors.Is(err, context.DeadlineExceeded)}
		res.Peer, _ = errors.AsType[*PeerError](err)
		if err := mpitest.WriteResult(0, res); err != nil {
			t.Fatal(err)
		}
		os.Exit(3)
	}
	dir, out, err := mpitest.RunErr(t, 2)
	t.Logf("mpirun's output:\n%s", out)
	if _, ok := errors.AsType[*exec.ExitError](err); !ok || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the job ended with %v, want a non-zero exit", err)
	}
	got := mpitest.ReadResults[peerStopResult](t, dir, 1)[0]
	t.Logf("rank 0's error: %s", got.Err)
	want := peerStopResult{Err: got.Err, Peer: &PeerError{Rank: -1, Failed: true, Timeout: timeout}, IsDeadline: true}
	if d := cmp.Diff(want, got, cmpopts.IgnoreUnexported(PeerError{})); d != "" {
		t.Errorf("rank 0 (-want +got):\n%s", d)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestMPIReduceSparseTimes, run only when TOWERFLOW_SPARSE_TIMES is set,
// logs the best of 15 sums of one sparse gradient of a 100000 × 16
// float32 table over 2 processes, gathered, densified and as the default
// chooses, for 1000 to 200000 ids a process: the figures behind
// SparseAsDenseAuto's rule. It asserts nothing. With
// TOWERFLOW_SPARSE_TIMES=net the processes are on hosts of their own
// (mpitest.NetHosts: network namespaces joined by veth links, root only),
// their traffic over TCP.
//
//	TOWERFLOW_SPARSE_TIMES=1 go test -tags mpi -run TestMPIReduceSparseTimes -v ./replicate/
func TestMPIReduceSparseTimes(t *testing.T) {
	if os.Getenv("TOWERFLOW_SPARSE_TIMES") == "" {
		t.Skip("set TOWERFLOW_SPARSE_TIMES=1 to time the sums of sparse gradients")
	}
	const rows, dim = 100000, 16
	ks := []int{1000, 10000, 30000, 60000, 100000, 140000, 200000}
	modes := []SparseAsDense{SparseAsDenseNever, SparseAsDenseAlways, SparseAsDenseAuto}
	if mpitest.Child() {
		c, err := collective.MPI()
		if err != nil {
			t.Fatal(err)
		}
		x := sparseAcross(c, time.Minute)
		var lines []string
		for _, k := range ks {
			g := towers.IndexedSlices{Indices: make([]int, k), Values: make([]float32, k*dim), DenseShape: []int{rows, dim}}
			for i := range g.Indices {
				g.Indices[i] = (i*7919 + c.Rank()) % rows
			}
			line := fmt.Sprintf("%6d ids a process (gathered %5.1f MB, dense %4.1f MB):", k, float64(2*k*(8+4*dim))/1e6, float64(rows*(dim+1)*4)/1e6)
			for _, mode := range modes {
				best := time.Hour
				for range 15 {
					start := time.Now()
					if _, err := x.reduceSparse(context.Background(), mode, nil, []towers.IndexedSlices{g}); err != nil {
						t.Fatal(err)
					}
					best = min(best, time.Since(start))
				}
				line += fmt.Sprintf("  %s %6.2f ms", strings.TrimPrefix(mode.String(), "SparseAsDense"), float64(best.Microseconds())/1000)
			}
			lines = append(lines, line)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := mpitest.WriteResult(c.Rank(), lines); err != nil {
			t.Fatal(err)
		}
		return
	}
	var env []string
	if os.Getenv("TOWERFLOW_SPARSE_TIMES") == "net" {
		env = mpitest.NetHosts(t, 2)
	}
	for _, line := range mpitest.ReadResults[[]string](t, mpitest.Run(t, 2, env...), 2)[0] {
		t.Log(line)
	}
}
