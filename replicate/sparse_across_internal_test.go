package replicate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/towers"
)

// The sparse gradients of the tests: a float32 table of 6 rows of 3, a
// float64 table of 5 rows of 2 and a float32 table of 4 rows of 2.
var sparseShapes = [][]int{{6, 3}, {5, 2}, {4, 2}}

// sparseIDs says which rows rank r of np touches in each table.
type sparseIDs func(r, np int) [][]int

// sparseGrads is rank r's gradients for ids: row j of table t holds
// values that name the rank, the table, the position and the element and
// that floats do not hold exactly, so that the order of a sum shows.
func sparseGrads(ids sparseIDs, r, np int) []towers.IndexedSlices {
	byTable := ids(r, np)
	gs := make([]towers.IndexedSlices, len(sparseShapes))
	for t, shape := range sparseShapes {
		g := towers.IndexedSlices{Indices: byTable[t], DenseShape: slices.Clone(shape)}
		vals := make([]float64, 0, len(g.Indices)*shape[1])
		for j := range g.Indices {
			for e := range shape[1] {
				vals = append(vals, 0.1*float64(r+1)+0.01*float64(j+t)+0.001*float64(e))
			}
		}
		if t != 1 {
			v32 := make([]float32, len(vals))
			for i, x := range vals {
				v32[i] = float32(x)
			}
			g.Values = v32
		} else {
			g.Values = vals
		}
		gs[t] = g
	}
	return gs
}

// denseSum is a gradient's dense sum in float64 and the rows it touches.
type denseSum struct {
	Touched []int
	Sum     []float64
}

// densified is g's denseSum.
func densified(g towers.IndexedSlices) denseSum {
	d := denseSum{Touched: []int{}, Sum: make([]float64, g.DenseShape[0]*g.RowSize())}
	rs := g.RowSize()
	for i, id := range g.Indices {
		for e := range rs {
			switch v := g.Values.(type) {
			case []float32:
				d.Sum[id*rs+e] += float64(v[i*rs+e])
			case []float64:
				d.Sum[id*rs+e] += v[i*rs+e]
			}
		}
		if !slices.Contains(d.Touched, id) {
			d.Touched = append(d.Touched, id)
		}
	}
	slices.Sort(d.Touched)
	return d
}

// wantSparse is the sum of every rank's gradients, table by table, in
// float64, and each table's gradients of every rank concatenated in rank
// order (the gathered form).
func wantSparse(t *testing.T, ids sparseIDs, np int) (sums []denseSum, concat []towers.IndexedSlices) {
	t.Helper()
	parts := make([][]towers.IndexedSlices, len(sparseShapes))
	for r := range np {
		for t, g := range sparseGrads(ids, r, np) {
			parts[t] = append(parts[t], g)
		}
	}
	for k := range sparseShapes {
		c, err := towers.ConcatSlices(parts[k], slices.Repeat([]float64{1}, np))
		if err != nil {
			t.Fatal(err)
		}
		concat = append(concat, c)
		sums = append(sums, densified(c))
	}
	return sums, concat
}

// sparseTolerance is how near the sums of the two ways are: each sums the
// same float32 (or float64) values in another order.
var sparseTolerance = cmpopts.EquateApprox(1e-6, 1e-7)

// checkSparse compares rank r's reduced gradients with the sums and, as
// mode says, with the gathered form (concatenated in rank order) or the
// densified one (each touched row once, ascending).
func checkSparse(t *testing.T, r int, mode SparseAsDense, got []towers.IndexedSlices, sums []denseSum, concat []towers.IndexedSlices) {
	t.Helper()
	for i, g := range got {
		if err := g.Validate(); err != nil {
			t.Errorf("rank %d, table %d: %v", r, i, err)
			continue
		}
		if d := cmp.Diff(sums[i], densified(g), sparseTolerance); d != "" {
			t.Errorf("rank %d, table %d: the sum (-want +got):\n%s", r, i, d)
		}
		switch mode {
		case SparseAsDenseNever:
			if d := cmp.Diff(concat[i], g, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("rank %d, table %d: gathered (-want +got):\n%s", r, i, d)
			}
		case SparseAsDenseAlways:
			if d := cmp.Diff(sums[i].Touched, g.Indices, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("rank %d, table %d: densified, the rows (-want +got):\n%s", r, i, d)
			}
		}
	}
}

