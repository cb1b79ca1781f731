package layers

import (
	"errors"
	"fmt"
	"hash"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync/atomic"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/idsort"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/scopes"
	"github.com/towerflow/towerflow/towers"
)

// Embedding lookups read rows of a table, a variable of shape (vocab,
// dim), by integer id. Their gradient with respect to the table is sparse:
// each lookup registers itself with the tower's Scope (a towers.Lookup),
// and the engine (package replicate) takes the gradient with respect to
// the lookup's output instead of the table's, maps it back to one row per
// id read, and sums the towers' rows as a towers.IndexedSlices: no buffer
// of the table's size is made per tower or per step. A table the model
// also reads otherwise (a matrix product with it) gets that dense gradient
// too, and the rows are added into it.
//
// Ids are integers (int, int64 or int32 values). An id outside [0, vocab)
// is an error of the step that names the feature (or the ids' node), the
// row and the id. Negative ids are errors too, not dropped as TensorFlow's
// safe_embedding_lookup_sparse drops them: a negative id in the data is
// more often a bug than padding, and PaddingID is the way to mark padding.

// Combiner reduces the embeddings of a row's ids (a bag) to one row:
// TensorFlow's embedding_lookup_sparse combiners, PyTorch's EmbeddingBag
// modes. With per-id weights w, Sum is Σ wᵢ·eᵢ, Mean is Σ wᵢ·eᵢ / Σ wᵢ and
// SqrtN is Σ wᵢ·eᵢ / √(Σ wᵢ²); without weights every wᵢ is 1. A row with
// no ids is zeros; a row whose divisor is zero (weights summing to zero)
// is left as its sum.
type Combiner int

const (
	// CombineSum sums the bag's (weighted) embeddings.
	CombineSum Combiner = iota
	// CombineMean divides the sum by the sum of the weights.
	CombineMean
	// CombineSqrtN divides the sum by the root of the sum of the squared
	// weights.
	CombineSqrtN
)

// String returns "sum", "mean" or "sqrtn".
func (c Combiner) String() string {
	switch c {
	case CombineSum:
		return "sum"
	case CombineMean:
		return "mean"
	case CombineSqrtN:
		return "sqrtn"
	}
	return fmt.Sprintf("Combiner(%d)", int(c))
}

// LookupOption adjusts an embedding lookup.
type LookupOption func(*lookupConfig)

type lookupConfig struct {
	padding    int
	hasPadding bool
	weights    *towers.SparseFeature
}

// PaddingID marks id as padding: it reads its row of the table (as
// PyTorch's padding_idx; a table whose padding row is zero, as
// NewEmbedding makes it, gives zeros) and its row gets no gradient.
func PaddingID(id int) LookupOption {
	return func(c *lookupConfig) { c.padding, c.hasPadding = id, true }
}

// IDWeights weighs each id of a sparse lookup by the value of w at the
// same index (TensorFlow's sp_weights): w must have the ids' entries, in
// the same order with the same indices, and float values.
func IDWeights(w *towers.SparseFeature) LookupOption {
	return func(c *lookupConfig) { c.weights = w }
}

// lookupSerial makes every lookup op distinct: gorgonia merges nodes of
// equal ops over equal inputs, and two lookups of one table by different
// ids must stay two.
var lookupSerial atomic.Int64

// EmbeddingLookup returns the rows of table (vocab, dim) named by ids, an
// integer node of shape (batch) or (batch, k): (batch, dim) or (batch, k,
// dim). s is the tower's scope, of which table is a variable.
func EmbeddingLookup(s *towers.Scope, table, ids *G.Node, opts ...LookupOption) (*G.Node, error) {
	return embeddingLookup(s, "", []*G.Node{table}, ids, opts...)
}

// embeddingLookup is EmbeddingLookup of a table of one or more partitions
// (tables, contiguous row ranges as partitionBounds splits them); name is
// the table's name in errors ("": its one variable's).
func embeddingLookup(s *towers.Scope, name string, tables []*G.Node, ids *G.Node, opts ...LookupOption) (*G.Node, error) {
	const op = "layers.EmbeddingLookup"
	name, vars, err := lookupTables(op, s, name, tables)
	if err != nil {
		return nil, err
	}
	table := tables[0]
	if ids == nil {
		return nil, fmt.Errorf("%s(%s): nil ids", op, name)
	}
	if ids.Graph() != table.Graph() {
		return nil, fmt.Errorf("%s(%s): ids %s are not a node of the table's graph", op, name, ids.Name())
	}
	if !isIntDtype(ids.Dtype()) {
		return nil, fmt.Errorf("%s(%s): ids %s have dtype %v, want int, int64 or int32", op, name, ids.Name(), ids.Dtype())
	}
	if d := ids.Dims(); d != 1 && d != 2 {
		return nil, fmt.Errorf("%s(%s): ids %s have shape %v, want (batch) or (batch, k)", op, name, ids.Name(), ids.Shape())
	}
	var cfg lookupConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.weights != nil {
		return nil, fmt.Errorf("%s(%s): IDWeights is an option of sparse lookups", op, name)
	}
	l := &lookupOp{lookupBase: newLookupBase(tables, cfg, "ids "+ids.Name()), idsDims: ids.Dims(), idsDtype: ids.Dtype(), s: s}
	out, err := G.ApplyOp(l, append(slices.Clone(tables), ids)...)
	if err != nil {
		return nil, fmt.Errorf("%s(%s, %s): %w", op, name, ids.Name(), err)
	}
	if err := l.register(s, vars, out); err != nil {
		return nil, fmt.Errorf("%s(%s): %w", op, name, err)
	}
	return out, nil
}

