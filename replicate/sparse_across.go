package replicate

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/towers"
)

// SparseAsDense says how a sparse gradient (a towers.IndexedSlices: the
// rows of an embedding table a batch touched) crosses processes: gathered,
// every process receiving every process's ids and rows, or densified, each
// process adding its rows into a buffer the size of the table that is then
// all-reduced as the dense gradients are (Horovod's sparse_as_dense).
// Either way every process gets the same sum, which names the same rows
// (those any process touched) with the same values up to float rounding;
// only its form differs (see across.reduceSparse).
type SparseAsDense int

const (
	// SparseAsDenseAuto, the default, chooses for each gradient at each
	// step whichever moves fewer bytes through a process: it densifies
	// when the ids and rows gathered from every process (8 bytes an id, 4
	// or 8 a value) would exceed twice the dense buffer (the table, and
	// one more value per row that marks the rows touched), since an
	// all-reduce moves about twice its buffer through each process and an
	// all-gather its result once. Every process counts the same ids, so
	// every process decides alike.
	SparseAsDenseAuto SparseAsDense = iota
	// SparseAsDenseNever always gathers: no buffer the size of the table,
	// at the price of a gather that grows with the processes and their
	// batches.
	SparseAsDenseNever
	// SparseAsDenseAlways always densifies (unless no process touched a
	// row): Horovod's sparse_as_dense=True, for tables small or touched
	// densely enough that a table-sized buffer per step is cheap.
	SparseAsDenseAlways
)

// String returns the setting's name.
func (s SparseAsDense) String() string {
	switch s {
	case SparseAsDenseAuto:
		return "SparseAsDenseAuto"
	case SparseAsDenseNever:
		return "SparseAsDenseNever"
	case SparseAsDenseAlways:
		return "SparseAsDenseAlways"
	}
	return fmt.Sprintf("SparseAsDense(%d)", int(s))
}

// What a process says of each of its sparse gradients before they move:
// after the setting, three numbers per gradient.
const (
	sIDs   = iota // its number of ids; -1: it is invalid on that process
	sShape        // a hash of its dense shape
	sKind         // the bytes of a value: 4, 8, or 0 when it has none
	sFields
)

// crossPlan is how one gradient crosses processes, known alike on every
// process after the exchange of counts.
type crossPlan struct {
	ids     []int // by rank
	total   int   // ids over every rank
	kind    int   // bytes of a value, 4 or 8; 0 when no rank has values
	dense   bool  // densify and all-reduce; else gather (when total > 0)
	rowSize int
}

// reduceSparse sums grads, this process's sparse gradients, over the
// processes: every process passes its gradients of the same variables in
// the same order, each already weighted as its dense gradients are (its
// share of the loss), and a gradient with no rows where the process's
// batch touched none of the table. names, when not nil, names each
// gradient's variable for errors. Every process gets the same sums:
//
//   - a gathered gradient is the concatenation in rank order of every
//     process's ids and rows, duplicates kept, as towers.ConcatSlices sums
//     the towers (the update sums duplicates: Deduplicate);
//   - a densified one holds each row any process touched once, in
//     ascending order, with its sum.
//
// A gradient no process touched comes back with no rows. Which way each
// gradient goes is mode's (see SparseAsDense), decided on counts every
// process knows: first one all-gather of each process's setting and, per
// gradient, its number of ids, dense shape and value type; then one
// all-gather of the ids of every gathered gradient, one of their float32
// rows and one of their float64 rows, and an all-reduce in place of every
// densified float32 gradient, each followed by a mask of its touched rows
// (another of the float64 ones), in buckets of Config.BucketBytes. Each
// is skipped, on every process alike, when it would move nothing. ctx is
// the phase's (bound), as for the dense all-reduce. A gradient that is
// invalid on a process, or whose shape or type or whose setting differs
// between processes, is an error on every process after the first
// all-gather, which breaks nothing. A collective that fails breaks the
// group; one that outlasts Config.PeerTimeout (ctx's deadline) is a
// PeerError.
func (x *across) reduceSparse(ctx context.Context, mode SparseAsDense, names []string, grads []towers.IndexedSlices) ([]towers.IndexedSlices, error) {
	plans, local, err := x.planSparse(ctx, mode, names, grads)
	if err != nil {
		return nil, err
	}
	if local != nil {
		return nil, local
	}
	out := make([]towers.IndexedSlices, len(grads))
	if err := x.gatherSparse(ctx, plans, grads, out); err != nil {
		return nil, err
	}
	if err := x.densifySparse(ctx, plans, names, grads, out); err != nil {
		return nil, err
	}
	for i, p := range plans {
		if p.total == 0 {
			out[i] = towers.IndexedSlices{Values: emptyValues(p.kind), DenseShape: slices.Clone(grads[i].DenseShape)}
		}
	}
	return out, nil
}