// sparseAcross is the across of rank c, with timeout bounding its phases.
func sparseAcross(c collective.Comm, timeout time.Duration) *across {
	if x := newAcross(Config{Processes: c, PeerTimeout: timeout}); x != nil {
		return x
	}
	return &across{comm: c, timeout: timeout}
}

// onSparseRanks runs fn as every rank of comms, each on its own goroutine.
func onSparseRanks(comms []collective.Comm, fn func(r int, c collective.Comm)) {
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() { fn(r, c) })
	}
	wg.Wait()
}

var sparseCases = []struct {
	name string
	ids  sparseIDs
}{
	{"rank 0 empty", func(r, np int) [][]int {
		if r == 0 {
			return [][]int{nil, {}, nil}
		}
		return [][]int{{r % 6, (r + 2) % 6, r % 6}, {4, r % 5}, {r % 4}}
	}},
	{"the last rank empty, ids repeated across ranks", func(r, np int) [][]int {
		if r == np-1 && np > 1 {
			return [][]int{{}, nil, nil}
		}
		return [][]int{{1, 1, 5}, {0, 2, 0, 2}, {3, 0}}
	}},
	{"one rank touches one table", func(r, np int) [][]int {
		if r == np/2 {
			return [][]int{{3}, nil, nil}
		}
		return [][]int{nil, nil, nil}
	}},
	{"all empty", func(r, np int) [][]int { return [][]int{nil, nil, nil} }},
	{"every row, many times", func(r, np int) [][]int {
		var a, b, c []int
		for k := range 12 {
			a, b, c = append(a, (k+r)%6), append(b, (k*3+r)%5), append(c, (k+2*r)%4)
		}
		return [][]int{a, b, c}
	}},
}

// TestReduceSparse: over 1 to 4 processes, gathered or densified or either,
// every process gets the sum of every process's sparse gradients, in the
// form the setting asks; processes with no rows, even all of them, take
// part as the others. The two ways agree to sparseTolerance.
func TestReduceSparse(t *testing.T) {
	for _, tc := range sparseCases {
		for _, mode := range []SparseAsDense{SparseAsDenseNever, SparseAsDenseAlways, SparseAsDenseAuto} {
			for np := 1; np <= 4; np++ {
				t.Run(fmt.Sprintf("%s/%v/%d", tc.name, mode, np), func(t *testing.T) {
					got := make([][]towers.IndexedSlices, np)
					errs := make([]error, np)
					onSparseRanks(collective.Local(np), func(r int, c collective.Comm) {
						x := sparseAcross(c, 10*time.Second)
						ctx, cancel := x.bound(context.Background())
						defer cancel()
						got[r], errs[r] = x.reduceSparse(ctx, mode, nil, sparseGrads(tc.ids, r, np))
					})
					sums, concat := wantSparse(t, tc.ids, np)
					for r := range np {
						if errs[r] != nil {
							t.Fatalf("rank %d: %v", r, errs[r])
						}
						checkSparse(t, r, mode, got[r], sums, concat)
						if d := cmp.Diff(got[0], got[r]); d != "" {
							t.Errorf("rank %d's sums differ from rank 0's (-0 +%d):\n%s", r, r, d)
						}
					}
				})
			}
		}
	}
}