// EmbeddingLookupSparse returns, for each row of the sparse feature ids
// (integer values; dense shape (batch, ...)), its bag of embeddings
// combined by c: (batch, dim). TensorFlow's embedding_lookup_sparse,
// PyTorch's EmbeddingBag. IDWeights weighs the ids.
func EmbeddingLookupSparse(s *towers.Scope, table *G.Node, ids *towers.SparseFeature, c Combiner, opts ...LookupOption) (*G.Node, error) {
	return embeddingLookupSparse(s, "", []*G.Node{table}, ids, c, opts...)
}

// embeddingLookupSparse is EmbeddingLookupSparse of a table of one or more
// partitions, as embeddingLookup.
func embeddingLookupSparse(s *towers.Scope, name string, tables []*G.Node, ids *towers.SparseFeature, c Combiner, opts ...LookupOption) (*G.Node, error) {
	const op = "layers.EmbeddingLookupSparse"
	name, vars, err := lookupTables(op, s, name, tables)
	if err != nil {
		return nil, err
	}
	if ids == nil {
		return nil, fmt.Errorf("%s(%s): nil sparse feature", op, name)
	}
	if !isIntDtype(ids.Dtype()) {
		return nil, fmt.Errorf("%s(%s): sparse feature %q has dtype %v, want int, int64 or int32 ids", op, name, ids.Name(), ids.Dtype())
	}
	if c != CombineSum && c != CombineMean && c != CombineSqrtN {
		return nil, fmt.Errorf("%s(%s): unknown combiner %v", op, name, c)
	}
	var cfg lookupConfig
	for _, o := range opts {
		o(&cfg)
	}
	if w := cfg.weights; w != nil && (w.Dtype() != tensor.Float32 && w.Dtype() != tensor.Float64) {
		return nil, fmt.Errorf("%s(%s): weights %q have dtype %v, want float32 or float64", op, name, w.Name(), w.Dtype())
	}
	l := &sparseLookupOp{lookupBase: newLookupBase(tables, cfg, fmt.Sprintf("sparse feature %q", ids.Name())), feature: ids, combiner: c}
	out, err := G.ApplyOp(l, tables...)
	if err != nil {
		return nil, fmt.Errorf("%s(%s, %q): %w", op, name, ids.Name(), err)
	}
	if err := l.register(s, vars, out); err != nil {
		return nil, fmt.Errorf("%s(%s): %w", op, name, err)
	}
	return out, nil
}

// lookupTables checks a lookup's table, its partitions (one for a table
// not partitioned), and returns the name errors call it (name, or the one
// variable's when name is "") and its partitions' variable names.
func lookupTables(op string, s *towers.Scope, name string, tables []*G.Node) (string, []string, error) {
	if s == nil || len(tables) == 0 || slices.Contains(tables, nil) {
		return "", nil, fmt.Errorf("%s: nil scope or table", op)
	}
	vars := make([]string, len(tables))
	for i, t := range tables {
		v, ok := scopes.VariableName(s, t)
		if !ok {
			return "", nil, fmt.Errorf("%s: table %s is not a variable of %v", op, t.Name(), s)
		}
		if name == "" {
			name = v
		}
		if t.Dims() != 2 || t.Shape()[1] != tables[0].Shape()[1] || t.Dtype() != tables[0].Dtype() {
			return "", nil, fmt.Errorf("%s(%s): table %s has shape %v dtype %v, want (vocab, dim) of its partitions' dim and dtype", op, name, v, t.Shape(), t.Dtype())
		}
		if err := checkFloat(op, t); err != nil {
			return "", nil, err
		}
		vars[i] = v
	}
	return name, vars, nil
}

func isIntDtype(dt tensor.Dtype) bool {
	return dt == tensor.Int || dt == tensor.Int64 || dt == tensor.Int32
}

