//go:build mpi

package collective

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/mpitest"
)

// mpiCase is one collective the ranks of TestMPI run in turn: do runs it
// on one rank and returns what the rank got, want is that for rank r of np.
type mpiCase struct {
	name string
	do   func(ctx context.Context, c Comm) ([]float64, error)
	want func(np, r int) []float64
}

// rankValues is rank r's buffer of n: (r+1)(i+1) + r/4, whose sums over
// the ranks floats hold exactly.
func rankValues(r, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64((r+1)*(i+1)) + float64(r)/4
	}
	return v
}

// rankSum is the elementwise sum of rankValues over np ranks.
func rankSum(np, n int) []float64 {
	s := make([]float64, n)
	for r := range np {
		for i, x := range rankValues(r, n) {
			s[i] += x
		}
	}
	return s
}

func allReduce64(n int) func(context.Context, Comm) ([]float64, error) {
	return func(ctx context.Context, c Comm) ([]float64, error) {
		buf := rankValues(c.Rank(), n)
		err := c.AllReduceFloat64(ctx, buf)
		return buf, err
	}
}

func allReduce32(n int) func(context.Context, Comm) ([]float64, error) {
	return func(ctx context.Context, c Comm) ([]float64, error) {
		buf := make([]float32, n)
		for i, x := range rankValues(c.Rank(), n) {
			buf[i] = float32(x)
		}
		err := c.AllReduceFloat32(ctx, buf)
		got := make([]float64, n)
		for i, x := range buf {
			got[i] = float64(x)
		}
		return got, err
	}
}

// inChunks runs do with MPI calls of at most n elements.
func inChunks(n int, do func(context.Context, Comm) ([]float64, error)) func(context.Context, Comm) ([]float64, error) {
	return func(ctx context.Context, c Comm) ([]float64, error) {
		defer func(m int) { maxCount = m }(maxCount)
		maxCount = n
		return do(ctx, c)
	}
}

// rootBytes is root's buffer of n bytes in the broadcast cases; the other
// ranks start from 0xee.
func rootBytes(root, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(7*i + root + 1)
	}
	return b
}

func floats(b []byte) []float64 {
	f := make([]float64, len(b))
	for i, x := range b {
		f[i] = float64(x)
	}
	return f
}

// broadcast broadcasts n bytes from root (-1: the last rank).
func broadcast(root, n int) func(context.Context, Comm) ([]float64, error) {
	return func(ctx context.Context, c Comm) ([]float64, error) {
		root := root
		if root < 0 {
			root = c.Size() - 1
		}
		buf := rootBytes(root, n)
		if c.Rank() != root {
			for i := range buf {
				buf[i] = 0xee
			}
		}
		err := c.Broadcast(ctx, root, buf)
		return floats(buf), err
	}
}

func wantBroadcast(root, n int) func(np, r int) []float64 {
	return func(np, r int) []float64 {
		root := root
		if root < 0 {
			root = np - 1
		}
		return floats(rootBytes(root, n))
	}
}

// gatherLen is rank r's number of elements in the all-gather cases: none
// on rank 1.
func gatherLen(r int) int {
	if r == 1 {
		return 0
	}
	return r + 3
}

// gatherValue is element i of rank r's contribution to an all-gather.
func gatherValue(r, i int) float64 { return float64(100*r + i) }

// allGather gathers every rank's lens(rank) values as T and returns the
// lengths got, then the values.
func allGather[T Gatherable](lens func(r int) int) func(context.Context, Comm) ([]float64, error) {
	return func(ctx context.Context, c Comm) ([]float64, error) {
		data := make([]T, lens(c.Rank()))
		for i := range data {
			data[i] = T(gatherValue(c.Rank(), i))
		}
		parts, err := AllGather(ctx, c, data)
		got := []float64{}
		for _, p := range parts {
			got = append(got, float64(len(p)))
		}
		for _, p := range parts {
			for _, x := range p {
				got = append(got, float64(x))
			}
		}
		return got, err
	}
}

func wantGather(lens func(r int) int) func(np, r int) []float64 {
	return func(np, _ int) []float64 {
		want := []float64{}
		for r := range np {
			want = append(want, float64(lens(r)))
		}
		for r := range np {
			for i := range lens(r) {
				want = append(want, gatherValue(r, i))
			}
		}
		return want
	}
}