// sparseFail is the error of a failed collective of reduceSparse: it
// broke the group.
func (x *across) sparseFail(what string, err error) error {
	err = x.broke(err)
	if _, ok := errors.AsType[*PeerError](err); ok {
		return err
	}
	return fmt.Errorf("sum sparse gradients across processes: %s: %w", what, err)
}

// planSparse exchanges every process's setting and counts and decides how
// each gradient goes. local is this process's own error (an invalid
// gradient, an unknown setting), or an error every process finds alike in
// what the others said; err is a failed collective's.
func (x *across) planSparse(ctx context.Context, mode SparseAsDense, names []string, grads []towers.IndexedSlices) (plans []crossPlan, local, err error) {
	n, rank := x.comm.Size(), x.comm.Rank()
	name := func(i int) string { return sparseName(names, i) }
	w := 1 + sFields*len(grads)
	said := make([]int64, n*w)
	mine := said[rank*w : (rank+1)*w]
	mine[0] = int64(mode)
	if mode < SparseAsDenseAuto || mode > SparseAsDenseAlways {
		local = fmt.Errorf("sum sparse gradients across processes: unknown %v", mode)
		mine[0] = -1
	}
	for i, g := range grads {
		f := mine[1+sFields*i:]
		if err := g.Validate(); err != nil {
			local = cmpOr(local, fmt.Errorf("sum sparse gradients across processes: %s: %w", name(i), err))
			f[sIDs] = -1
			continue
		}
		f[sIDs], f[sShape], f[sKind] = int64(g.Rows()), shapeHash(g.DenseShape), int64(valueBytes(g.Values))
	}
	counts := make([]int, n)
	for r := range counts {
		counts[r] = w
	}
	if err := x.comm.AllGatherInt64(ctx, said, counts); err != nil {
		return nil, nil, x.sparseFail("all-gather of counts", err)
	}
	if local != nil {
		return nil, local, nil
	}
	plans = make([]crossPlan, len(grads))
	for r := range n {
		theirs := said[r*w : (r+1)*w]
		if theirs[0] != mine[0] {
			if theirs[0] < 0 {
				return nil, fmt.Errorf("sum sparse gradients across processes: rank %d has an unknown SparseAsDense setting (its own error says which)", r), nil
			}
			return nil, fmt.Errorf("sum sparse gradients across processes: rank %d has %v, rank %d %v: every process must have the same Config.SparseAsDense", r, SparseAsDense(theirs[0]), rank, mode), nil
		}
		for i := range grads {
			f, p := theirs[1+sFields*i:], &plans[i]
			switch {
			case f[sIDs] < 0:
				return nil, fmt.Errorf("sum sparse gradients across processes: %s is invalid on rank %d (its own error says why)", name(i), r), nil
			case f[sShape] != mine[1+sFields*i+sShape]:
				return nil, fmt.Errorf("sum sparse gradients across processes: %s has another dense shape on rank %d than %v on rank %d: every process must pass gradients of the same variables in the same order", name(i), r, grads[i].DenseShape, rank), nil
			case f[sKind] != 0 && p.kind != 0 && int(f[sKind]) != p.kind:
				return nil, fmt.Errorf("sum sparse gradients across processes: %s has float%d values on rank %d, float%d on an earlier rank", name(i), 8*f[sKind], r, 8*p.kind), nil
			}
			if f[sKind] != 0 {
				p.kind = int(f[sKind])
			}
			p.ids = append(p.ids, int(f[sIDs]))
			p.total += int(f[sIDs])
		}
	}
	for i := range plans {
		p := &plans[i]
		p.rowSize = grads[i].RowSize()
		rows := grads[i].DenseShape[0]
		switch mode {
		case SparseAsDenseAlways:
			p.dense = p.total > 0
		case SparseAsDenseAuto:
			gathered := int64(p.total) * int64(8+p.rowSize*p.kind)
			dense := int64(rows) * int64(p.rowSize+1) * int64(p.kind)
			p.dense = p.total > 0 && gathered > 2*dense
		}
		// Values of no bytes (a shape with a zero dimension) need no
		// buffer: they are gathered, ids alone.
		if p.kind == 0 {
			p.dense = false
		}
	}
	return plans, nil, nil
}