// lookupBase is what the lookup ops share: the table's shape and dtype,
// the padding, what the errors call the ids, and the rows of the last run
// the gradient maps back to (gradIDs, with gradScale per id and gradRow the
// output row it went to) and the gradient's buffers.
type lookupBase struct {
	serial     int64
	vocab, dim int
	dtype      tensor.Dtype
	cfg        lookupConfig
	what       string
	out        buffer
	// bounds are the first row of each partition of the table and vocab
	// ([0, vocab] for a table not partitioned); tabs the run's partition
	// backings ([][]float32 or [][]float64).
	bounds []int
	tabs   any

	ids       []int // the last run's ids, in order
	gradIDs   []int
	gradRow   []int
	gradScale []float64 // nil: every scale is 1
	// The gradient's rows, one per distinct id: uniq are the distinct
	// gradIDs in ascending order, order the positions in gradIDs sorted
	// by id (stable), uniq[u]'s at order[start[u]:start[u+1]] (order is
	// sorter's buffer).
	uniq, order, start []int
	sorter             idsort.Sorter
	// parts are each partition's gradient of the last run: which of
	// uniq fall in it (sel), their ids in the partition and the rows'
	// buffers. A table not partitioned has one, whose sel is unused.
	parts []partGrad
}

// partGrad is a partition's share of a lookup's gradient.
type partGrad struct {
	sel, ids []int
	vals32   []float32
	vals64   []float64
}

func newLookupBase(tables []*G.Node, cfg lookupConfig, what string) lookupBase {
	bounds := []int{0}
	for _, t := range tables {
		bounds = append(bounds, bounds[len(bounds)-1]+t.Shape()[0])
	}
	return lookupBase{serial: lookupSerial.Add(1), vocab: bounds[len(bounds)-1], dim: tables[0].Shape()[1], dtype: tables[0].Dtype(),
		cfg: cfg, what: what, bounds: bounds, parts: make([]partGrad, len(tables))}
}

// register adds the lookup of output out to s, once per partition: each
// partition's variable has its own sparse gradient.
func (l *lookupBase) register(s *towers.Scope, vars []string, out *G.Node) error {
	for p, v := range vars {
		if err := scopes.AddLookup(s, towers.Lookup{Variable: v, Output: out, Slices: l.slicesOf(p)}); err != nil {
			return err
		}
	}
	return nil
}

// partOf returns the partition of the table's row id and its row in the
// partition. The partitions are contiguous row ranges, the first vocab%P
// of them one row longer (partitionBounds).
func (l *lookupBase) partOf(id int) (part, row int) {
	n := len(l.bounds) - 1
	if n == 1 {
		return 0, id
	}
	q, r := l.vocab/n, l.vocab%n
	if big := r * (q + 1); id >= big {
		part = r + (id-big)/q
	} else {
		part = id / (q + 1)
	}
	return part, id - l.bounds[part]
}

// route groups the run's gradient ids by id (one gradient row per
// distinct id, in ascending order) and deals the distinct ids out to the
// partitions.
func (l *lookupBase) route() {
	l.order = l.sorter.Positions(l.gradIDs)
	l.uniq, l.start = l.uniq[:0], l.start[:0]
	for k, i := range l.order {
		if id := l.gradIDs[i]; len(l.uniq) == 0 || l.uniq[len(l.uniq)-1] != id {
			l.uniq = append(l.uniq, id)
			l.start = append(l.start, k)
		}
	}
	l.start = append(l.start, len(l.order))
	if len(l.parts) == 1 {
		return
	}
	for p := range l.parts {
		l.parts[p].sel, l.parts[p].ids = l.parts[p].sel[:0], l.parts[p].ids[:0]
	}
	for i, id := range l.uniq {
		p, row := l.partOf(id)
		l.parts[p].sel = append(l.parts[p].sel, i)
		l.parts[p].ids = append(l.parts[p].ids, row)
	}
}

// tables returns the backings of the run's partitions, in[:P].
func tables[T float](l *lookupBase, in []G.Value) ([][]T, error) {
	ts, _ := l.tabs.([][]T)
	if len(ts) != len(l.parts) {
		ts = make([][]T, len(l.parts))
		l.tabs = ts
	}
	for p := range ts {
		t, err := backing[T]("table", in[p])
		if err != nil {
			return nil, err
		}
		if len(t) != (l.bounds[p+1]-l.bounds[p])*l.dim {
			return nil, fmt.Errorf("table partition %d: %d elements, want %d", p, len(t), (l.bounds[p+1]-l.bounds[p])*l.dim)
		}
		ts[p] = t
	}
	return ts, nil
}

// row returns the table's row id from the partitions' backings.
func row[T float](l *lookupBase, ts [][]T, id int) []T {
	p, r := l.partOf(id)
	return ts[p][r*l.dim : (r+1)*l.dim]
}

func (l *lookupBase) ReturnsPtr() bool     { return false }
func (l *lookupBase) CallsExtern() bool    { return false }
func (l *lookupBase) OverwritesInput() int { return -1 }

// DiffWRT: a lookup is not differentiated with respect to its table (nor
// its ids): its table's gradient is its Slices.
func (l *lookupBase) DiffWRT(n int) []bool { return make([]bool, n) }

// SymDiff makes no gradient node: symbolic differentiation asks when the
// engine differentiates with respect to the lookup's output.
func (l *lookupBase) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	return make(G.Nodes, len(in)), nil
}

