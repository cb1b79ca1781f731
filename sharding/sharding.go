// Package sharding splits batches along dimension 0 into per-tower shards and
// joins them back.
//
// In data-parallel training every tower (device) receives one shard of the
// global batch. The functions in this package define how a batch is divided
// and reassembled:
//
//   - Uneven splits. A batch of rows rows is cut into n shards whose sizes
//     differ by at most one; the first rows%n shards take one extra row (the
//     rule of TensorFlow's tf.sparse.split and numpy.array_split). See
//     [Sizes]. Every shard gets at least one row: a batch with fewer rows
//     than shards is an error (it matches [ErrTooFewRows]), as is n < 1.
//     [SplitSizes] and [SplitMapSizes] take the row counts from the caller
//     instead (for example one shard per request of a merged batch).
//
//   - Views. [Split], [SplitSizes], [SplitMap] and [SplitMapSizes] do not
//     copy data: each shard is a new *tensor.Dense header over a contiguous
//     sub-slice of the input's backing array, so writing to a shard writes
//     to the input and vice versa, and shards keep the input's memory alive.
//     Appending to a shard's Data() slice never overwrites the next shard
//     (capacities are clipped). The only exception is an input that cannot
//     be sliced in place - a non-contiguous view (such as a column slice) or
//     a transposed tensor: it is first materialized (copied) and the shards
//     share the copy, not the input. A contiguous view (such as a row range)
//     is shared without copying.
//
//   - Copies. [Concat] and [ConcatMap] always allocate a new tensor; the
//     result shares no memory with the shards. [SplitSparse] and
//     [SparseCOO.Dense] also copy.
//
//   - Dtypes. Every function works for any dtype (float32, float64, int64,
//     bool, string, ...), using reflection on the backing slice. Masks of
//     masked tensors are split and concatenated along with the data.
//
//   - Errors. Rank-0 (scalar) and nil tensors cannot be split or
//     concatenated. Errors name what is wrong: the feature key, the shard
//     index and the shapes involved. Map keys are visited in sorted order,
//     so errors are deterministic.
package sharding

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"gorgonia.org/tensor"
)

// ErrTooFewRows is matched (with errors.Is) by the error returned when a
// batch has fewer rows than the requested number of shards. Callers that
// feed a final partial batch may want to detect it and use fewer towers.
var ErrTooFewRows = errors.New("fewer rows than shards")

// tooFewRowsError is the concrete error for a batch smaller than the shard
// count. Its message is "batch of 3 rows cannot be split into 4 shards".
type tooFewRowsError struct{ rows, n int }

func (e *tooFewRowsError) Error() string {
	return fmt.Sprintf("batch of %s cannot be split into %s",
		plural(e.rows, "row"), plural(e.n, "shard"))
}

func (e *tooFewRowsError) Is(target error) bool { return target == ErrTooFewRows }

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// Sizes returns the row count of each of n shards of a batch of rows rows.
// The sizes sum to rows and differ by at most one; the first rows%n shards
// take the extra rows (like TensorFlow's sparse_split and numpy's
// array_split). For example Sizes(10, 4) is [3 3 2 2].
//
// It is an error if n < 1, if rows < 0, or if rows < n (every shard must get
// at least one row; that error matches [ErrTooFewRows]).
func Sizes(rows, n int) ([]int, error) {
	if n < 1 {
		return nil, fmt.Errorf("number of shards must be at least 1, got %d", n)
	}
	if rows < 0 {
		return nil, fmt.Errorf("negative row count %d", rows)
	}
	if rows < n {
		return nil, &tooFewRowsError{rows: rows, n: n}
	}
	q, r := rows/n, rows%n
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = q
		if i < r {
			sizes[i]++
		}
	}
	return sizes, nil
}

// Part returns the rows [lo, hi) of shard i among n shards of a batch of
// rows rows, as Sizes lays them out; the errors are Sizes', and an i out of
// range.
func Part(rows, n, i int) (lo, hi int, err error) {
	sizes, err := Sizes(rows, n)
	if err != nil {
		return 0, 0, err
	}
	if i < 0 || i >= n {
		return 0, 0, fmt.Errorf("shard %d of %d does not exist", i, n)
	}
	for _, s := range sizes[:i] {
		lo += s
	}
	return lo, lo + sizes[i], nil
}

