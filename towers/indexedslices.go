package towers

import (
	"cmp"
	"fmt"
	"slices"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
)

// IndexedSlices is a sparse gradient of a variable of shape DenseShape =
// [rows, d1, …], TensorFlow's IndexedSlices: row Indices[i] of the
// gradient is the i-th row of Values, a row no index names is zero, and a
// row indexed more than once is the sum of its rows. Values is a []float32
// or []float64 of len(Indices)·RowSize elements, RowSize being the product
// of DenseShape after its first dimension. It is the gradient of an
// embedding lookup: the rows of a large table a batch touched, never a
// buffer the size of the table. No rows (nil Indices and Values of length
// 0) is a valid gradient that changes nothing.
type IndexedSlices struct {
	Indices    []int
	Values     any
	DenseShape []int
}

// Rows is the number of rows Values holds: len(Indices).
func (s IndexedSlices) Rows() int { return len(s.Indices) }

// RowSize is the number of elements in one row: the product of DenseShape
// after its first dimension (1 for a rank-1 variable).
func (s IndexedSlices) RowSize() int {
	n := 1
	for _, d := range s.DenseShape[min(1, len(s.DenseShape)):] {
		n *= d
	}
	return n
}

// Validate checks that s is well formed: DenseShape of rank at least 1
// with no negative dimension, Values a []float32 or []float64 (or nil
// with no rows) of Rows()·RowSize() elements, and every index within
// [0, DenseShape[0]). The error names the first index out of range and
// its position.
func (s IndexedSlices) Validate() error {
	if len(s.DenseShape) < 1 {
		return fmt.Errorf("indexed slices: dense shape %v has rank 0, need rank >= 1", s.DenseShape)
	}
	for d, n := range s.DenseShape {
		if n < 0 {
			return fmt.Errorf("indexed slices: dense shape %v has negative dimension %d", s.DenseShape, d)
		}
	}
	n := -1
	switch v := s.Values.(type) {
	case []float32:
		n = len(v)
	case []float64:
		n = len(v)
	case nil:
		n = 0
	}
	if n < 0 {
		return fmt.Errorf("indexed slices: values are a %T, not a []float32 or []float64", s.Values)
	}
	if want := s.Rows() * s.RowSize(); n != want {
		return fmt.Errorf("indexed slices: %d values for %d rows of %d elements (dense shape %v)", n, s.Rows(), s.RowSize(), s.DenseShape)
	}
	for i, id := range s.Indices {
		if id < 0 || id >= s.DenseShape[0] {
			return fmt.Errorf("indexed slices: index %d at position %d is out of range [0, %d)", id, i, s.DenseShape[0])
		}
	}
	return nil
}

// CheckFor is Validate, and that s is a gradient of v: the same dense
// shape and dtype. The error names v.
func (s IndexedSlices) CheckFor(v *Variable) error {
	if !slices.Equal(s.DenseShape, v.Shape()) {
		return fmt.Errorf("variable %q has shape %v, its indexed slices dense shape %v", v.Name(), v.Shape(), s.DenseShape)
	}
	if err := s.Validate(); err != nil {
		return fmt.Errorf("variable %q: %w", v.Name(), err)
	}
	ok := s.Values == nil
	switch s.Values.(type) {
	case []float32:
		ok = v.Dtype() == tensor.Float32
	case []float64:
		ok = v.Dtype() == tensor.Float64
	}
	if !ok {
		return fmt.Errorf("variable %q has dtype %v, its indexed slices values are a %T", v.Name(), v.Dtype(), s.Values)
	}
	return nil
}

// Deduplicate returns s with every index once, in ascending order, its row
// the sum of s's rows for that index added in their order in s (the first
// copied, the others added): TensorFlow's _deduplicate_indexed_slices, in
// a deterministic order. s must be valid; the result shares no memory with
// it.
func (s IndexedSlices) Deduplicate() IndexedSlices {
	switch v := s.Values.(type) {
	case []float32:
		return deduplicate(s, v)
	case []float64:
		return deduplicate(s, v)
	}
	return IndexedSlices{DenseShape: slices.Clone(s.DenseShape), Values: s.Values}
}

func deduplicate[T numeric.Float](s IndexedSlices, vals []T) IndexedSlices {
	rs := s.RowSize()
	order := sortedPositions(s.Indices)
	ids := make([]int, 0, len(order))
	out := make([]T, 0, len(vals))
	for _, i := range order {
		row := vals[i*rs : (i+1)*rs]
		if k := len(ids); k > 0 && ids[k-1] == s.Indices[i] {
			dst := out[(k-1)*rs : k*rs]
			for j, x := range row {
				dst[j] += x
			}
			continue
		}
		ids = append(ids, s.Indices[i])
		out = append(out, row...)
	}
	return IndexedSlices{Indices: ids, Values: out, DenseShape: slices.Clone(s.DenseShape)}
}