// ErrLookupInput is matched (errors.Is) by a step's errors about the data
// a lookup reads: an id outside [0, vocab) of its table, weights
// (IDWeights) that do not match their ids. They are errors of the input,
// which a server answers with 400 Bad Request (see export.ErrBadInput).
var ErrLookupInput = errors.New("embedding lookup: bad ids or weights")

// lookupInputError is an error of a lookup's data: its message names the
// ids and what is wrong; it matches ErrLookupInput.
type lookupInputError struct{ msg string }

func (e *lookupInputError) Error() string        { return e.msg }
func (e *lookupInputError) Is(target error) bool { return target == ErrLookupInput }

func lookupInputErrorf(format string, args ...any) error {
	return &lookupInputError{fmt.Sprintf(format, args...)}
}

// checkID is the error of an id outside [0, vocab).
func (l *lookupBase) checkID(id, row int) error {
	if id < 0 || id >= l.vocab {
		return lookupInputErrorf("embedding lookup: %s: row %d has id %d, out of range [0, %d) of the table", l.what, row, id, l.vocab)
	}
	return nil
}

// slicesOf returns the gradient of partition p of the table through the
// lookup in the last run given the gradient of its output: for each id
// read in the partition (padding left out), its output row of outGrad
// times its scale, at its row of the partition, the rows of an id read
// more than once summed in the order it was read (Deduplicate's sum), in
// ascending order of row. The partitions' gradients have their own
// buffers: the engine may take them at the same time.
func (l *lookupBase) slicesOf(p int) func(outGrad G.Value) (towers.IndexedSlices, error) {
	return func(outGrad G.Value) (towers.IndexedSlices, error) {
		pg := &l.parts[p]
		ids := l.uniq
		if len(l.parts) > 1 {
			ids = pg.ids
		}
		shape := []int{l.bounds[p+1] - l.bounds[p], l.dim}
		switch l.dtype {
		case tensor.Float32:
			g, err := backing[float32]("embedding lookup gradient", outGrad)
			if err != nil {
				return towers.IndexedSlices{}, err
			}
			pg.vals32, err = gradRows(l, pg, g, pg.vals32)
			return towers.IndexedSlices{Indices: ids, Values: pg.vals32, DenseShape: shape}, err
		default:
			g, err := backing[float64]("embedding lookup gradient", outGrad)
			if err != nil {
				return towers.IndexedSlices{}, err
			}
			pg.vals64, err = gradRows(l, pg, g, pg.vals64)
			return towers.IndexedSlices{Indices: ids, Values: pg.vals64, DenseShape: shape}, err
		}
	}
}

// gradRows fills buf with the gradient rows of pg's distinct ids (every
// distinct id of the run for a table not partitioned): each the first of
// its entries' scaled output rows, the others added in their order.
func gradRows[T float](l *lookupBase, pg *partGrad, g []T, buf []T) ([]T, error) {
	all := len(l.parts) == 1
	count := len(l.uniq)
	if !all {
		count = len(pg.sel)
	}
	n := count * l.dim
	if cap(buf) < n {
		buf = make([]T, n)
	}
	buf = buf[:n]
	for k := range count {
		u := k
		if !all {
			u = pg.sel[k]
		}
		dst := buf[k*l.dim : (k+1)*l.dim]
		for e, i := range l.order[l.start[u]:l.start[u+1]] {
			r := l.gradRow[i]
			if (r+1)*l.dim > len(g) {
				return buf, fmt.Errorf("embedding lookup gradient: %d elements, row %d wanted", len(g), r)
			}
			src := g[r*l.dim : (r+1)*l.dim]
			switch {
			case l.gradScale == nil && e == 0:
				copy(dst, src)
			case l.gradScale == nil:
				for j, x := range src {
					dst[j] += x
				}
			case e == 0:
				s := T(l.gradScale[i])
				for j, x := range src {
					dst[j] = s * x
				}
			default:
				s := T(l.gradScale[i])
				for j, x := range src {
					dst[j] += T(s * x) // rounded as a row of its own
				}
			}
		}
	}
	return buf, nil
}

// valuesOf returns the values of a sparse tensor's rank-1 Values: its
// Data, or an empty slice of its type for no entries (a shard whose rows
// have none), whose Data panics.
func valuesOf(t *tensor.Dense) any {
	if t.Shape().TotalSize() > 0 {
		return t.Data()
	}
	return reflect.MakeSlice(reflect.SliceOf(t.Dtype().Type), 0, 0).Interface()
}

// intsOf sets dst to the integer values of v (an int, int64 or int32
// slice).
func intsOf(v any, dst []int) ([]int, error) {
	dst = dst[:0]
	switch d := v.(type) {
	case []int:
		dst = append(dst, d...)
	case []int64:
		for _, x := range d {
			dst = append(dst, int(x))
		}
	case []int32:
		for _, x := range d {
			dst = append(dst, int(x))
		}
	default:
		return dst, fmt.Errorf("ids are a %T, want int, int64 or int32 values", v)
	}
	return dst, nil
}