var mpiCases = []mpiCase{
	{"all-gather int64, rank 1 empty", allGather[int64](gatherLen), wantGather(gatherLen)},
	{"all-gather float32, rank 1 empty", allGather[float32](gatherLen), wantGather(gatherLen)},
	{"all-gather float64, rank 1 empty", allGather[float64](gatherLen), wantGather(gatherLen)},
	{"all-gather float64, all empty", allGather[float64](func(int) int { return 0 }), wantGather(func(int) int { return 0 })},
	{"all-gather of 64 Ki float64 a rank", allGather[float64](func(int) int { return 1 << 16 }), wantGather(func(int) int { return 1 << 16 })},
	{"all-reduce float64", allReduce64(5), func(np, r int) []float64 { return rankSum(np, 5) }},
	{"all-reduce float32", allReduce32(5), func(np, r int) []float64 { return rankSum(np, 5) }},
	{"all-reduce float64 of 64 Ki (512 KiB)", allReduce64(1 << 16), func(np, r int) []float64 { return rankSum(np, 1<<16) }},
	{"all-reduce float64 in chunks of 3", inChunks(3, allReduce64(10)), func(np, r int) []float64 { return rankSum(np, 10) }},
	{"all-reduce float32 in chunks of 4", inChunks(4, allReduce32(9)), func(np, r int) []float64 { return rankSum(np, 9) }},
	{"empty buffers", func(ctx context.Context, c Comm) ([]float64, error) {
		if err := c.AllReduceFloat64(ctx, nil); err != nil {
			return nil, err
		}
		if err := c.AllReduceFloat32(ctx, []float32{}); err != nil {
			return nil, err
		}
		return []float64{}, c.Broadcast(ctx, 0, nil)
	}, func(np, r int) []float64 { return []float64{} }},
	{"broadcast from rank 0", broadcast(0, 16), wantBroadcast(0, 16)},
	{"broadcast from rank 1", broadcast(1, 1000), wantBroadcast(1, 1000)},
	{"broadcast from the last rank in chunks of 5", inChunks(5, broadcast(-1, 17)), wantBroadcast(-1, 17)},
	{"BroadcastBytes of a length only the root knows", func(ctx context.Context, c Comm) ([]float64, error) {
		var data []byte
		if c.Rank() == 1 {
			data = rootBytes(1, 1234)
		}
		got, err := BroadcastBytes(ctx, c, 1, data)
		return floats(got), err
	}, wantBroadcast(1, 1234)},
	{"broadcast from a rank out of range is an error that breaks nothing", func(ctx context.Context, c Comm) ([]float64, error) {
		var got []float64
		for _, root := range []int{-1, c.Size()} {
			if err := c.Broadcast(ctx, root, make([]byte, 3)); err != nil && strings.Contains(err.Error(), "broadcast from rank "+strconv.Itoa(root)) {
				got = append(got, 1)
			} else {
				got = append(got, 0)
			}
		}
		return got, nil
	}, func(np, r int) []float64 { return []float64{1, 1} }},
	{"an all-gather larger than one MPI call is an error that breaks nothing", func(ctx context.Context, c Comm) ([]float64, error) {
		defer func(m int) { maxCount = m }(maxCount)
		maxCount = c.Size()
		counts := make([]int, c.Size())
		counts[0] = c.Size() + 1
		err := c.AllGatherFloat64(ctx, make([]float64, c.Size()+1), counts)
		if err != nil && strings.Contains(err.Error(), "more than one MPI call takes") {
			return []float64{1}, nil
		}
		return []float64{0}, err
	}, func(np, r int) []float64 { return []float64{1} }},
	{"all-reduce after the error", allReduce64(3), func(np, r int) []float64 { return rankSum(np, 3) }},
	// OpenMPI installs its SIGSEGV handler only where none is: Go's stays.
	{"a nil dereference is still a Go panic", func(ctx context.Context, c Comm) (got []float64, err error) {
		defer func() {
			if recover() != nil {
				got = []float64{1}
			}
		}()
		var p *mpiComm
		return []float64{float64(p.rank)}, nil
	}, func(np, r int) []float64 { return []float64{1} }},
	{"allocations of an all-reduce", func(ctx context.Context, c Comm) ([]float64, error) {
		buf := make([]float64, 1000)
		var err error
		allocs := testing.AllocsPerRun(20, func() {
			if e := c.AllReduceFloat64(ctx, buf); e != nil {
				err = e
			}
		})
		return []float64{allocs}, err
	}, func(np, r int) []float64 { return []float64{0} }},
	{"MPI again gives the same Comm", func(ctx context.Context, c Comm) ([]float64, error) {
		c2, err := MPI()
		if err != nil || c2 != c {
			return []float64{0}, err
		}
		return []float64{1}, nil
	}, func(np, r int) []float64 { return []float64{1} }},
}

// mpiResult is what a rank of TestMPI reports.
type mpiResult struct {
	Rank, Size int
	Got        map[string][]float64
	Errs       map[string]string
	Close      string   // the first Close's error
	After      []string // errors of a second Close, MPI and a collective after Close
}

