package sharding

import (
	"errors"
	"fmt"
	"reflect"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
)

// SparseCOO is a sparse tensor in coordinate (COO) form, like TensorFlow's
// SparseTensor: entry i has index Indices[i] and value Values[i]; every
// other element is zero.
type SparseCOO struct {
	// Indices holds one index per stored entry (nnz entries), each of
	// len(DenseShape). Entries need not be in row-major order and may repeat
	// (see Dense).
	Indices [][]int
	// Values is a rank-1 tensor of the nnz values, of any dtype.
	Values *tensor.Dense
	// DenseShape is the shape of the dense tensor represented (rank >= 1).
	DenseShape []int
}

// Validate checks that s is well formed: rank (len(DenseShape)) >= 1 and no
// negative dimension, Values is a non-nil rank-1 tensor, the dense tensor
// would fit in memory Go can allocate (numeric.MaxBytes), one value per
// index (len(Indices) == Values.Shape()[0]), and every index has
// len(DenseShape) coordinates, each within [0, DenseShape[d]).
func (s SparseCOO) Validate() error {
	rank := len(s.DenseShape)
	if rank < 1 {
		return errors.New("sparse tensor has rank 0 (dense shape []); need rank >= 1")
	}
	for d, n := range s.DenseShape {
		if n < 0 {
			return fmt.Errorf("sparse tensor dense shape %v has negative dim %d", s.DenseShape, d)
		}
	}
	if s.Values == nil {
		return errors.New("sparse tensor has nil Values")
	}
	if vs := s.Values.Shape(); vs.Dims() != 1 {
		return fmt.Errorf("sparse tensor Values must be rank 1, got shape %v", vs)
	}
	if _, err := numeric.Elements(s.DenseShape, int(s.Values.Dtype().Size())); err != nil {
		return fmt.Errorf("sparse tensor dense shape: %w", err)
	}
	if nnz := s.Values.Shape()[0]; len(s.Indices) != nnz {
		return fmt.Errorf("sparse tensor has %d indices but %d values", len(s.Indices), nnz)
	}
	for i, idx := range s.Indices {
		if len(idx) != rank {
			return fmt.Errorf("sparse entry %d has index %v of rank %d, dense shape %v has rank %d",
				i, idx, len(idx), s.DenseShape, rank)
		}
		for d, c := range idx {
			if c < 0 || c >= s.DenseShape[d] {
				return fmt.Errorf("sparse entry %d has index %v out of range for dense shape %v", i, idx, s.DenseShape)
			}
		}
	}
	return nil
}

// SplitSparse splits s along dimension 0 the way TensorFlow's
// tf.sparse.split(axis=0) does. Shard row counts come from
// [Sizes](s.DenseShape[0], n), so shard i covers rows [off_i, off_i+sizes[i]).
// Each entry goes to the shard holding its row, with the row coordinate
// re-based to that shard (row - off_i) and the other coordinates unchanged;
// within a shard, entries keep their relative order from s. Shard i has
// DenseShape [sizes[i], s.DenseShape[1:]...]. A shard may have no entries:
// its Values is then a length-0 tensor of the same dtype, and it still has
// its dense shape.
//
// The shards are copies: they share no memory with s. s must be valid (see
// [SparseCOO.Validate]).
func SplitSparse(s SparseCOO, n int) ([]SparseCOO, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	rows := s.DenseShape[0]
	sizes, err := Sizes(rows, n)
	if err != nil {
		return nil, err
	}
	// Shard of row r: the first rem shards have q+1 rows, the rest q (q >= 1
	// since rows >= n).
	q, rem := rows/n, rows%n
	big := rem * (q + 1)
	shardOf := func(r int) (shard, off int) {
		if r < big {
			shard = r / (q + 1)
			return shard, shard * (q + 1)
		}
		shard = rem + (r-big)/q
		return shard, big + (shard-rem)*q
	}

	members := make([][]int, n) // entry numbers per shard, in order
	for i, idx := range s.Indices {
		sh, _ := shardOf(idx[0])
		members[sh] = append(members[sh], i)
	}
	vals := backing(contiguous(s.Values))
	elem := s.Values.Dtype().Type
	out := make([]SparseCOO, n)
	rank := len(s.DenseShape)
	for sh, entries := range members {
		// One array holds the shard's indices, each a full slice of it.
		indices := make([][]int, len(entries))
		flat := make([]int, len(entries)*rank)
		for j, e := range entries {
			_, off := shardOf(s.Indices[e][0])
			idx := flat[j*rank : (j+1)*rank : (j+1)*rank]
			copy(idx, s.Indices[e])
			idx[0] -= off
			indices[j] = idx
		}
		shape := append([]int{sizes[sh]}, s.DenseShape[1:]...)
		out[sh] = SparseCOO{
			Indices:    indices,
			Values:     tensor.New(tensor.WithShape(len(entries)), tensor.WithBacking(gatherValues(vals, elem, entries))),
			DenseShape: shape,
		}
	}
	return out, nil
}