// lookupOp gathers rows of its table (input 0) by the ids of input 1.
type lookupOp struct {
	lookupBase
	idsDims  int
	idsDtype tensor.Dtype
	s        *towers.Scope // for the batch row of an error
}

// Arity: the table's partitions (one for a table not partitioned), then
// the ids.
func (l *lookupOp) Arity() int { return len(l.parts) + 1 }

func (l *lookupOp) Type() hm.Type {
	ts := make([]hm.Type, 0, len(l.parts)+2)
	for range l.parts {
		ts = append(ts, tensorType(2, l.dtype))
	}
	return hm.NewFnType(append(ts, tensorType(l.idsDims, l.idsDtype), tensorType(l.idsDims+1, l.dtype))...)
}

func (l *lookupOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	ids, err := shapeOf("embedding lookup", in, len(l.parts))
	if err != nil {
		return nil, err
	}
	return append(ids.Clone(), l.dim), nil
}

func (l *lookupOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != l.Arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", l, len(in), l.Arity())
	}
	idsIn := in[len(l.parts)]
	var err error
	if l.ids, err = intsOf(idsIn.Data(), l.ids); err != nil {
		return nil, fmt.Errorf("embedding lookup: %s: %w", l.what, err)
	}
	per := 1 // ids per row
	if sh := idsIn.Shape(); len(sh) == 2 {
		per = sh[1]
	}
	l.gradIDs, l.gradRow, l.gradScale = l.gradIDs[:0], l.gradRow[:0], nil
	offset := scopes.RowOffset(l.s)
	for p, id := range l.ids {
		if err := l.checkID(id, offset+p/per); err != nil {
			return nil, err
		}
		if l.cfg.hasPadding && id == l.cfg.padding {
			continue
		}
		l.gradIDs = append(l.gradIDs, id)
		l.gradRow = append(l.gradRow, p)
	}
	l.route()
	shape := append(idsIn.Shape().Clone(), l.dim)
	return dispatch(l, in[0].Dtype(),
		func() (G.Value, error) { return gather[float32](l, in, shape) },
		func() (G.Value, error) { return gather[float64](l, in, shape) })
}

func gather[T float](l *lookupOp, in []G.Value, shape tensor.Shape) (G.Value, error) {
	ts, err := tables[T](&l.lookupBase, in)
	if err != nil {
		return nil, err
	}
	out := l.out.get(in[0].Dtype(), shape)
	o := data[T](out)
	for p, id := range l.ids {
		copy(o[p*l.dim:(p+1)*l.dim], row(&l.lookupBase, ts, id))
	}
	return out, nil
}

func (l *lookupOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", l) }
func (l *lookupOp) Hashcode() uint32      { return hashOf(l) }
func (l *lookupOp) String() string {
	return fmt.Sprintf("EmbeddingLookup#%d{%dx%d%s}", l.serial, l.vocab, l.dim, partsString(l.parts))
}

// partsString is ", P partitions" for a partitioned table, "" otherwise.
func partsString(parts []partGrad) string {
	if len(parts) == 1 {
		return ""
	}
	return fmt.Sprintf(", %d partitions", len(parts))
}

// sparseLookupOp combines, for each row of a sparse feature, the rows of
// its table (its one input) its ids name.
type sparseLookupOp struct {
	lookupBase
	feature  *towers.SparseFeature
	combiner Combiner
	rows     []int     // the last run's output row per entry
	weights  []float64 // the last run's weight per entry; nil: all 1
	den      []float64 // per output row: the divisor
}

// Arity: the table's partitions (one for a table not partitioned).
func (l *sparseLookupOp) Arity() int { return len(l.parts) }

func (l *sparseLookupOp) Type() hm.Type {
	ts := make([]hm.Type, 0, len(l.parts)+1)
	for range l.parts {
		ts = append(ts, tensorType(2, l.dtype))
	}
	return hm.NewFnType(append(ts, tensorType(2, l.dtype))...)
}

func (l *sparseLookupOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{l.feature.Rows(), l.dim}, nil
}

func (l *sparseLookupOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != l.Arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", l, len(in), l.Arity())
	}
	if err := l.read(); err != nil {
		return nil, err
	}
	return dispatch(l, in[0].Dtype(),
		func() (G.Value, error) { return combine[float32](l, in) },
		func() (G.Value, error) { return combine[float64](l, in) })
}