// TestMPI runs every case of mpiCases in turn on np ranks of mpirun.
func TestMPI(t *testing.T) {
	for _, np := range []int{2, 4} {
		t.Run("np="+strconv.Itoa(np), func(t *testing.T) {
			if mpitest.Child() {
				mpiRank(t)
				return
			}
			dir := mpitest.Run(t, np)
			for r, res := range mpitest.ReadResults[mpiResult](t, dir, np) {
				if res.Rank != r || res.Size != np {
					t.Errorf("rank %d says it is rank %d of %d", r, res.Rank, res.Size)
				}
				for _, tc := range mpiCases {
					if e := res.Errs[tc.name]; e != "" {
						t.Errorf("%s: rank %d: %s", tc.name, r, e)
					} else if diff := cmp.Diff(tc.want(np, r), res.Got[tc.name]); diff != "" {
						t.Errorf("%s: rank %d got (-want +got):\n%s", tc.name, r, diff)
					}
				}
				if res.Close != "" {
					t.Errorf("rank %d: Close: %s", r, res.Close)
				}
				want := []string{"", "collective: MPI's Comm was closed, which finalized MPI: a process cannot start it again", "collective: rank " + strconv.Itoa(r) + ": MPI's Comm is closed"}
				if diff := cmp.Diff(want, res.After); diff != "" {
					t.Errorf("rank %d: a second Close, MPI and an all-reduce after Close (-want +got):\n%s", r, diff)
				}
			}
		})
	}
}

// mpiRank is one rank of TestMPI.
func mpiRank(t *testing.T) {
	c, err := MPI()
	if err != nil {
		t.Fatal(err)
	}
	res := mpiResult{Rank: c.Rank(), Size: c.Size(), Got: map[string][]float64{}, Errs: map[string]string{}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range mpiCases {
		got, err := tc.do(ctx, c)
		if err != nil {
			res.Errs[tc.name] = err.Error()
		}
		res.Got[tc.name] = got
	}
	res.Close = errString(c.Close())
	_, errMPI := MPI()
	res.After = []string{errString(c.Close()), errString(errMPI), errString(c.AllReduceFloat64(ctx, make([]float64, 1)))}
	if err := mpitest.WriteResult(res.Rank, res); err != nil {
		t.Fatal(err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// brokenResult is what rank 0 of TestMPIBrokenByContext reports.
type brokenResult struct {
	Err       string // the collective's error
	IsCtxErr  bool   // errors.Is(Err, the context's error)
	SameLater []bool // whether later calls return that same error
	Close     string
}

// Rank 0 gives up on an all-reduce that rank 2 never joins; rank 1 waits
// in it without a deadline. Rank 0's Comm is broken from then on; it exits
// non-zero, as a program should, and mpirun stops the others.
func TestMPIBrokenByContext(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ctx   func() (context.Context, context.CancelFunc)
		want  error
		words string
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 300*time.Millisecond)
		}, context.DeadlineExceeded, "collective: rank 0 left MPI all-reduce float64 of 4 elements unfinished: context deadline exceeded"},
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(300*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled, "collective: rank 0 left MPI all-reduce float64 of 4 elements unfinished: context canceled"},
		{"cancelled before", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled, "collective: rank 0 did not start MPI all-reduce float64 of 4 elements: context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if mpitest.Child() {
				c, err := MPI()
				if err != nil {
					t.Fatal(err)
				}
				switch c.Rank() {
				case 0:
					ctx, cancel := tc.ctx()
					defer cancel()
					err := c.AllReduceFloat64(ctx, make([]float64, 4))
					later := []error{
						c.AllReduceFloat64(context.Background(), make([]float64, 4)),
						c.AllReduceFloat32(context.Background(), make([]float32, 4)),
						c.AllReduceFloat64(context.Background(), nil),
						c.Broadcast(context.Background(), 0, make([]byte, 1)),
					}
					res := brokenResult{Err: errString(err), IsCtxErr: errors.Is(err, tc.want)}
					for _, e := range later {
						res.SameLater = append(res.SameLater, e == err)
					}
					closeErr := c.Close()
					if !errors.Is(closeErr, err) {
						res.Close = "does not wrap the error: " + errString(closeErr)
					}
					if err := mpitest.WriteResult(0, res); err != nil {
						t.Fatal(err)
					}
					os.Exit(3)
				case 1:
					err := c.AllReduceFloat64(context.Background(), make([]float64, 4))
					t.Fatalf("rank 1's all-reduce without rank 2 returned %v", err)
				default:
					time.Sleep(time.Hour)
				}
				return
			}
			start := time.Now()
			dir, out, err := mpitest.RunErr(t, 3)
			t.Logf("mpirun's output:\n%s", out)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || errors.Is(err, context.DeadlineExceeded) || !regexp.MustCompile(`Exit code:\s+3\b`).Match(out) {
				t.Fatalf("the job ended with %v, want rank 0's exit status 3; output:\n%s", err, out)
			}
			if d := time.Since(start); d > time.Minute {
				t.Errorf("the job took %v to stop", d)
			}
			want := brokenResult{Err: tc.words + "; the Comm is broken", IsCtxErr: true, SameLater: []bool{true, true, true, true}}
			got := mpitest.ReadResults[brokenResult](t, dir, 1)[0]
			if !strings.HasPrefix(got.Err, tc.words) {
				t.Errorf("the error %q does not start %q", got.Err, tc.words)
			}
			got.Err = want.Err
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("rank 0 (-want +got):\n%s", diff)
			}
		})
	}
}