// Split splits t along dimension 0 into n shards with the row counts given by
// [Sizes](t.Shape()[0], n). Shard i has shape [sizes[i], t.Shape()[1:]...].
//
// Shards are views: each is a new *tensor.Dense over a contiguous sub-slice
// of t's backing array, so mutations through a shard are visible in t (and
// the other way round). This holds for any dtype. If t is a non-contiguous
// view or is transposed, it is first materialized (copied) and the shards
// view that copy instead. If t is masked, each shard gets the matching
// sub-slice of the mask (also shared).
//
// Errors: t is nil, t has rank 0 (the message names the shape), or the
// batch cannot be split into n shards (see [Sizes]).
func Split(t *tensor.Dense, n int) ([]*tensor.Dense, error) {
	if err := splittable(t); err != nil {
		return nil, err
	}
	sizes, err := Sizes(t.Shape()[0], n)
	if err != nil {
		return nil, err
	}
	return splitRows(t, sizes), nil
}

// SplitSizes splits t along dimension 0 into len(sizes) shards, shard i
// holding the next sizes[i] rows: it is [Split] with the row counts chosen
// by the caller (for example the rows of each request merged into one
// batch). The shards are views, as with Split. A size may be 0 (the shard
// then has no rows); the sizes must sum to t's rows.
//
// Errors: t is nil or of rank 0, sizes is empty, a size is negative, or
// the sizes do not sum to t.Shape()[0] (the message names both).
func SplitSizes(t *tensor.Dense, sizes []int) ([]*tensor.Dense, error) {
	if err := splittable(t); err != nil {
		return nil, err
	}
	if err := checkSizes(sizes, t.Shape()[0]); err != nil {
		return nil, err
	}
	return splitRows(t, sizes), nil
}

// splittable checks that t can be split along dimension 0.
func splittable(t *tensor.Dense) error {
	if t == nil {
		return errors.New("cannot split a nil tensor")
	}
	if shape := t.Shape(); shape.Dims() == 0 {
		return fmt.Errorf("rank-0 tensor (shape %v) cannot be split along dim 0", shape)
	}
	return nil
}

// checkSizes checks that sizes are row counts of shards of a batch of rows
// rows.
func checkSizes(sizes []int, rows int) error {
	if len(sizes) == 0 {
		return errors.New("no shard sizes: need at least one shard")
	}
	sum := 0
	for i, sz := range sizes {
		if sz < 0 {
			return fmt.Errorf("shard %d has negative size %d", i, sz)
		}
		sum += sz
	}
	if sum != rows {
		return fmt.Errorf("shard sizes %v sum to %d, but the batch has %s", sizes, sum, plural(rows, "row"))
	}
	return nil
}

// splitRows cuts t, of rank >= 1, into views of sizes rows each; the sizes
// are valid for t.
func splitRows(t *tensor.Dense, sizes []int) []*tensor.Dense {
	shape := t.Shape()
	src := contiguous(t)
	data := backing(src)
	mask := maskOf(src)
	rowLen := shape[1:].TotalSize()
	if shape.Dims() == 1 {
		rowLen = 1
	}
	shards := make([]*tensor.Dense, len(sizes))
	off := 0
	for i, sz := range sizes {
		lo, hi := off*rowLen, (off+sz)*rowLen
		dims := append([]int{sz}, shape[1:]...)
		sub := data.Slice3(lo, hi, hi).Interface()
		if mask != nil {
			shards[i] = tensor.New(tensor.WithShape(dims...), tensor.WithBacking(sub, mask[lo:hi:hi]))
		} else {
			shards[i] = tensor.New(tensor.WithShape(dims...), tensor.WithBacking(sub))
		}
		off += sz
	}
	return shards
}