// read takes the run's ids, rows and weights from the sparse features,
// checking them, and sets the divisors and the gradient's rows.
func (l *sparseLookupOp) read() error {
	v := l.feature.Value()
	if v.Values == nil {
		return fmt.Errorf("embedding lookup: %s was not fed", l.what)
	}
	var err error
	if l.lookupBase.ids, err = intsOf(valuesOf(v.Values), l.lookupBase.ids); err != nil {
		return fmt.Errorf("embedding lookup: %s: %w", l.what, err)
	}
	rows := l.feature.Rows()
	l.rows = l.rows[:0]
	for e, idx := range v.Indices {
		if len(idx) == 0 || idx[0] < 0 || idx[0] >= rows {
			return fmt.Errorf("embedding lookup: %s: entry %d has index %v outside its %d rows", l.what, e, idx, rows)
		}
		l.rows = append(l.rows, idx[0])
	}
	for e, id := range l.lookupBase.ids {
		if err := l.checkID(id, l.feature.Offset()+l.rows[e]); err != nil {
			return err
		}
	}
	l.weights = l.weights[:0]
	if w := l.cfg.weights; w != nil {
		wv := w.Value()
		if wv.Values == nil || len(wv.Indices) != len(v.Indices) {
			return lookupInputErrorf("embedding lookup: %s: weights %q have %d entries, the ids %d", l.what, w.Name(), len(wv.Indices), len(v.Indices))
		}
		for e, idx := range wv.Indices {
			if len(idx) == 0 || idx[0] != l.rows[e] {
				return lookupInputErrorf("embedding lookup: %s: weight entry %d has index %v, its id row %d (weights must have the ids' indices, in order)", l.what, e, idx, l.rows[e])
			}
		}
		switch d := valuesOf(wv.Values).(type) {
		case []float32:
			for _, x := range d {
				l.weights = append(l.weights, float64(x))
			}
		case []float64:
			l.weights = append(l.weights, d...)
		default:
			return fmt.Errorf("embedding lookup: %s: weights %q are %T, want float values", l.what, w.Name(), d)
		}
	}
	weight := func(e int) float64 {
		if len(l.weights) == 0 {
			return 1
		}
		return l.weights[e]
	}
	if cap(l.den) < rows {
		l.den = make([]float64, rows)
	}
	l.den = l.den[:rows]
	clear(l.den)
	for e, r := range l.rows {
		w := weight(e)
		switch l.combiner {
		case CombineMean:
			l.den[r] += w
		case CombineSqrtN:
			l.den[r] += w * w
		}
	}
	for r, d := range l.den {
		switch {
		case l.combiner == CombineSum || d == 0:
			l.den[r] = 1
		case l.combiner == CombineSqrtN:
			l.den[r] = math.Sqrt(d)
		}
	}
	l.gradIDs, l.gradRow, l.gradScale = l.gradIDs[:0], l.gradRow[:0], l.gradScale[:0]
	scaled := l.combiner != CombineSum || len(l.weights) > 0 // else every scale is 1
	for e, id := range l.lookupBase.ids {
		if l.cfg.hasPadding && id == l.cfg.padding {
			continue
		}
		l.gradIDs = append(l.gradIDs, id)
		l.gradRow = append(l.gradRow, l.rows[e])
		if scaled {
			l.gradScale = append(l.gradScale, weight(e)/l.den[l.rows[e]])
		}
	}
	if !scaled {
		l.gradScale = nil
	}
	l.route()
	return nil
}

func combine[T float](l *sparseLookupOp, in []G.Value) (G.Value, error) {
	ts, err := tables[T](&l.lookupBase, in)
	if err != nil {
		return nil, err
	}
	out := l.out.get(in[0].Dtype(), tensor.Shape{l.feature.Rows(), l.dim})
	o := data[T](out)
	clear(o)
	for e, id := range l.lookupBase.ids {
		r := l.rows[e]
		w := 1.0
		if len(l.weights) > 0 {
			w = l.weights[e]
		}
		s := T(w / l.den[r])
		dst, src := o[r*l.dim:(r+1)*l.dim], row(&l.lookupBase, ts, id)
		for j, x := range src {
			dst[j] += s * x
		}
	}
	return out, nil
}

