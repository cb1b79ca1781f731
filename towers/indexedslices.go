package towers

import (
	"fmt"
	"slices"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/idsort"
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
	if ascending(s.Indices) {
		// Already every index once (a lookup's gradient, a sum of them):
		// a copy, no sort.
		return IndexedSlices{Indices: slices.Clone(s.Indices), Values: slices.Clone(vals), DenseShape: slices.Clone(s.DenseShape)}
	}
	rs := s.RowSize()
	var sorter idsort.Sorter
	order := sorter.Positions(s.Indices)
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

// IsDeduplicated reports whether every index of s is there once, in
// ascending order, as Deduplicate returns it (and a lookup's gradient
// is): Deduplicate would give an equal copy.
func (s IndexedSlices) IsDeduplicated() bool { return ascending(s.Indices) }

// ascending reports whether ids are in strictly ascending order.
func ascending(ids []int) bool {
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			return false
		}
	}
	return true
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
	kind, rows, err := checkParts(parts, weights)
	if err != nil {
		return IndexedSlices{}, err
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

// checkParts checks ConcatSlices' parts and weights, returning the parts'
// values of one of them (nil: no part has rows) and their rows.
func checkParts(parts []IndexedSlices, weights []float64) (kind any, rows int, err error) {
	if len(parts) != len(weights) {
		return nil, 0, fmt.Errorf("concat indexed slices: %d parts, %d weights", len(parts), len(weights))
	}
	if len(parts) == 0 {
		return nil, 0, fmt.Errorf("concat indexed slices: no parts")
	}
	for i, p := range parts {
		if err := p.Validate(); err != nil {
			return nil, 0, fmt.Errorf("concat indexed slices: part %d: %w", i, err)
		}
		if !slices.Equal(p.DenseShape, parts[0].DenseShape) {
			return nil, 0, fmt.Errorf("concat indexed slices: part %d has dense shape %v, part 0 %v", i, p.DenseShape, parts[0].DenseShape)
		}
		if p.Values == nil {
			continue
		}
		if kind == nil {
			kind = p.Values
		} else if !sameType(kind, p.Values) {
			return nil, 0, fmt.Errorf("concat indexed slices: part %d has %T values, an earlier part %T", i, p.Values, kind)
		}
		rows += p.Rows()
	}
	return kind, rows, nil
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

// SumSlices is ConcatSlices(parts, weights).Deduplicate(), the same rows
// to the bit, in one pass when every part's indices are in ascending
// order (as a lookup's gradient and Deduplicate's result are): the parts
// are merged, a repeated index's rows taken in part order, then in their
// order within the part, without concatenating or sorting them. Parts out
// of order are concatenated and deduplicated. The result shares no memory
// with the parts; an error is ConcatSlices'.
func SumSlices(parts []IndexedSlices, weights []float64) (IndexedSlices, error) {
	kind, rows, err := checkParts(parts, weights)
	if err != nil {
		return IndexedSlices{}, err
	}
	for _, p := range parts {
		if !slices.IsSorted(p.Indices) {
			s, err := ConcatSlices(parts, weights)
			if err != nil {
				return IndexedSlices{}, err
			}
			return s.Deduplicate(), nil
		}
	}
	switch kind.(type) {
	case []float32:
		return mergeSlices[float32](parts, weights, rows), nil
	case []float64:
		return mergeSlices[float64](parts, weights, rows), nil
	}
	return IndexedSlices{DenseShape: slices.Clone(parts[0].DenseShape)}, nil
}

// mergeSlices is SumSlices of parts whose indices are in ascending order,
// rows of them in all.
func mergeSlices[T numeric.Float](parts []IndexedSlices, weights []float64, rows int) IndexedSlices {
	out := IndexedSlices{DenseShape: slices.Clone(parts[0].DenseShape)}
	rs := out.RowSize()
	if len(parts) == 1 && ascending(parts[0].Indices) {
		// One tower's lookup: already every index once, a copy.
		v, _ := parts[0].Values.([]T)
		out.Indices, out.Values = slices.Clone(parts[0].Indices), concatValues[T](parts, weights, len(v))
		return out
	}
	ids := make([]int, 0, rows)
	vals := make([]T, 0, rows*rs)
	next := make([]int, len(parts)) // each part's next row
	for {
		// The smallest next index, from the first part that has it.
		p := -1
		for i, q := range parts {
			if next[i] < len(q.Indices) && (p < 0 || q.Indices[next[i]] < parts[p].Indices[next[p]]) {
				p = i
			}
		}
		if p < 0 {
			break
		}
		id := parts[p].Indices[next[p]]
		k := len(ids)
		ids = append(ids, id)
		vals = vals[:(k+1)*rs]
		dst := vals[k*rs:]
		first := true
		for i := p; i < len(parts); i++ {
			q := parts[i]
			v, _ := q.Values.([]T)
			w := T(weights[i])
			for ; next[i] < len(q.Indices) && q.Indices[next[i]] == id; next[i]++ {
				src := v[next[i]*rs : (next[i]+1)*rs]
				switch {
				case first && weights[i] == 1:
					copy(dst, src)
				case first:
					for j, x := range src {
						dst[j] = x * w
					}
				case weights[i] == 1:
					for j, x := range src {
						dst[j] += x
					}
				default:
					for j, x := range src {
						dst[j] += T(x * w) // rounded as ConcatSlices' row
					}
				}
				first = false
			}
		}
	}
	out.Indices, out.Values = ids, vals
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