// gatherValues returns a new slice of the values at entries of vals, a
// slice of elem: without reflection per value for the usual id and weight
// types.
func gatherValues(vals reflect.Value, elem reflect.Type, entries []int) any {
	switch v := vals.Interface().(type) {
	case []int64:
		return gather(v, entries)
	case []int32:
		return gather(v, entries)
	case []int:
		return gather(v, entries)
	case []float32:
		return gather(v, entries)
	case []float64:
		return gather(v, entries)
	}
	out := reflect.MakeSlice(reflect.SliceOf(elem), len(entries), len(entries))
	for j, e := range entries {
		out.Index(j).Set(vals.Index(e))
	}
	return out.Interface()
}

func gather[T any](vals []T, entries []int) []T {
	out := make([]T, len(entries))
	for j, e := range entries {
		out[j] = vals[e]
	}
	return out
}

// Dense returns s as a new dense tensor of shape DenseShape and the dtype of
// Values, with zeros (the dtype's zero value) everywhere no entry is stored.
//
// Duplicate indices are summed, as tf.sparse.to_dense would with
// validate_indices=False and as scipy's COO conversion does: numeric dtypes
// (integers, floats, complex) add, bool ORs. For any other dtype a duplicate
// index is an error. s must be valid (see [SparseCOO.Validate]).
func (s SparseCOO) Dense() (*tensor.Dense, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	elem := s.Values.Dtype().Type
	shape := tensor.Shape(s.DenseShape)
	total, err := numeric.Elements(shape, int(elem.Size()))
	if err != nil {
		return nil, err
	}
	out := reflect.MakeSlice(reflect.SliceOf(elem), total, total)
	strides := make([]int, len(shape))
	stride := 1
	for d := len(shape) - 1; d >= 0; d-- {
		strides[d] = stride
		stride *= shape[d]
	}
	vals := backing(contiguous(s.Values))
	var seen []bool
	summable := isSummable(elem.Kind())
	if !summable {
		seen = make([]bool, total)
	}
	for i, idx := range s.Indices {
		flat := 0
		for d, c := range idx {
			flat += c * strides[d]
		}
		dst, v := out.Index(flat), vals.Index(i)
		if !summable {
			if seen[flat] {
				return nil, fmt.Errorf("sparse entry %d repeats index %v; duplicates of dtype %v cannot be summed", i, idx, s.Values.Dtype())
			}
			seen[flat] = true
			dst.Set(v)
			continue
		}
		addInto(dst, v)
	}
	return tensor.New(tensor.WithShape(s.DenseShape...), tensor.WithBacking(out.Interface())), nil
}

func isSummable(k reflect.Kind) bool {
	switch k {
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	}
	return false
}

// addInto sets dst to dst + v (dst || v for bool); the kind must be summable.
func addInto(dst, v reflect.Value) {
	switch dst.Kind() {
	case reflect.Bool:
		dst.SetBool(dst.Bool() || v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		dst.SetInt(dst.Int() + v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		dst.SetUint(dst.Uint() + v.Uint())
	case reflect.Float32, reflect.Float64:
		dst.SetFloat(dst.Float() + v.Float())
	case reflect.Complex64, reflect.Complex128:
		dst.SetComplex(dst.Complex() + v.Complex())
	}
}