func (l *sparseLookupOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v", l) }
func (l *sparseLookupOp) Hashcode() uint32      { return hashOf(l) }
func (l *sparseLookupOp) String() string {
	return fmt.Sprintf("EmbeddingLookupSparse#%d{%dx%d%s, %q, %v}", l.serial, l.vocab, l.dim, partsString(l.parts), l.feature.Name(), l.combiner)
}

// EmbeddingConfig configures NewEmbedding.
type EmbeddingConfig struct {
	// Vocab and Dim are the table's shape (Vocab, Dim); both must be
	// positive.
	Vocab, Dim int
	// Dtype is the table's type: Float32 (the zero value) or Float64.
	Dtype tensor.Dtype
	// Init initializes the table when it is created; nil means
	// towers.RandomNormal(0, 1), as PyTorch's nn.Embedding. With Padded,
	// the padding row starts at zero whatever Init gives. A partitioned
	// table's partitions are initialized one by one, Init given each
	// partition's shape and random numbers seeded by its name, as
	// TensorFlow initializes partitioned variables: random initial values
	// differ from the table's unpartitioned ones (give Values for the
	// same start).
	Init towers.Initializer
	// Values, when not nil, is the table's initial value, (Vocab, Dim) of
	// Dtype (a pretrained table), instead of Init: each partition of a
	// partitioned table starts with its rows of it.
	Values *tensor.Dense
	// Padded marks PaddingID as padding in every lookup of the layer (see
	// PaddingID).
	Padded    bool
	PaddingID int
	// Partitions splits the table by rows into that many variables
	// (TensorFlow's partitioned variables with fixed_size_partitioner and
	// the "div" partition strategy; MinMaxPartitions computes a count as
	// min_max_variable_partitioner does): partition p holds a contiguous
	// range of rows, the first Vocab%Partitions partitions one row more
	// than the others, and is the variable name/embeddings/part_p. 0 or 1
	// is one variable, name/embeddings. See EmbeddingLayer.
	Partitions int
}

// EmbeddingLayer is an embedding table that owns its variable,
// name/embeddings (Vocab, Dim): every lookup reads it, and the sparse
// gradients of all lookups add up.
//
// One layer serves several features (TensorFlow's
// shared_embedding_columns): call Lookup or LookupSparse once per feature
// on the same layer value. The table stays one variable, and its gradient
// is one sparse sum over every lookup of every tower, repeated ids summed.
// A model may also read Table densely (a matrix product with it, as tied
// output embeddings do): the table's gradient is then that dense gradient
// with the lookups' rows added into it, one sum.
//
// A partitioned table (EmbeddingConfig.Partitions) is one variable per
// partition, name/embeddings/part_0, part_1, …: no buffer holds the whole
// table, each lookup reads every id's row from its partition, and each
// partition has its own sparse gradient (the rows of its ids, numbered
// within the partition), summed over the towers and applied by the
// optimizer as any variable's, the partitions at the same time. A
// checkpoint holds each partition as its own entry and file (see
// docs/checkpoints.md). Lookups give what the unpartitioned table gives.
type EmbeddingLayer struct {
	s      *towers.Scope
	name   string
	parts  []*G.Node
	table  *G.Node // parts[0], or their concatenation once Table asks
	tabErr error
	opts   []LookupOption
}

// NewEmbedding makes the embedding layer name in m, getting or creating
// its table m.Name(name)+"/embeddings" (its partitions
// m.Name(name)+"/embeddings/part_p").
func NewEmbedding(m *Module, name string, cfg EmbeddingConfig) (*EmbeddingLayer, error) {
	const op = "layers.NewEmbedding"
	if m == nil {
		return nil, fmt.Errorf("%s(%q): nil module", op, name)
	}
	l := &EmbeddingLayer{s: m.Scope(), name: m.Name(name)}
	dt, err := layerDtype(op, l.name, cfg.Dtype)
	if err != nil {
		return nil, err
	}
	if cfg.Vocab <= 0 || cfg.Dim <= 0 {
		return nil, fmt.Errorf("%s(%q): vocabulary %d, dimension %d: want both positive", op, l.name, cfg.Vocab, cfg.Dim)
	}
	if cfg.Padded && (cfg.PaddingID < 0 || cfg.PaddingID >= cfg.Vocab) {
		return nil, fmt.Errorf("%s(%q): padding id %d outside the vocabulary [0, %d)", op, l.name, cfg.PaddingID, cfg.Vocab)
	}
	bounds, err := partitionBounds(cfg.Vocab, cfg.Partitions)
	if err != nil {
		return nil, fmt.Errorf("%s(%q): %w", op, l.name, err)
	}
	var values []any // per partition, its rows of cfg.Values
	if cfg.Values != nil {
		if values, err = valueRows(cfg, dt, bounds); err != nil {
			return nil, fmt.Errorf("%s(%q): %w", op, l.name, err)
		}
	}
	if cfg.Padded {
		l.opts = append(l.opts, PaddingID(cfg.PaddingID))
	}
	for p := range len(bounds) - 1 {
		vname := name + "/embeddings"
		if len(bounds) > 2 {
			vname = fmt.Sprintf("%s/part_%d", vname, p)
		}
		init := orInit(cfg.Init, towers.RandomNormal(0, 1))
		if values != nil {
			init = rowsInit(values[p])
		}
		if cfg.Padded && bounds[p] <= cfg.PaddingID && cfg.PaddingID < bounds[p+1] {
			init = zeroRow(init, cfg.PaddingID-bounds[p], cfg.Dim)
		}
		t, err := m.Variable(vname, dt, tensor.Shape{bounds[p+1] - bounds[p], cfg.Dim}, init)
		if err != nil {
			return nil, fmt.Errorf("%s(%q): %w", op, l.name, err)
		}
		l.parts = append(l.parts, t)
	}
	if len(l.parts) == 1 {
		l.table = l.parts[0]
	}
	return l, nil
}

// partitionBounds returns the first row of each of parts partitions of a
// table of vocab rows, then vocab: contiguous ranges, the first vocab%parts
// one row longer (TensorFlow's "div" strategy). parts 0 is 1.
func partitionBounds(vocab, parts int) ([]int, error) {
	switch {
	case parts < 0:
		return nil, fmt.Errorf("%d partitions, want a positive count (or 0: one)", parts)
	case parts > vocab:
		return nil, fmt.Errorf("%d partitions of a vocabulary of %d: every partition needs a row", parts, vocab)
	case parts == 0:
		parts = 1
	}
	bounds := make([]int, parts+1)
	q, r := vocab/parts, vocab%parts
	for p := range parts {
		bounds[p+1] = bounds[p] + q
		if p < r {
			bounds[p+1]++
		}
	}
	return bounds, nil
}

// MinMaxPartitions is the number of partitions TensorFlow's
// min_max_variable_partitioner gives a table of vocab rows of dim elements
// of dtype dt: each partition as many whole rows as fit in minSliceBytes
// (one at least), as many partitions as that takes, at most maxPartitions.
// It is an error for a count or size that is not positive or a dtype that
// is not float32 or float64.
func MinMaxPartitions(vocab, dim int, dt tensor.Dtype, maxPartitions int, minSliceBytes int64) (int, error) {
	if vocab <= 0 || dim <= 0 || maxPartitions <= 0 || minSliceBytes <= 0 {
		return 0, fmt.Errorf("layers.MinMaxPartitions: vocabulary %d, dimension %d, %d partitions at most, slices of %d bytes at least: want all positive", vocab, dim, maxPartitions, minSliceBytes)
	}
	if dt != tensor.Float32 && dt != tensor.Float64 {
		return 0, fmt.Errorf("layers.MinMaxPartitions: dtype %v, want float32 or float64", dt)
	}
	rowsPer := max(1, minSliceBytes/(int64(dim)*int64(dt.Size())))
	n := (int64(vocab) + rowsPer - 1) / rowsPer
	return int(min(n, int64(maxPartitions))), nil
}

// valueRows checks cfg.Values and returns each partition's rows of it.
func valueRows(cfg EmbeddingConfig, dt tensor.Dtype, bounds []int) ([]any, error) {
	v := cfg.Values
	if cfg.Init != nil {
		return nil, fmt.Errorf("both Init and Values given: want one")
	}
	if v.Dtype() != dt || !v.Shape().Eq(tensor.Shape{cfg.Vocab, cfg.Dim}) {
		return nil, fmt.Errorf("initial values have shape %v dtype %v, the table (%d, %d) %v", v.Shape(), v.Dtype(), cfg.Vocab, cfg.Dim, dt)
	}
	all, err := numeric.Slice(v)
	if err != nil {
		return nil, fmt.Errorf("initial values: %w", err)
	}
	out := make([]any, len(bounds)-1)
	for p := range out {
		lo, hi := bounds[p]*cfg.Dim, bounds[p+1]*cfg.Dim
		switch d := all.(type) {
		case []float32:
			out[p] = d[lo:hi]
		case []float64:
			out[p] = d[lo:hi]
		default:
			return nil, fmt.Errorf("initial values are %T, want float32 or float64", all)
		}
	}
	return out, nil
}

// rowsInit initializes a variable from rows, a slice of its elements.
func rowsInit(rows any) towers.Initializer {
	return func(_ *rand.Rand, _ tensor.Dtype, _ tensor.Shape, backing any) error {
		return numeric.CopyInto(backing, rows)
	}
}

// zeroRow is init with row of every table it fills set to zero.
func zeroRow(init towers.Initializer, row, dim int) towers.Initializer {
	return func(rng *rand.Rand, dt tensor.Dtype, shape tensor.Shape, backing any) error {
		if err := init(rng, dt, shape, backing); err != nil {
			return err
		}
		switch d := backing.(type) {
		case []float32:
			clear(d[row*dim : (row+1)*dim])
		case []float64:
			clear(d[row*dim : (row+1)*dim])
		}
		return nil
	}
}

// Table returns the tower's node of the layer's table. For a partitioned
// table it is the partitions concatenated by rows, made on the first call:
// a dense read of the whole table (a matrix product with it), whose
// gradient reaches every partition; lookups read the partitions
// themselves. It is nil if the concatenation cannot be made.
func (l *EmbeddingLayer) Table() *G.Node {
	if l.table == nil && l.tabErr == nil {
		l.table, l.tabErr = G.Concat(0, l.parts...)
	}
	return l.table
}

// Partitions returns the tower's nodes of the table's partitions, in row
// order: the one table when it is not partitioned.
func (l *EmbeddingLayer) Partitions() []*G.Node { return slices.Clone(l.parts) }

// Lookup is EmbeddingLookup of the layer's table.
func (l *EmbeddingLayer) Lookup(ids *G.Node) (*G.Node, error) {
	return embeddingLookup(l.s, l.name+"/embeddings", l.parts, ids, l.opts...)
}

// LookupSparse is EmbeddingLookupSparse of the layer's table.
func (l *EmbeddingLayer) LookupSparse(ids *towers.SparseFeature, c Combiner, opts ...LookupOption) (*G.Node, error) {
	return embeddingLookupSparse(l.s, l.name+"/embeddings", l.parts, ids, c, append(append([]LookupOption(nil), l.opts...), opts...)...)
}