// SplitMap splits every tensor of m (for example the features or the labels
// of a batch) with [Split], key by key: result[i][key] is shard i of
// m[key]. All tensors must have the same size along dimension 0.
//
// A nil or empty m gives n nil maps, so absent labels (as in prediction)
// stay absent in every shard. Errors name the offending key, for example
// `feature "x": rank-0 tensor (shape ()) cannot be split along dim 0`;
// tensors that disagree on dimension 0 give an error naming both keys and
// their shapes. Keys are checked in sorted order.
func SplitMap(m map[string]*tensor.Dense, n int) ([]map[string]*tensor.Dense, error) {
	if n < 1 {
		return nil, fmt.Errorf("number of shards must be at least 1, got %d", n)
	}
	return splitMap(m, n, func(t *tensor.Dense) ([]*tensor.Dense, error) { return Split(t, n) })
}

// SplitMapSizes is [SplitMap] with the row counts of the shards given, as
// [SplitSizes] takes them: result[i][key] holds the sizes[i] rows of m[key]
// that follow those of the shards before it. A nil or empty m gives
// len(sizes) nil maps. Errors name the key, as SplitMap's do.
func SplitMapSizes(m map[string]*tensor.Dense, sizes []int) ([]map[string]*tensor.Dense, error) {
	if len(sizes) == 0 {
		return nil, errors.New("no shard sizes: need at least one shard")
	}
	return splitMap(m, len(sizes), func(t *tensor.Dense) ([]*tensor.Dense, error) { return SplitSizes(t, sizes) })
}

// splitMap splits every tensor of m into n shards with split, key by key,
// once the tensors are checked to agree on dimension 0.
func splitMap(m map[string]*tensor.Dense, n int, split func(*tensor.Dense) ([]*tensor.Dense, error)) ([]map[string]*tensor.Dense, error) {
	out := make([]map[string]*tensor.Dense, n)
	if len(m) == 0 {
		return out, nil
	}
	keys := slices.Sorted(maps.Keys(m))
	first := ""
	for _, k := range keys {
		t := m[k]
		if err := splittable(t); err != nil {
			return nil, fmt.Errorf("feature %q: %w", k, err)
		}
		if first == "" {
			first = k
			continue
		}
		if f := m[first]; f.Shape()[0] != t.Shape()[0] {
			return nil, fmt.Errorf("features disagree on dim 0: feature %q has shape %v but feature %q has shape %v",
				first, f.Shape(), k, t.Shape())
		}
	}
	for i := range out {
		out[i] = make(map[string]*tensor.Dense, len(m))
	}
	for _, k := range keys {
		shards, err := split(m[k])
		if err != nil {
			return nil, fmt.Errorf("feature %q: %w", k, err)
		}
		for i, s := range shards {
			out[i][k] = s
		}
	}
	return out, nil
}

// Concat is the inverse of [Split]: it joins shards along dimension 0, in
// order, into a new tensor that shares no memory with them. It works for any
// dtype. If any shard is masked, the result is masked too (unmasked shards
// contribute false mask entries).
//
// All shards must be non-nil, of rank >= 1, of the same dtype, and of the
// same shape apart from dimension 0; errors name the shard index and the
// shapes. A shard with 0 rows is allowed. Zero shards is an error.
func Concat(shards []*tensor.Dense) (*tensor.Dense, error) {
	if len(shards) == 0 {
		return nil, errors.New("cannot concatenate zero shards")
	}
	for i, s := range shards {
		if s == nil {
			return nil, fmt.Errorf("shard %d is nil", i)
		}
		if s.Shape().Dims() == 0 {
			return nil, fmt.Errorf("shard %d: rank-0 tensor (shape %v) cannot be concatenated along dim 0", i, s.Shape())
		}
	}
	first := shards[0]
	fshape := first.Shape()
	total := 0
	masked := false
	for i, s := range shards {
		if s.Dtype() != first.Dtype() {
			return nil, fmt.Errorf("shard %d has dtype %v but shard 0 has dtype %v", i, s.Dtype(), first.Dtype())
		}
		if !sameTrailing(s.Shape(), fshape) {
			return nil, fmt.Errorf("shard %d has shape %v but shard 0 has shape %v: all dims except dim 0 must match",
				i, s.Shape(), fshape)
		}
		total += s.Shape()[0]
		if s.Shape().TotalSize() > 0 && len(s.Mask()) > 0 {
			masked = true
		}
	}
	rowLen := 1
	if fshape.Dims() > 1 {
		rowLen = fshape[1:].TotalSize()
	}
	size := total * rowLen
	out := reflect.MakeSlice(reflect.SliceOf(first.Dtype().Type), size, size)
	var mask []bool
	if masked {
		mask = make([]bool, size)
	}
	off := 0
	for _, s := range shards {
		if s.Shape().TotalSize() == 0 {
			continue
		}
		src := contiguous(s)
		n := reflect.Copy(out.Slice(off, size), backing(src))
		if m := maskOf(src); masked && m != nil {
			copy(mask[off:off+n], m)
		}
		off += n
	}
	dims := append([]int{total}, fshape[1:]...)
	if masked {
		return tensor.New(tensor.WithShape(dims...), tensor.WithBacking(out.Interface(), mask)), nil
	}
	return tensor.New(tensor.WithShape(dims...), tensor.WithBacking(out.Interface())), nil
}