// sparseName names gradient i for errors: by its variable when names has
// it, else by its position.
func sparseName(names []string, i int) string {
	if i < len(names) {
		return fmt.Sprintf("the sparse gradient of %q", names[i])
	}
	return fmt.Sprintf("sparse gradient %d", i)
}

// cmpOr returns err, or else next.
func cmpOr(err, next error) error {
	if err != nil {
		return err
	}
	return next
}

// shapeHash is a hash of a dense shape, to compare shapes between
// processes.
func shapeHash(shape []int) int64 {
	h := fnv.New64a()
	var b [8]byte
	for _, d := range shape {
		for k := range b {
			b[k] = byte(uint64(d) >> (8 * k))
		}
		h.Write(b[:])
	}
	return int64(h.Sum64() >> 1)
}

// valueBytes is the size of one of values' elements: 4, 8, or 0 for nil.
func valueBytes(values any) int {
	switch values.(type) {
	case []float32:
		return 4
	case []float64:
		return 8
	}
	return 0
}

// emptyValues is no values of kind bytes each (nil for 0).
func emptyValues(kind int) any {
	switch kind {
	case 4:
		return []float32{}
	case 8:
		return []float64{}
	}
	return nil
}

// gatherSparse gathers every gradient that plans do not densify and some
// process touched into out: its ids in one all-gather, its float32 rows in
// a second and its float64 rows in a third, each process's part holding
// its gradients in order.
func (x *across) gatherSparse(ctx context.Context, plans []crossPlan, grads []towers.IndexedSlices, out []towers.IndexedSlices) error {
	n, rank := x.comm.Size(), x.comm.Rank()
	idCounts, n32, n64 := make([]int, n), make([]int, n), make([]int, n)
	some := false
	for _, p := range plans {
		if p.dense || p.total == 0 {
			continue
		}
		some = true
		for r, k := range p.ids {
			idCounts[r] += k
			switch p.kind {
			case 4:
				n32[r] += k * p.rowSize
			case 8:
				n64[r] += k * p.rowSize
			}
		}
	}
	if !some {
		return nil
	}
	ids := make([]int64, 0, sumInts(idCounts))
	vals32 := make([]float32, 0, sumInts(n32))
	vals64 := make([]float64, 0, sumInts(n64))
	// This process's part, at its offset.
	ids = ids[:sumInts(idCounts[:rank])]
	vals32 = vals32[:sumInts(n32[:rank])]
	vals64 = vals64[:sumInts(n64[:rank])]
	for i, p := range plans {
		if p.dense || p.total == 0 {
			continue
		}
		for _, id := range grads[i].Indices {
			ids = append(ids, int64(id))
		}
		switch v := grads[i].Values.(type) {
		case []float32:
			vals32 = append(vals32, v...)
		case []float64:
			vals64 = append(vals64, v...)
		}
	}
	ids, vals32, vals64 = ids[:cap(ids)], vals32[:cap(vals32)], vals64[:cap(vals64)]
	if err := x.comm.AllGatherInt64(ctx, ids, idCounts); err != nil {
		return x.sparseFail("all-gather of ids", err)
	}
	if err := gatherRows(ctx, x, "float32 rows", vals32, n32); err != nil {
		return err
	}
	if err := gatherRows(ctx, x, "float64 rows", vals64, n64); err != nil {
		return err
	}
	// Each rank's cursor into the ids and into its type's rows.
	atID, at32, at64 := offsets(idCounts), offsets(n32), offsets(n64)
	for i, p := range plans {
		if p.dense || p.total == 0 {
			continue
		}
		g := towers.IndexedSlices{Indices: make([]int, 0, p.total), DenseShape: slices.Clone(grads[i].DenseShape)}
		var v32 []float32
		var v64 []float64
		switch p.kind {
		case 4:
			v32 = make([]float32, 0, p.total*p.rowSize)
		case 8:
			v64 = make([]float64, 0, p.total*p.rowSize)
		}
		for r, k := range p.ids {
			for _, id := range ids[atID[r] : atID[r]+k] {
				g.Indices = append(g.Indices, int(id))
			}
			atID[r] += k
			switch p.kind {
			case 4:
				v32 = append(v32, vals32[at32[r]:at32[r]+k*p.rowSize]...)
				at32[r] += k * p.rowSize
			case 8:
				v64 = append(v64, vals64[at64[r]:at64[r]+k*p.rowSize]...)
				at64[r] += k * p.rowSize
			}
		}
		switch p.kind {
		case 4:
			g.Values = v32
		case 8:
			g.Values = v64
		}
		out[i] = g
	}
	return nil
}

