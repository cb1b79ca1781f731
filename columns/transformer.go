package columns

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/sharding"
)

// Kind is a Transformer's PreprocessKind: the kind of its record in an
// export, under which package columns registers its loader.
const Kind = "towerflow/columns"

// Label says how a Transformer parses a label feature into the batch's
// Labels.
type Label struct {
	// Key is the raw feature and the name of the label in Batch.Labels.
	Key string
	// Vocabulary, when set, maps string labels (Bytes; integers by their
	// decimal string) to their index, a class id (TensorFlow's
	// label_vocabulary); a label outside it is an error. Without it,
	// labels are numbers (Floats or Int64s).
	Vocabulary []string
	// Dimension is the number of values per record (default 1).
	Dimension int
	// Int64 makes the label int64 class ids rather than float32 values.
	// Labels from a Vocabulary are always int64.
	Int64 bool
}

// ExampleWeight says how a Transformer parses an example-weight feature
// (TensorFlow's weight_column) into the batch's Labels, under Key: one
// float per record, [rows, 1] float32. It is parsed with the label
// (batches without labels have no weights either); a record without it
// takes Default, or is an error when Default is nil.
type ExampleWeight struct {
	Key     string
	Default *float32
}

// Config is what a Transformer is made of: the columns the model reads
// (the columns they are made of are read through them), and optionally a
// label and an example weight.
type Config struct {
	Columns []Column
	Label   *Label
	Weight  *ExampleWeight
}

// Transformer turns batches of raw records into model inputs by its
// columns. It is immutable: Parse is safe for concurrent use.
type Transformer struct {
	cfg    Config
	dense  []denseOut
	sparse []sparseOut
	label  *labelParser
	// weighted is whether a weighted column makes a feature.
	weighted bool
	// makes is the column that makes each feature of the batch.
	makes map[string]Column
	// crossOuts is, by crossed column's name, the sparse features of the
	// batch that hold its ids: its own, a weighted column's of it.
	crossOuts map[string][]string
}

// denseOut is a dense float32 feature of the batch: a numeric column's
// values or an indicator's (a bucketized column's) multi-hot block.
type denseOut struct {
	name    string
	numeric *NumericColumn    // or:
	cat     CategoricalColumn // the multi-hot of cat's ids
}

// sparseOut is a sparse feature of ids (and for a weighted column its
// weights) of the batch.
type sparseOut struct {
	cat CategoricalColumn
}

// NewTransformer checks cfg and returns its Transformer. Every column
// must be fitted: a column that needs the data (Standardize,
// BucketizedQuantiles, VocabularyFromData) is an error; Fit makes those.
// Two different columns of one name are an error.
func NewTransformer(cfg Config) (*Transformer, error) {
	t, err := newTransformer(cfg)
	if err != nil {
		return nil, fmt.Errorf("columns: %w", err)
	}
	return t, nil
}