// ConcatMap is the inverse of [SplitMap]: it concatenates the shard maps key
// by key with [Concat]. Every shard map must have the same keys; the error
// names the missing key and the shard. If every shard map is empty (for
// example labels absent in prediction) the result is a nil map. Zero shard
// maps is an error.
func ConcatMap(shards []map[string]*tensor.Dense) (map[string]*tensor.Dense, error) {
	if len(shards) == 0 {
		return nil, errors.New("cannot concatenate zero shards")
	}
	keys := slices.Sorted(maps.Keys(shards[0]))
	for i, m := range shards[1:] {
		i++
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				return nil, fmt.Errorf("feature %q is missing from shard %d (present in shard 0)", k, i)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if _, ok := shards[0][k]; !ok {
				return nil, fmt.Errorf("feature %q is missing from shard 0 (present in shard %d)", k, i)
			}
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	out := make(map[string]*tensor.Dense, len(keys))
	parts := make([]*tensor.Dense, len(shards))
	for _, k := range keys {
		for i, m := range shards {
			parts[i] = m[k]
		}
		t, err := Concat(parts)
		if err != nil {
			return nil, fmt.Errorf("feature %q: %w", k, err)
		}
		out[k] = t
	}
	return out, nil
}

// sameTrailing reports whether a and b have the same rank and agree on every
// dimension except dimension 0.
func sameTrailing(a, b tensor.Shape) bool {
	if len(a) != len(b) {
		return false
	}
	for d := 1; d < len(a); d++ {
		if a[d] != b[d] {
			return false
		}
	}
	return true
}

// contiguous returns t itself if its backing array holds exactly its
// elements in row-major order, and a materialized copy otherwise
// (non-contiguous views, transposed tensors).
func contiguous(t *tensor.Dense) *tensor.Dense {
	if t.Shape().TotalSize() == 0 || !t.IsMaterializable() {
		return t
	}
	if t.RequiresIterator() || t.DataSize() != t.Shape().TotalSize() {
		return t.Materialize().(*tensor.Dense)
	}
	return t
}

// backing returns the backing slice ([]T) of a contiguous, rank >= 1 tensor
// as a reflect.Value. tensor.(*Dense).Data panics on empty tensors, so they
// get a fresh empty slice of the right element type.
func backing(t *tensor.Dense) reflect.Value {
	if t.Shape().TotalSize() == 0 {
		return reflect.MakeSlice(reflect.SliceOf(t.Dtype().Type), 0, 0)
	}
	return reflect.ValueOf(t.Data())
}

// maskOf returns t's mask, or nil if t is not masked. (tensor's IsMasked
// reports true for every empty tensor.)
func maskOf(t *tensor.Dense) []bool {
	if t.Shape().TotalSize() == 0 {
		return nil
	}
	if m := t.Mask(); len(m) > 0 && len(m) == t.DataSize() {
		return m
	}
	return nil
}