// TestReduceSparseAuto: by default a gradient with few rows of a large
// table is gathered (its rows concatenated in rank order), one with many
// rows of a small table densified (each row once, ascending).
func TestReduceSparseAuto(t *testing.T) {
	const np = 2
	grads := func(r int) []towers.IndexedSlices {
		few := towers.IndexedSlices{Indices: []int{7 * r, 500 + r}, Values: make([]float32, 2*8), DenseShape: []int{1000, 8}}
		many := towers.IndexedSlices{Indices: []int{2, 0, 1, 2, 0, 1, 2, 0, 1, 2}, Values: make([]float32, 10*8), DenseShape: []int{3, 8}}
		for i := range 16 {
			few.Values.([]float32)[i] = float32(r*100 + i)
		}
		for i := range 80 {
			many.Values.([]float32)[i] = float32(r*100 + i)
		}
		return []towers.IndexedSlices{few, many}
	}
	got := make([][]towers.IndexedSlices, np)
	errs := make([]error, np)
	onSparseRanks(collective.Local(np), func(r int, c collective.Comm) {
		got[r], errs[r] = sparseAcross(c, time.Minute).reduceSparse(context.Background(), SparseAsDenseAuto, nil, grads(r))
	})
	few, err := towers.ConcatSlices([]towers.IndexedSlices{grads(0)[0], grads(1)[0]}, []float64{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	many, err := towers.ConcatSlices([]towers.IndexedSlices{grads(0)[1], grads(1)[1]}, []float64{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []towers.IndexedSlices{few, many.Deduplicate()}
	for r := range np {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if d := cmp.Diff(want, got[r]); d != "" {
			t.Errorf("rank %d (-want +got):\n%s", r, d)
		}
	}
}

// TestReduceSparseMismatch: a gradient invalid on one process, or
// processes that disagree on a gradient's shape or type or on the setting,
// are an error on every process, after which the group still works.
func TestReduceSparseMismatch(t *testing.T) {
	valid := func() towers.IndexedSlices {
		return towers.IndexedSlices{Indices: []int{1}, Values: []float32{1, 2, 3}, DenseShape: []int{6, 3}}
	}
	for _, tc := range []struct {
		name string
		mode SparseAsDense                                     // rank 1's
		g    func(g towers.IndexedSlices) towers.IndexedSlices // rank 1's
		want [2]string
	}{
		{"an id out of range on rank 1", SparseAsDenseAuto, func(g towers.IndexedSlices) towers.IndexedSlices { g.Indices = []int{9}; return g },
			[2]string{`the sparse gradient of "emb" is invalid on rank 1 (its own error says why)`, `the sparse gradient of "emb": indexed slices: index 9 at position 0 is out of range [0, 6)`}},
		{"another shape on rank 1", SparseAsDenseAuto, func(g towers.IndexedSlices) towers.IndexedSlices { g.DenseShape = []int{7, 3}; return g },
			[2]string{`the sparse gradient of "emb" has another dense shape on rank 1 than [6 3] on rank 0`, `the sparse gradient of "emb" has another dense shape on rank 0 than [7 3] on rank 1`}},
		{"float64 on rank 1", SparseAsDenseAuto, func(g towers.IndexedSlices) towers.IndexedSlices { g.Values = []float64{1, 2, 3}; return g },
			[2]string{`the sparse gradient of "emb" has float64 values on rank 1, float32 on an earlier rank`, `the sparse gradient of "emb" has float64 values on rank 1, float32 on an earlier rank`}},
		{"another setting on rank 1", SparseAsDenseAlways, func(g towers.IndexedSlices) towers.IndexedSlices { return g },
			[2]string{"rank 1 has SparseAsDenseAlways, rank 0 SparseAsDenseAuto: every process must have the same Config.SparseAsDense", "rank 0 has SparseAsDenseAuto, rank 1 SparseAsDenseAlways"}},
		{"an unknown setting on rank 1", SparseAsDense(7), func(g towers.IndexedSlices) towers.IndexedSlices { return g },
			[2]string{"rank 1 has an unknown SparseAsDense setting", "unknown SparseAsDense(7)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := make([]error, 2)
			again := make([]error, 2)
			onSparseRanks(collective.Local(2), func(r int, c collective.Comm) {
				x := sparseAcross(c, time.Minute)
				mode, g := SparseAsDenseAuto, valid()
				if r == 1 {
					mode, g = tc.mode, tc.g(g)
				}
				_, errs[r] = x.reduceSparse(context.Background(), mode, []string{"emb"}, []towers.IndexedSlices{g})
				_, again[r] = x.reduceSparse(context.Background(), SparseAsDenseAuto, []string{"emb"}, []towers.IndexedSlices{valid()})
			})
			for r := range 2 {
				if errs[r] == nil || !strings.Contains(errs[r].Error(), tc.want[r]) {
					t.Errorf("rank %d: %v, want an error containing %q", r, errs[r], tc.want[r])
				}
				if again[r] != nil {
					t.Errorf("rank %d: the next sum failed: %v", r, again[r])
				}
			}
		})
	}
}

// stoppingComm is a rank that stops taking part in collectives: hook sees
// the index of each collective it is asked for, and an error from it is
// that collective's (the others are not told).
type stoppingComm struct {
	collective.Comm
	calls int
	hook  func(call int) error
}

func (s *stoppingComm) next() error {
	s.calls++
	return s.hook(s.calls - 1)
}

func (s *stoppingComm) AllGatherInt64(ctx context.Context, buf []int64, counts []int) error {
	if err := s.next(); err != nil {
		return err
	}
	return s.Comm.AllGatherInt64(ctx, buf, counts)
}

func (s *stoppingComm) AllGatherFloat32(ctx context.Context, buf []float32, counts []int) error {
	if err := s.next(); err != nil {
		return err
	}
	return s.Comm.AllGatherFloat32(ctx, buf, counts)
}

func (s *stoppingComm) AllGatherFloat64(ctx context.Context, buf []float64, counts []int) error {
	if err := s.next(); err != nil {
		return err
	}
	return s.Comm.AllGatherFloat64(ctx, buf, counts)
}

func (s *stoppingComm) AllReduceFloat32(ctx context.Context, buf []float32) error {
	if err := s.next(); err != nil {
		return err
	}
	return s.Comm.AllReduceFloat32(ctx, buf)
}

func (s *stoppingComm) AllReduceFloat64(ctx context.Context, buf []float64) error {
	if err := s.next(); err != nil {
		return err
	}
	return s.Comm.AllReduceFloat64(ctx, buf)
}

// stopsAt is a hook that takes part in the first n collectives only.
func stopsAt(n int) func(int) error {
	return func(call int) error {
		if call >= n {
			return errors.New("this rank has stopped")
		}
		return nil
	}
}

// TestReduceSparsePeerStops: when a process stops taking part in the
// middle of a sum of sparse gradients — before the exchange of counts, the
// gather of ids or of rows, or the all-reduce of densified gradients — the
// others stop once Config.PeerTimeout has passed, with a PeerError that
// says so and wraps the deadline, and the group is broken.
func TestReduceSparsePeerStops(t *testing.T) {
	const timeout = 20 * time.Millisecond
	for _, tc := range []struct {
		name  string
		mode  SparseAsDense
		calls int // that rank 1 takes part in
	}{
		{"the exchange of counts", SparseAsDenseNever, 0},
		{"the gather of ids", SparseAsDenseNever, 1},
		{"the gather of float32 rows", SparseAsDenseNever, 2},
		{"the gather of float64 rows", SparseAsDenseNever, 3},
		{"the all-reduce of densified gradients", SparseAsDenseAlways, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms := collective.Local(2)
			comms[1] = &stoppingComm{Comm: comms[1], hook: stopsAt(tc.calls)}
			var x0 *across
			var err0 error
			onSparseRanks(comms, func(r int, c collective.Comm) {
				x := sparseAcross(c, timeout)
				x.open = true
				ctx, cancel := x.bound(context.Background())
				defer cancel()
				_, err := x.reduceSparse(ctx, tc.mode, nil, sparseGrads(sparseCases[1].ids, r, 2))
				if r == 0 {
					x0, err0 = x, err
				}
			})
			pe, ok := errors.AsType[*PeerError](err0)
			if !ok {
				t.Fatalf("rank 0: %v, want a PeerError", err0)
			}
			if d := cmp.Diff(&PeerError{Rank: -1, Failed: true, Timeout: timeout}, pe, cmpopts.IgnoreUnexported(PeerError{})); d != "" {
				t.Errorf("rank 0: PeerError (-want +got):\n%s", d)
			}
			if !errors.Is(err0, context.DeadlineExceeded) {
				t.Errorf("rank 0: %v does not wrap the deadline", err0)
			}
			if x0.open {
				t.Error("rank 0 still expects the others at its next header")
			}
			if err := x0.comm.AllReduceFloat64(context.Background(), []float64{1}); err == nil {
				t.Error("rank 0's group still works")
			}
		})
	}
}

// TestReduceSparseCancelled: a context cancelled as the gather of ids
// starts (without a deadline: not a timeout) stops that process with the
// collective's error, which wraps it and says what was under way; the
// group is broken.
func TestReduceSparseCancelled(t *testing.T) {
	comms := collective.Local(2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	comms[0] = &stoppingComm{Comm: comms[0], hook: func(call int) error {
		if call == 1 {
			cancel()
		}
		return nil
	}}
	errs := make([]error, 2)
	onSparseRanks(comms, func(r int, c collective.Comm) {
		ctx := ctx
		if r == 1 {
			ctx = context.Background()
		}
		_, errs[r] = sparseAcross(c, -1).reduceSparse(ctx, SparseAsDenseNever, nil, sparseGrads(sparseCases[1].ids, r, 2))
	})
	for r, err := range errs {
		if err == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "sum sparse gradients across processes: all-gather of ids: collective: rank 0 left all-gather int64: context canceled") {
			t.Errorf("rank %d: %v, want the cancelled gather of ids", r, err)
		}
		if _, ok := errors.AsType[*PeerError](err); ok {
			t.Errorf("rank %d: a PeerError: %v", r, err)
		}
	}
}