// sortedPositions returns the positions of ids ordered by id, and by
// position among equal ids (the order a stable sort gives, so that a
// repeated index's rows are summed in their order). Ids and positions that
// fit are packed into one integer, id in the high bits, and sorted as
// integers; others are sorted as pairs.
func sortedPositions(ids []int) []int {
	order := make([]int, len(ids))
	const posBits = 24
	if uint64(len(ids)) <= 1<<posBits && !slices.ContainsFunc(ids, func(id int) bool { return uint64(id) >= 1<<(62-posBits) }) {
		keys := make([]uint64, len(ids))
		for i, id := range ids {
			keys[i] = uint64(id)<<posBits | uint64(i)
		}
		slices.Sort(keys)
		for i, k := range keys {
			order[i] = int(k & (1<<posBits - 1))
		}
		return order
	}
	type entry struct{ id, pos int }
	pairs := make([]entry, len(ids))
	for i, id := range ids {
		pairs[i] = entry{id, i}
	}
	slices.SortFunc(pairs, func(a, b entry) int {
		if c := cmp.Compare(a.id, b.id); c != 0 {
			return c
		}
		return cmp.Compare(a.pos, b.pos)
	})
	for i, p := range pairs {
		order[i] = p.pos
	}
	return order
}

// AddTo adds s into dst, a dense []float32 or []float64 of the variable's
// size and s's element type: each row of s is added to its index's row of
// dst, in s's order. Densifying a gradient is AddTo on zeros.
func (s IndexedSlices) AddTo(dst any) error {
	if err := s.Validate(); err != nil {
		return err
	}
	size := s.RowSize() * s.DenseShape[0]
	switch d := dst.(type) {
	case []float32:
		v, ok := s.Values.([]float32)
		if ok || s.Values == nil {
			return addTo(d, v, s.Indices, s.RowSize(), size)
		}
	case []float64:
		v, ok := s.Values.([]float64)
		if ok || s.Values == nil {
			return addTo(d, v, s.Indices, s.RowSize(), size)
		}
	}
	return fmt.Errorf("indexed slices: cannot add %T values into a %T", s.Values, dst)
}

func addTo[T numeric.Float](dst, vals []T, ids []int, rs, size int) error {
	if len(dst) != size {
		return fmt.Errorf("indexed slices: adding into %d elements, the dense shape has %d", len(dst), size)
	}
	for i, id := range ids {
		row := dst[id*rs : (id+1)*rs]
		for j, x := range vals[i*rs : (i+1)*rs] {
			row[j] += x
		}
	}
	return nil
}

// ConcatSlices is the sum of parts weighted by weights as one IndexedSlices,
// TensorFlow's _compute_sum_on_device for IndexedSlices: the parts' indices
// and values concatenated in part order, each part's values multiplied by
// its weight (a weight of 1 multiplies nothing). Duplicates stay; summing
// them is Deduplicate's. Every part must be valid with one dense shape and
// element type; a part with no rows contributes nothing. The result shares
// no memory with the parts; an error names the part.
func ConcatSlices(parts []IndexedSlices, weights []float64) (IndexedSlices, error) {
	if len(parts) != len(weights) {
		return IndexedSlices{}, fmt.Errorf("concat indexed slices: %d parts, %d weights", len(parts), len(weights))
	}
	if len(parts) == 0 {
		return IndexedSlices{}, fmt.Errorf("concat indexed slices: no parts")
	}
	var kind any
	rows := 0
	for i, p := range parts {
		if err := p.Validate(); err != nil {
			return IndexedSlices{}, fmt.Errorf("concat indexed slices: part %d: %w", i, err)
		}
		if !slices.Equal(p.DenseShape, parts[0].DenseShape) {
			return IndexedSlices{}, fmt.Errorf("concat indexed slices: part %d has dense shape %v, part 0 %v", i, p.DenseShape, parts[0].DenseShape)
		}
		if p.Values == nil {
			continue
		}
		if kind == nil {
			kind = p.Values
		} else if !sameType(kind, p.Values) {
			return IndexedSlices{}, fmt.Errorf("concat indexed slices: part %d has %T values, an earlier part %T", i, p.Values, kind)
		}
		rows += p.Rows()
	}
	out := IndexedSlices{DenseShape: slices.Clone(parts[0].DenseShape), Indices: make([]int, 0, rows)}
	switch kind.(type) {
	case []float32:
		out.Values = concatValues[float32](parts, weights, rows*out.RowSize())
	case []float64:
		out.Values = concatValues[float64](parts, weights, rows*out.RowSize())
	}
	for _, p := range parts {
		out.Indices = append(out.Indices, p.Indices...)
	}
	return out, nil
}

func concatValues[T numeric.Float](parts []IndexedSlices, weights []float64, n int) []T {
	out := make([]T, 0, n)
	for i, p := range parts {
		v, _ := p.Values.([]T)
		start := len(out)
		out = append(out, v...)
		if w := weights[i]; w != 1 {
			for j := start; j < len(out); j++ {
				out[j] *= T(w)
			}
		}
	}
	return out
}

// sameType reports whether a and b are both []float32 or both []float64.
func sameType(a, b any) bool {
	switch a.(type) {
	case []float32:
		_, ok := b.([]float32)
		return ok
	case []float64:
		_, ok := b.([]float64)
		return ok
	}
	return false
}