// gatherRows all-gathers rows of one type, when any rank has some.
func gatherRows[T float32 | float64](ctx context.Context, x *across, what string, buf []T, counts []int) error {
	if len(buf) == 0 {
		return nil
	}
	if err := collective.AllGatherInto(ctx, x.comm, buf, counts); err != nil {
		return x.sparseFail("all-gather of "+what, err)
	}
	return nil
}

// densifySparse sums every gradient plans densify into out: each process
// adds its rows into a buffer of the table's shape, followed by a mask of
// the rows it touched (one value a row, 1 where touched), and the buffers
// and masks are summed over the processes in place, those of float32
// tables in one all-reduce and those of float64 tables in another (in
// buckets of Config.BucketBytes, as the dense gradients); the rows any
// process touched are then taken from the sums.
func (x *across) densifySparse(ctx context.Context, plans []crossPlan, names []string, grads []towers.IndexedSlices, out []towers.IndexedSlices) error {
	var n32, n64 int
	for i, p := range plans {
		if !p.dense {
			continue
		}
		n := grads[i].DenseShape[0] * (p.rowSize + 1)
		switch p.kind {
		case 4:
			n32 += n
		case 8:
			n64 += n
		}
	}
	if n32+n64 == 0 {
		return nil
	}
	buf32, buf64 := make([]float32, n32), make([]float64, n64)
	var at32, at64 int
	for i, p := range plans {
		if !p.dense {
			continue
		}
		var err error
		switch p.kind {
		case 4:
			err = densifyInto(grads[i], buf32, &at32, p.rowSize)
		case 8:
			err = densifyInto(grads[i], buf64, &at64, p.rowSize)
		}
		if err != nil {
			return fmt.Errorf("sum sparse gradients across processes: densify %s: %w", sparseName(names, i), err)
		}
	}
	bucket := x.fusion.Bucket()
	if err := inBuckets(ctx, buf32, max(bucket/4, 1), x.comm.AllReduceFloat32); err != nil {
		return x.sparseFail("all-reduce of densified float32 gradients", err)
	}
	if err := inBuckets(ctx, buf64, max(bucket/8, 1), x.comm.AllReduceFloat64); err != nil {
		return x.sparseFail("all-reduce of densified float64 gradients", err)
	}
	at32, at64 = 0, 0
	for i, p := range plans {
		if !p.dense {
			continue
		}
		g := towers.IndexedSlices{DenseShape: slices.Clone(grads[i].DenseShape)}
		switch p.kind {
		case 4:
			g.Indices, g.Values = touchedRows(buf32, &at32, g.DenseShape[0], p.rowSize)
		case 8:
			g.Indices, g.Values = touchedRows(buf64, &at64, g.DenseShape[0], p.rowSize)
		}
		out[i] = g
	}
	return nil
}

// densifyInto adds g's rows into the table-shaped part of buf at *at and
// marks the rows it touches in the mask after it; *at moves past both.
func densifyInto[T numeric.Float](g towers.IndexedSlices, buf []T, at *int, rowSize int) error {
	rows := g.DenseShape[0]
	dense := buf[*at : *at+rows*rowSize]
	mask := buf[*at+rows*rowSize : *at+rows*(rowSize+1)]
	*at += rows * (rowSize + 1)
	if err := g.AddTo(dense); err != nil {
		return err
	}
	for _, id := range g.Indices {
		mask[id] = 1
	}
	return nil
}

// touchedRows is the ids of the rows the mask marks in the part of buf at
// *at (a table of rows, then its mask), ascending, and their rows; *at
// moves past the part.
func touchedRows[T numeric.Float](buf []T, at *int, rows, rowSize int) ([]int, []T) {
	dense := buf[*at : *at+rows*rowSize]
	mask := buf[*at+rows*rowSize : *at+rows*(rowSize+1)]
	*at += rows * (rowSize + 1)
	n := 0
	for _, m := range mask {
		if m != 0 {
			n++
		}
	}
	ids, vals := make([]int, 0, n), make([]T, 0, n*rowSize)
	for id, m := range mask {
		if m != 0 {
			ids = append(ids, id)
			vals = append(vals, dense[id*rowSize:(id+1)*rowSize]...)
		}
	}
	return ids, vals
}

func sumInts(s []int) int {
	t := 0
	for _, x := range s {
		t += x
	}
	return t
}

// offsets is where each rank's part starts in a gather of counts.
func offsets(counts []int) []int {
	off := make([]int, len(counts))
	at := 0
	for r, c := range counts {
		off[r] = at
		at += c
	}
	return off
}