// newTransformer is NewTransformer, its errors without the package's
// prefix.
func newTransformer(cfg Config) (*Transformer, error) {
	if len(cfg.Columns) == 0 {
		return nil, errors.New("a transformer needs at least one column")
	}
	t := &Transformer{cfg: Config{Columns: slices.Clone(cfg.Columns), Label: cfg.Label.clone(), Weight: cfg.Weight.clone()}, makes: map[string]Column{}, crossOuts: map[string][]string{}}
	add := func(name string, c Column) error {
		if prev, ok := t.makes[name]; ok {
			if !sameColumn(prev, c) {
				return fmt.Errorf("two different columns make the feature %q (%T and %T)", name, prev, c)
			}
			return nil
		}
		t.makes[name] = c
		switch c := c.(type) {
		case *NumericColumn:
			t.dense = append(t.dense, denseOut{name: name, numeric: c})
		case *IndicatorColumn:
			t.dense = append(t.dense, denseOut{name: name, cat: c.cat})
		case CategoricalColumn:
			t.sparse = append(t.sparse, sparseOut{cat: c})
			cross, _ := c.(*CrossedColumn)
			if w, ok := c.(*WeightedColumn); ok {
				cross, _ = w.cat.(*CrossedColumn)
			}
			if cross != nil {
				t.crossOuts[cross.Name()] = append(t.crossOuts[cross.Name()], name)
			}
		}
		return nil
	}
	for i, c := range cfg.Columns {
		if c == nil || isNil(c) {
			return nil, fmt.Errorf("column %d is nil", i)
		}
		if err := c.validate(); err != nil {
			return nil, err
		}
		if !c.fitted() {
			return nil, fmt.Errorf("column %q needs statistics of the data (Standardize, BucketizedQuantiles or VocabularyFromData): make the transformer with Fit", c.Name())
		}
		var err error
		switch c := c.(type) {
		case *NumericColumn:
			err = add(c.Name(), c)
		case *BucketizedColumn:
			// Read densely (one-hot) by InputLayer, sparsely by
			// LinearLogits.
			if err = add(c.Name(), c); err == nil {
				ind := Indicator(c)
				err = add(ind.Name(), ind)
			}
		case *IndicatorColumn:
			err = add(c.Name(), c)
		case *EmbeddingColumn:
			err = add(c.cat.Name(), c.cat)
		case CategoricalColumn:
			err = add(c.Name(), c)
		default:
			err = fmt.Errorf("column %q is a %T, not one of this package's", c.Name(), c)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, d := range t.dense {
		if _, ok := d.cat.(*WeightedColumn); ok {
			t.weighted = true
		}
	}
	for _, s := range t.sparse {
		if w, ok := s.cat.(*WeightedColumn); ok {
			t.weighted = true
			if prev, dup := t.makes[w.WeightsName()]; dup {
				return nil, fmt.Errorf("feature %q of weighted column %q's weights is also made by %T", w.WeightsName(), w.Name(), prev)
			}
		}
	}
	if cfg.Weight != nil && cfg.Label == nil {
		return nil, fmt.Errorf("example weight %q without a label: weights are parsed with the label", cfg.Weight.Key)
	}
	if t.cfg.Label != nil {
		lp, err := newLabelParser(*t.cfg.Label, t.cfg.Weight)
		if err != nil {
			return nil, err
		}
		t.label = lp
	}
	return t, nil
}

// sameColumn reports whether a and b are one column: the same value or
// equal definitions.
func sameColumn(a, b any) bool {
	if a == b {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// Columns returns the Transformer's columns, fitted, in the order given:
// what the model function passes to InputLayer and LinearLogits.
func (t *Transformer) Columns() []Column { return slices.Clone(t.cfg.Columns) }

// Column returns the Transformer's column called name, fitted: one of its
// Columns, or else a column whose batch feature one of them makes (the
// categorical column of an Embedding, read by LinearLogits too; a
// bucketized column's indicator). A model function that holds the
// columns it defined before Fit (which fits copies) finds the fitted
// ones by their names here.
func (t *Transformer) Column(name string) (Column, bool) {
	for _, c := range t.cfg.Columns {
		if c.Name() == name {
			return c, true
		}
	}
	c, ok := t.makes[name]
	return c, ok
}

// Config returns (a copy of) the Transformer's configuration, its columns
// fitted.
func (t *Transformer) Config() Config {
	return Config{Columns: slices.Clone(t.cfg.Columns), Label: t.cfg.Label.clone(), Weight: t.cfg.Weight.clone()}
}

// clone is a copy of l that shares no memory with it (nil for nil).
func (l *Label) clone() *Label {
	if l == nil {
		return nil
	}
	c := *l
	c.Vocabulary = slices.Clone(l.Vocabulary)
	return &c
}

// clone is a copy of w that shares no memory with it (nil for nil).
func (w *ExampleWeight) clone() *ExampleWeight {
	if w == nil {
		return nil
	}
	c := *w
	if w.Default != nil {
		d := *w.Default
		c.Default = &d
	}
	return &c
}

// recordErrorf is the error of Parse about the feature of the record-th
// example: a *dataset.ParseError.
func recordErrorf(record int, feature, format string, args ...any) error {
	return &dataset.ParseError{Example: record, Feature: feature, Err: fmt.Errorf(format, args...)}
}

// quote is a value for an error message: strings quoted, long ones cut.
func quote(b []byte) string {
	const max = 64
	if len(b) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		return fmt.Sprintf("%q… (%d bytes)", b[:cut], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// Parse turns examples into a batch of len(examples) rows: each numeric
// column a dense float32 feature [rows, shape...] under its name; each
// categorical column a sharding.SparseCOO of int64 ids [rows, most ids of
// a record (at least 1)] under its name (a weighted column also its
// float32 weights, at the same indices, under WeightsName); each
// bucketized column and indicator column a dense float32 multi-hot
// feature [rows, NumBuckets] under the indicator's name
// (Indicator(c).Name()); the label and example weight, when configured
// and the records have the label, in Labels. A missing number (or NaN)
// takes the column's default; a missing categorical feature is an empty
// bag; a value outside a vocabulary goes to its OOV bucket or default.
// An error about the data is a *dataset.ParseError naming the record
// (its index in examples) and the feature, its message the value.
func (t *Transformer) Parse(examples []dataset.Example) (sharding.Batch, error) {
	return t.ParseBounded(examples, nil)
}

// ParseBounded is Parse for a caller that takes at most most[name]
// values of an example's sparse feature name (dataset.BoundedParser): a
// record whose crossed column would make more ids than a sparse feature
// holding them takes, or than its MaxCrosses, is an error of the record
// before any of its ids is made. Serving gives it the signature's widths,
// so that a request's crosses make no more ids than the signature takes.
func (t *Transformer) ParseBounded(examples []dataset.Example, most map[string]int) (sharding.Batch, error) {
	if len(examples) == 0 {
		return sharding.Batch{}, errNoExamples
	}
	var arena preparedRow
	rows := make([]*preparedRow, len(examples))
	all := make([]preparedRow, len(examples))
	ps := rowState{crossMost: t.crossBounds(most)}
	for r, ex := range examples {
		at := arena.lens()
		if err := t.prepare(ex, r, &ps, &arena); err != nil {
			return sharding.Batch{}, err
		}
		all[r] = arena.since(at)
		rows[r] = &all[r]
		if r == 0 {
			arena.reserve(len(examples) - 1)
		}
	}
	return t.assemble(rows)
}

// crossBounds is, by crossed column's name, the fewest values most
// gives a sparse feature holding the column's ids; nil where most bounds
// none.
func (t *Transformer) crossBounds(most map[string]int) map[string]int {
	var bounds map[string]int
	for cross, outs := range t.crossOuts {
		for _, name := range outs {
			m, ok := most[name]
			if !ok {
				continue
			}
			if bounds == nil {
				bounds = map[string]int{}
			}
			if b, ok := bounds[cross]; !ok || m < b {
				bounds[cross] = m
			}
		}
	}
	return bounds
}

// ---- numeric ----

// values returns the numeric column's values of record ex (row row of
// the batch) into dst (len Dimension()), defaulted, not normalized.
func (c *NumericColumn) values(ex dataset.Example, row int, dst []float32) error {
	f := ex[c.key]
	n := len(dst)
	def := func(i int) (float32, error) {
		switch len(c.def) {
		case 0:
			return 0, recordErrorf(row, c.key, "missing value (element %d) and numeric column %q has no default", i, c.key)
		case 1:
			return c.def[0], nil
		}
		return c.def[i], nil
	}
	if f.Len() == 0 {
		if f.Bytes != nil {
			return recordErrorf(row, c.key, "numeric column %q has an empty bytes list; want floats or int64s", c.key)
		}
		for i := range dst {
			v, err := def(i)
			if err != nil {
				return err
			}
			dst[i] = v
		}
		return nil
	}
	if err := f.Validate(); err != nil {
		return recordErrorf(row, c.key, "%v", err)
	}
	if f.Len() != n {
		return recordErrorf(row, c.key, "%d values, numeric column %q of shape %v wants %d", f.Len(), c.key, c.shape, n)
	}
	switch f.Kind() {
	case dataset.KindFloat:
		copy(dst, f.Floats)
	case dataset.KindInt64:
		for i, x := range f.Int64s {
			dst[i] = float32(x)
		}
	default:
		return recordErrorf(row, c.key, "value %s is a %v list; numeric column %q wants floats or int64s", quote(f.Bytes[0]), f.Kind(), c.key)
	}
	for i, x := range dst {
		switch {
		case math.IsNaN(float64(x)):
			v, err := def(i)
			if err != nil {
				return err
			}
			dst[i] = v
		case math.IsInf(float64(x), 0):
			return recordErrorf(row, c.key, "value %v (element %d) is not finite", x, i)
		}
	}
	return nil
}

// normalize applies the column's normalizer to vals in place.
func (c *NumericColumn) normalize(vals []float32) {
	if n := c.normalizer; n != nil {
		for i, x := range vals {
			vals[i] = float32((float64(x) - n.Mean) / n.Stddev)
		}
	}
}

// ---- categorical ----

// rowState is what the parse of one record computes once and reuses:
// each categorical column's ids (rawIDs) and each crossed raw key's
// values' hashes, made the first time a column needs them (an
// indicator, a sparse feature and crosses read the same ones), and the
// buffers reused from record to record.
type rowState struct {
	ex  dataset.Example
	row int // ex's index in the batch, for errors
	// The raw ids of column idCols[i] are idArena[idAt[i][0]:idAt[i][1]];
	// the hashes of raw feature hashKeys[i] hashArena[hashAt[i][0]:...].
	// (A record's columns are few: a search beats a map.)
	idCols    []CategoricalColumn
	idAt      [][2]int
	idArena   []int64
	hashKeys  []string
	hashAt    [][2]int
	hashArena []uint64
	bufs      [][]int64 // idsOf's buffers, by depth
	depth     int

	vals      []float32      // a bucketized column's source values
	crossMost map[string]int // by crossed column, the most ids a record's caller takes (ParseBounded)
	keys      [][]uint64     // a crossed column's ids of its categorical keys, by key
	views     [][]uint64     // a crossed column's values' hashes or ids, by key
	pos       []int          // a crossed column's combination
	combo     []uint64
}

// reset makes ps the state of record ex, the row-th of its batch.
func (ps *rowState) reset(ex dataset.Example, row int) {
	ps.ex, ps.row = ex, row
	ps.idCols, ps.idAt, ps.idArena = ps.idCols[:0], ps.idAt[:0], ps.idArena[:0]
	ps.hashKeys, ps.hashAt, ps.hashArena = ps.hashKeys[:0], ps.hashAt[:0], ps.hashArena[:0]
}

// idsOf is c's raw ids (rawIDs) of the record; c is not weighted.
func (ps *rowState) idsOf(c CategoricalColumn) ([]int64, error) {
	for i, made := range ps.idCols {
		if made == c {
			at := ps.idAt[i]
			return ps.idArena[at[0]:at[1]:at[1]], nil
		}
	}
	// c's ids are made in a buffer of the depth's own, then appended: a
	// crossed column makes its keys' ids (appended to the arena) as it
	// goes, and reads no key past one without values.
	if len(ps.bufs) == ps.depth {
		ps.bufs = append(ps.bufs, nil)
	}
	d := ps.depth
	ps.depth++
	ids, err := rawIDs(c, ps.ex, ps.row, ps.bufs[d][:0], ps)
	ps.depth--
	ps.bufs[d] = ids
	if err != nil {
		return nil, err
	}
	start := len(ps.idArena)
	ps.idArena = append(ps.idArena, ids...)
	end := len(ps.idArena)
	ps.idCols, ps.idAt = append(ps.idCols, c), append(ps.idAt, [2]int{start, end})
	return ps.idArena[start:end:end], nil
}

// hashesOf is the Fingerprint64 of each value of the record's raw
// feature key, as crosses hash them (integers by their decimal string;
// "" is a missing value and has none); c is the crossed column that
// asks, for errors.
func (ps *rowState) hashesOf(key string, c *CrossedColumn) ([]uint64, error) {
	for i, made := range ps.hashKeys {
		if made == key {
			at := ps.hashAt[i]
			return ps.hashArena[at[0]:at[1]:at[1]], nil
		}
	}
	start := len(ps.hashArena)
	f := ps.ex[key]
	if err := f.Validate(); err != nil {
		return nil, recordErrorf(ps.row, key, "%v", err)
	}
	switch f.Kind() {
	case dataset.KindBytes:
		for _, v := range f.Bytes {
			if len(v) > 0 {
				ps.hashArena = append(ps.hashArena, Fingerprint64(v))
			}
		}
	case dataset.KindInt64:
		var buf [20]byte
		for _, v := range f.Int64s {
			ps.hashArena = append(ps.hashArena, Fingerprint64(intString(buf[:], v)))
		}
	case dataset.KindFloat:
		if len(f.Floats) > 0 {
			return nil, recordErrorf(ps.row, key, "value %v is a float; crossed column %q wants strings or int64s", f.Floats[0], c.Name())
		}
	}
	end := len(ps.hashArena)
	ps.hashKeys, ps.hashAt = append(ps.hashKeys, key), append(ps.hashAt, [2]int{start, end})
	return ps.hashArena[start:end:end], nil
}

func (ps *rowState) floats(n int) []float32 {
	if cap(ps.vals) < n {
		ps.vals = make([]float32, n)
	}
	return ps.vals[:n]
}

// bag appends record ex's ids of c to ids (the dropped ones left out),
// and for a weighted column their weights to ws (ws is nil otherwise).
func bag(c CategoricalColumn, ex dataset.Example, row int, ids []int64, ws []float32, ps *rowState) ([]int64, []float32, error) {
	w, weighted := c.(*WeightedColumn)
	if !weighted {
		all, err := ps.idsOf(c)
		if err != nil {
			return nil, nil, err
		}
		for _, id := range all {
			if id >= 0 {
				ids = append(ids, id)
			}
		}
		return ids, nil, nil
	}
	start := len(ids)
	all, err := ps.idsOf(w.cat)
	if err != nil {
		return nil, nil, err
	}
	ids = append(ids, all...)
	f := ex[w.weightKey]
	n := len(ids) - start
	switch {
	case f.Len() == 0 && n == 0:
	case f.Kind() == dataset.KindBytes && f.Len() > 0:
		return nil, nil, recordErrorf(row, w.weightKey, "weight %s is a string; weighted column %q wants numbers", quote(f.Bytes[0]), w.Name())
	case f.Len() != n:
		return nil, nil, recordErrorf(row, w.weightKey, "%d weights for %d values of %q (weighted column %q)", f.Len(), n, w.cat.Name(), w.Name())
	}
	if ws == nil {
		ws = []float32{}
	}
	out := start
	for i := start; i < len(ids); i++ {
		if ids[i] < 0 {
			continue
		}
		ids[out] = ids[i]
		if f.Int64s != nil {
			ws = append(ws, float32(f.Int64s[i-start]))
		} else {
			x := f.Floats[i-start]
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, nil, recordErrorf(row, w.weightKey, "weight %v (element %d) is not finite (weighted column %q)", x, i-start, w.Name())
			}
			ws = append(ws, x)
		}
		out++
	}
	return ids[:out], ws, nil
}

// rawIDs appends record ex's ids of c to ids, one per value (-1 for a
// value dropped); c is not weighted.
func rawIDs(c CategoricalColumn, ex dataset.Example, row int, ids []int64, ps *rowState) ([]int64, error) {
	switch c := c.(type) {
	case *VocabularyColumn:
		return c.ids(ex, row, ids)
	case *HashBucketColumn:
		return c.ids(ex, row, ids)
	case *IdentityColumn:
		return c.ids(ex, row, ids)
	case *BucketizedColumn:
		return c.ids(ex, row, ids, ps)
	case *CrossedColumn:
		return c.ids(ex, row, ids, ps)
	}
	return nil, fmt.Errorf("columns: %q is a %T, which gives no ids", c.Name(), c)
}

// stringValues calls f with each value of the feature key of ex as bytes
// (integers as their decimal string); floats are an error of what
// column() describes.
func stringValues(ex dataset.Example, row int, key string, column func() string, f func(v []byte) error) error {
	feat := ex[key]
	if err := feat.Validate(); err != nil {
		return recordErrorf(row, key, "%v", err)
	}
	switch feat.Kind() {
	case dataset.KindBytes:
		for _, v := range feat.Bytes {
			if err := f(v); err != nil {
				return err
			}
		}
	case dataset.KindInt64:
		var buf [20]byte
		for _, v := range feat.Int64s {
			if err := f(intString(buf[:], v)); err != nil {
				return err
			}
		}
	case dataset.KindFloat:
		if len(feat.Floats) > 0 {
			return recordErrorf(row, key, "value %v is a float; %s wants strings or int64s", feat.Floats[0], column())
		}
	}
	return nil
}

func (c *VocabularyColumn) ids(ex dataset.Example, row int, ids []int64) ([]int64, error) {
	err := stringValues(ex, row, c.key, c.describe, func(v []byte) error {
		if len(v) == 0 { // missing: dropped
			ids = append(ids, -1)
			return nil
		}
		ids = append(ids, c.id(v))
		return nil
	})
	return ids, err
}

func (c *VocabularyColumn) describe() string { return fmt.Sprintf("vocabulary column %q", c.key) }

// id is v's id: its index, else its OOV bucket, else the default (-1:
// dropped).
func (c *VocabularyColumn) id(v []byte) int64 {
	if i, ok := c.index[string(v)]; ok {
		return int64(i)
	}
	if c.oov > 0 {
		return int64(len(c.vocab)) + HashBucketID(v, c.oov)
	}
	return int64(c.def)
}

func (c *HashBucketColumn) ids(ex dataset.Example, row int, ids []int64) ([]int64, error) {
	err := stringValues(ex, row, c.key, func() string { return fmt.Sprintf("hash bucket column %q", c.key) }, func(v []byte) error {
		if len(v) == 0 { // missing: dropped
			ids = append(ids, -1)
			return nil
		}
		ids = append(ids, HashBucketID(v, c.buckets))
		return nil
	})
	return ids, err
}

func (c *IdentityColumn) ids(ex dataset.Example, row int, ids []int64) ([]int64, error) {
	f := ex[c.key]
	if err := f.Validate(); err != nil {
		return nil, recordErrorf(row, c.key, "%v", err)
	}
	switch f.Kind() {
	case dataset.KindBytes:
		if len(f.Bytes) > 0 {
			return nil, recordErrorf(row, c.key, "value %s is a string; identity column %q wants int64s", quote(f.Bytes[0]), c.key)
		}
	case dataset.KindFloat:
		if len(f.Floats) > 0 {
			return nil, recordErrorf(row, c.key, "value %v is a float; identity column %q wants int64s", f.Floats[0], c.key)
		}
	}
	for _, v := range f.Int64s {
		switch {
		case v >= 0 && v < int64(c.buckets):
			ids = append(ids, v)
		case c.hasDefault:
			ids = append(ids, int64(c.def))
		case v < 0:
			ids = append(ids, -1)
		default:
			return nil, recordErrorf(row, c.key, "value %d outside identity column %q's [0, %d) and no default", v, c.key, c.buckets)
		}
	}
	return ids, nil
}

func (c *BucketizedColumn) ids(ex dataset.Example, row int, ids []int64, ps *rowState) ([]int64, error) {
	src := c.source
	vals := ps.floats(src.Dimension())
	if err := src.values(ex, row, vals); err != nil {
		return nil, err
	}
	src.normalize(vals)
	per := int64(len(c.boundaries) + 1)
	for i, x := range vals {
		ids = append(ids, int64(i)*per+int64(c.bucket(float64(x))))
	}
	return ids, nil
}

// bucket returns x's bucket: the number of boundaries <= x.
func (c *BucketizedColumn) bucket(x float64) int {
	i, _ := slices.BinarySearchFunc(c.boundaries, x, func(b, x float64) int {
		if b <= x {
			return -1
		}
		return 1
	})
	return i
}

func (c *CrossedColumn) ids(ex dataset.Example, row int, ids []int64, ps *rowState) ([]int64, error) {
	n := len(c.keys)
	if cap(ps.keys) < n {
		ps.keys, ps.views = make([][]uint64, n), make([][]uint64, n)
		ps.pos, ps.combo = make([]int, n), make([]uint64, n)
	}
	hashes, pos, combo := ps.views[:n], ps.pos[:n], ps.combo[:n]
	clear(pos)
	// Every key is read, so that a bad value is an error whether or not
	// another key is empty (as TensorFlow transforms every column a cross
	// reads).
	empty := false
	for k, key := range c.keys {
		switch key := key.(type) {
		case RawKey:
			all, err := ps.hashesOf(string(key), c)
			if err != nil {
				return nil, err
			}
			hashes[k] = all
		case CategoricalColumn:
			all, err := ps.idsOf(key)
			if err != nil {
				return nil, err
			}
			own := ps.keys[k][:0]
			for _, id := range all {
				if id >= 0 {
					own = append(own, uint64(id))
				}
			}
			ps.keys[k], hashes[k] = own, own
		}
		if len(hashes[k]) == 0 {
			empty = true
		}
	}
	if empty {
		return ids, nil // a key without values: no crosses
	}
	if err := c.checkCrosses(hashes, row, ps.crossMost); err != nil {
		return nil, err
	}
	// Every combination, the last key varying fastest.
	for {
		for k := range combo {
			combo[k] = hashes[k][pos[k]]
		}
		ids = append(ids, crossHash(c.hashKey, combo, c.buckets))
		k := len(pos) - 1
		for ; k >= 0; k-- {
			if pos[k]++; pos[k] < len(hashes[k]) {
				break
			}
			pos[k] = 0
		}
		if k < 0 {
			return ids, nil
		}
	}
}

// checkCrosses is the error of a record whose keys' values (hashes, by
// key, none empty) make more than the column's MaxCrosses combinations,
// or than most gives the column.
func (c *CrossedColumn) checkCrosses(hashes [][]uint64, row int, most map[string]int) error {
	limit, of := c.maxCrosses, fmt.Sprintf("the crossed column's MaxCrosses %d", c.maxCrosses)
	if m, ok := most[c.Name()]; ok && m < limit {
		limit, of = m, fmt.Sprintf("the serving signature takes (at most %d an example)", m)
	}
	n := 1
	for _, h := range hashes {
		if len(h) > limit/n {
			return recordErrorf(row, c.Name(), "%s, more than %s", c.describeCrosses(hashes), of)
		}
		n *= len(h)
	}
	return nil
}

// describeCrosses says how many combinations the keys' values make:
// "keys a (2 values) × b (4 values) make 8 combinations".
func (c *CrossedColumn) describeCrosses(hashes [][]uint64) string {
	keys := make([]string, len(hashes))
	total := big.NewInt(1)
	for k, h := range hashes {
		keys[k] = fmt.Sprintf("%s (%d values)", c.keys[k].crossName(), len(h))
		total.Mul(total, big.NewInt(int64(len(h))))
	}
	return fmt.Sprintf("keys %s make %s combinations", strings.Join(keys, " × "), total)
}

// ---- labels ----

type labelParser struct {
	l      Label
	dim    int
	index  map[string]int
	weight *ExampleWeight
}

func newLabelParser(l Label, w *ExampleWeight) (*labelParser, error) {
	p := &labelParser{l: l, dim: max(l.Dimension, 1), weight: w}
	if l.Key == "" {
		return nil, errors.New("label with an empty key")
	}
	if l.Dimension < 0 {
		return nil, fmt.Errorf("label %q: dimension %d", l.Key, l.Dimension)
	}
	if l.Vocabulary != nil {
		if len(l.Vocabulary) == 0 {
			return nil, fmt.Errorf("label %q: empty vocabulary", l.Key)
		}
		p.index = make(map[string]int, len(l.Vocabulary))
		for i, v := range l.Vocabulary {
			if j, dup := p.index[v]; dup {
				return nil, fmt.Errorf("label %q: vocabulary entry %q at %d and %d", l.Key, v, j, i)
			}
			p.index[v] = i
		}
	}
	if w != nil {
		if w.Key == "" || w.Key == l.Key {
			return nil, fmt.Errorf("example weight key %q: want a key that is not empty and not the label's", w.Key)
		}
		if d := w.Default; d != nil && (math.IsNaN(float64(*d)) || math.IsInf(float64(*d), 0) || *d < 0) {
			return nil, fmt.Errorf("example weight %q: default %v, want a finite non-negative number", w.Key, *d)
		}
	}
	return p, nil
}

// prepare sets into's label and example weight to record ex's (the
// row-th of its batch), when it has the label.
func (p *labelParser) prepare(ex dataset.Example, row int, into *preparedRow) error {
	key := p.l.Key
	f := ex[key]
	into.hasLabel, into.weight = false, 0
	if f.Len() == 0 {
		return nil
	}
	if err := f.Validate(); err != nil {
		return recordErrorf(row, key, "%v", err)
	}
	if f.Len() != p.dim {
		return recordErrorf(row, key, "%d label values, want %d", f.Len(), p.dim)
	}
	asInt := p.l.Int64 || p.index != nil
	switch {
	case p.index != nil:
		err := stringValues(ex, row, key, func() string { return fmt.Sprintf("label %q", key) }, func(v []byte) error {
			i, ok := p.index[string(v)]
			if !ok {
				return recordErrorf(row, key, "label %s is not in the label vocabulary %q", quote(v), p.l.Vocabulary)
			}
			into.labelI = append(into.labelI, int64(i))
			return nil
		})
		if err != nil {
			return err
		}
	case f.Kind() == dataset.KindBytes:
		return recordErrorf(row, key, "label %s is a string and the label has no vocabulary", quote(f.Bytes[0]))
	case f.Kind() == dataset.KindInt64:
		for _, v := range f.Int64s {
			if asInt {
				into.labelI = append(into.labelI, v)
			} else {
				into.labelF = append(into.labelF, float32(v))
			}
		}
	default:
		for _, v := range f.Floats {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return recordErrorf(row, key, "label %v is not a finite number", v)
			}
			if !asInt {
				into.labelF = append(into.labelF, v)
				continue
			}
			if v != float32(math.Trunc(float64(v))) {
				return recordErrorf(row, key, "label %v is not an integer class id", v)
			}
			into.labelI = append(into.labelI, int64(v))
		}
	}
	if w := p.weight; w != nil {
		f := ex[w.Key]
		switch {
		case f.Len() == 0 && w.Default != nil:
			into.weight = *w.Default
		case f.Len() == 0:
			return recordErrorf(row, w.Key, "no example weight, and it has no default")
		case f.Len() != 1:
			return recordErrorf(row, w.Key, "%d example weights, want 1", f.Len())
		case f.Kind() == dataset.KindFloat:
			into.weight = f.Floats[0]
		case f.Kind() == dataset.KindInt64:
			into.weight = float32(f.Int64s[0])
		default:
			return recordErrorf(row, w.Key, "example weight %s is a string; want a number", quote(f.Bytes[0]))
		}
		if x := float64(into.weight); math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return recordErrorf(row, w.Key, "example weight %v, want a finite non-negative number", into.weight)
		}
	}
	into.hasLabel = true
	return nil
}

// assemble is the batch's labels (and example weights) from its rows:
// none when no record has the label; an error when some have it and
// others not.
func (p *labelParser) assemble(rows []*preparedRow) (map[string]*tensor.Dense, error) {
	key := p.l.Key
	have := 0
	for _, r := range rows {
		if r.hasLabel {
			have++
		}
	}
	if have == 0 {
		return nil, nil
	}
	if have < len(rows) {
		for i, r := range rows {
			if !r.hasLabel {
				return nil, recordErrorf(i, key, "no label, which other records of the batch have")
			}
		}
	}
	n := len(rows)
	out := map[string]*tensor.Dense{}
	if p.l.Int64 || p.index != nil {
		i64 := make([]int64, 0, n*p.dim)
		for _, r := range rows {
			i64 = append(i64, r.labelI...)
		}
		out[key] = tensor.New(tensor.WithShape(n, p.dim), tensor.WithBacking(i64))
	} else {
		f32 := make([]float32, 0, n*p.dim)
		for _, r := range rows {
			f32 = append(f32, r.labelF...)
		}
		out[key] = tensor.New(tensor.WithShape(n, p.dim), tensor.WithBacking(f32))
	}
	if w := p.weight; w != nil {
		ws := make([]float32, n)
		for i, r := range rows {
			ws[i] = r.weight
		}
		out[w.Key] = tensor.New(tensor.WithShape(n, 1), tensor.WithBacking(ws))
	}
	return out, nil
}

// PreprocessKind is Kind: how an export names the transformation.
func (t *Transformer) PreprocessKind() string { return Kind }

// RawSpec describes the raw features the Transformer reads
// (dataset.RawSpecer), as tf.feature_column.make_parse_example_spec: a
// numeric column's key a float32 feature of its shape (with its default);
// a vocabulary or hash-bucket column's key, and a crossed column's raw
// keys, variable-length strings; an identity column's key variable-length
// int64s; a weighted column's weight key variable-length float32s; the
// label and example weight with Label set. Serving reads a request's raw
// values by it.
func (t *Transformer) RawSpec() map[string]dataset.FeatureSpec { return rawSpec(t.cfg) }

// rawSpec is RawSpec of a transformer of cfg, fitted or not.
func rawSpec(cfg Config) map[string]dataset.FeatureSpec {
	spec := map[string]dataset.FeatureSpec{}
	varLen := func(key string, dt tensor.Dtype) {
		if _, ok := spec[key]; !ok {
			spec[key] = dataset.FeatureSpec{Dtype: dt, VarLen: true}
		}
	}
	var walk func(c any)
	walk = func(c any) {
		switch c := c.(type) {
		case *NumericColumn:
			s := dataset.FeatureSpec{Dtype: tensor.Float32, Shape: c.Shape()}
			if d := c.DefaultValue(); d != nil {
				s.Default = dataset.Feature{Floats: d}
			}
			spec[c.key] = s // a number's spec wins over a variable-length one
		case *BucketizedColumn:
			walk(c.source)
		case *VocabularyColumn:
			varLen(c.key, tensor.String)
		case *HashBucketColumn:
			varLen(c.key, tensor.String)
		case *IdentityColumn:
			varLen(c.key, tensor.Int64)
		case RawKey:
			varLen(string(c), tensor.String)
		case *CrossedColumn:
			for _, k := range c.keys {
				walk(k)
			}
		case *WeightedColumn:
			walk(c.cat)
			varLen(c.weightKey, tensor.Float32)
		case *IndicatorColumn:
			walk(c.cat)
		case *EmbeddingColumn:
			walk(c.cat)
		}
	}
	for _, c := range cfg.Columns {
		walk(c)
	}
	if l := cfg.Label; l != nil {
		s := dataset.FeatureSpec{Dtype: tensor.Float32, Shape: []int{max(l.Dimension, 1)}, Label: true}
		switch {
		case l.Vocabulary != nil:
			s.Dtype = tensor.String
		case l.Int64:
			s.Dtype = tensor.Int64
		}
		spec[l.Key] = s
	}
	if w := cfg.Weight; w != nil {
		s := dataset.FeatureSpec{Dtype: tensor.Float32, Shape: []int{1}, Label: true}
		if w.Default != nil {
			s.Default = dataset.Feature{Floats: []float32{*w.Default}}
		}
		spec[w.Key] = s
	}
	return spec
}

// ServingInput describes the features Parse makes, as an export's
// serving input (estimator.Export): each dense feature float32 of its
// shape, each sparse feature of ids int64 and of weights float32, of at
// most width values a record (a served record with more is an error of
// its request).
func (t *Transformer) ServingInput(width int) estimator.ServingInput {
	in := estimator.ServingInput{}
	for _, d := range t.dense {
		var shape []int
		if d.numeric != nil {
			shape = d.numeric.Shape()
		} else {
			shape = []int{d.cat.NumBuckets()}
		}
		in[d.name] = estimator.FeatureSpec{Dtype: tensor.Float32, Shape: shape}
	}
	for _, s := range t.sparse {
		in[s.cat.Name()] = estimator.FeatureSpec{Dtype: tensor.Int64, Shape: []int{width}, Sparse: true}
		if w, ok := s.cat.(*WeightedColumn); ok {
			in[w.WeightsName()] = estimator.FeatureSpec{Dtype: tensor.Float32, Shape: []int{width}, Sparse: true}
		}
	}
	return in
}
