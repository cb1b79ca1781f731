// Package numeric holds the small dtype-generic loops towerflow runs on
// tensor backings outside gorgonia graphs: weighted sums for gradients,
// copies, and conversions to and from float64.
//
// It works on backings as slices held in an any ([]float32, []float64, ...),
// because gorgonia's scalar values (rank-0 tensors, *gorgonia.F64) hide their
// one-element backing behind Data() returning the element itself.
package numeric

import (
	"fmt"
	"reflect"

	"gonum.org/v1/gonum/blas/gonum"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Float is the set of element types the arithmetic helpers work on.
type Float interface{ ~float32 | ~float64 }

// IsFloat reports whether dt is float32 or float64.
func IsFloat(dt tensor.Dtype) bool { return dt == tensor.Float32 || dt == tensor.Float64 }

// Slice returns v's elements as a slice in row-major order. For a
// contiguous non-scalar *tensor.Dense the slice is its backing (no copy); a
// view is materialized into a copy; a scalar gives a new one-element slice.
func Slice(v G.Value) (any, error) {
	if v == nil {
		return nil, fmt.Errorf("nil value")
	}
	if v.Shape().TotalSize() == 0 && !v.Shape().IsScalar() {
		// tensor.Dense.Data panics on an empty tensor.
		return NewSlice(v.Dtype(), 0), nil
	}
	if d, ok := v.(*tensor.Dense); ok && !d.Shape().IsScalar() {
		if d.IsMaterializable() || !d.DataOrder().IsContiguous() {
			d = d.Materialize().(*tensor.Dense)
		}
		return d.Data(), nil
	}
	data := v.Data()
	rv := reflect.ValueOf(data)
	if rv.Kind() == reflect.Slice {
		return data, nil
	}
	s := reflect.MakeSlice(reflect.SliceOf(rv.Type()), 1, 1)
	s.Index(0).Set(rv)
	return s.Interface(), nil
}

// Floats returns the elements of v, a contiguous *tensor.Dense of element
// type T, without a copy or an allocation (Slice goes through reflection,
// which allocates); ok is false for any other value.
func Floats[T Float](v G.Value) (s []T, ok bool) {
	d, isDense := v.(*tensor.Dense)
	if !isDense || d.IsMaterializable() || !d.DataOrder().IsContiguous() {
		return nil, false
	}
	var data any
	switch d.Dtype() {
	case tensor.Float32:
		data = d.Float32s()
	case tensor.Float64:
		data = d.Float64s()
	}
	s, ok = data.([]T)
	return s, ok
}

// NewSlice returns a zero slice of n elements of dtype dt.
func NewSlice(dt tensor.Dtype, n int) any {
	return reflect.MakeSlice(reflect.SliceOf(dt.Type), n, n).Interface()
}

// Len returns the length of a slice held in an any.
func Len(s any) int { return reflect.ValueOf(s).Len() }

// Over returns a new tensor header of the given shape over backing: no copy.
// A rank-0 shape gives a scalar tensor over backing's single element. Two
// goroutines may each hold their own header over one backing, which gorgonia
// needs because its ops rewrite operand headers in place.
func Over(shape tensor.Shape, backing any) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(backing))
}

// Dense returns a copy of v as a *tensor.Dense with its own backing; scalar
// values become rank-0 tensors.
func Dense(v G.Value) (*tensor.Dense, error) {
	s, err := Slice(v)
	if err != nil {
		return nil, err
	}
	return Over(v.Shape(), Copy(s)), nil
}

// Copy returns a copy of a slice held in an any.
func Copy(s any) any {
	rv := reflect.ValueOf(s)
	out := reflect.MakeSlice(rv.Type(), rv.Len(), rv.Len())
	reflect.Copy(out, rv)
	return out.Interface()
}

// CopyInto copies src into dst; both are slices of one type and length.
func CopyInto(dst, src any) error {
	d, s := reflect.ValueOf(dst), reflect.ValueOf(src)
	if d.Type() != s.Type() || d.Len() != s.Len() {
		return fmt.Errorf("copy %d×%v into %d×%v", s.Len(), s.Type().Elem(), d.Len(), d.Type().Elem())
	}
	reflect.Copy(d, s)
	return nil
}

// Zero sets every element of a slice to its zero value.
func Zero(s any) {
	switch d := s.(type) {
	case []float64:
		clear(d)
	case []float32:
		clear(d)
	default:
		rv := reflect.ValueOf(s)
		zero := reflect.Zero(rv.Type().Elem())
		for i := range rv.Len() {
			rv.Index(i).Set(zero)
		}
	}
}

// PartError is WeightedSum's error about one of its parts.
type PartError struct {
	Part int
	Err  error
}

func (e *PartError) Error() string { return fmt.Sprintf("part %d: %v", e.Part, e.Err) }
func (e *PartError) Unwrap() error { return e.Err }

// WeightedSum sets dst = Σ weights[i]·parts[i], adding in part order; nil
// parts are skipped (all nil gives zeros). dst and the parts are []float32
// or []float64 slices of one type and length; a weight of 1 multiplies
// nothing. It goes over the elements in cache-sized chunks, every part per
// chunk, so each part is read once and dst written once. On an error
// (naming the part) dst is unchanged.
func WeightedSum(dst any, parts []any, weights []float64) error {
	n := 0
	switch d := dst.(type) {
	case []float64:
		n = len(d)
	case []float32:
		n = len(d)
	}
	return WeightedSumRange(dst, parts, weights, 0, n)
}

// WeightedSumRange is WeightedSum over elements [lo, hi) of dst and the
// parts, leaving the others alone. Goroutines may sum disjoint ranges of
// one dst at once; nothing is allocated for up to 8 parts.
func WeightedSumRange(dst any, parts []any, weights []float64, lo, hi int) error {
	if len(parts) != len(weights) {
		return fmt.Errorf("weighted sum: %d parts, %d weights", len(parts), len(weights))
	}
	switch d := dst.(type) {
	case []float64:
		return weightedSum(d, parts, weights, lo, hi)
	case []float32:
		return weightedSum(d, parts, weights, lo, hi)
	}
	return fmt.Errorf("weighted sum: element type %T is not float32 or float64", dst)
}

func weightedSum[T Float](dst []T, parts []any, weights []float64, lo, hi int) error {
	if lo < 0 || hi > len(dst) || lo > hi {
		return fmt.Errorf("weighted sum: range [%d, %d) of %d elements", lo, hi, len(dst))
	}
	var buf [8][]T
	ps := buf[:0]
	for i, p := range parts {
		if p == nil {
			ps = append(ps, nil)
			continue
		}
		s, ok := p.([]T)
		if !ok || len(s) != len(dst) {
			return &PartError{Part: i, Err: fmt.Errorf("%d×%T into %d×%T", Len(p), p, len(dst), dst)}
		}
		ps = append(ps, s)
	}
	const chunk = 2048
	for c := lo; c < hi; c += chunk {
		d := dst[c:min(c+chunk, hi)]
		first := true
		for i, p := range ps {
			if p == nil {
				continue
			}
			s := p[c : c+len(d)]
			if first {
				copy(d, s)
				if weights[i] != 1 {
					scale(T(weights[i]), d)
				}
			} else {
				Axpy(T(weights[i]), s, d)
			}
			first = false
		}
		if first {
			clear(d)
		}
	}
	return nil
}

// kernels is gonum's pure-Go BLAS, whose level-1 routines are assembly on
// amd64 and arm64.
var kernels gonum.Implementation

// scale sets x = a·x, with gonum's assembly kernels.
func scale[T Float](a T, x []T) {
	switch x := any(x).(type) {
	case []float32:
		kernels.Sscal(len(x), float32(a), x, 1)
	case []float64:
		kernels.Dscal(len(x), float64(a), x, 1)
	}
}

// Axpy sets y = a·x + y, with gonum's assembly kernels: a multiply, then
// an add, no fused multiply-add, so the result is bit for bit the one
// plain Go code gives. A of 1 multiplies nothing; a of 0 leaves y as it
// is. x and y have the same length.
func Axpy[T Float](a T, x, y []T) {
	switch y := any(y).(type) {
	case []float32:
		kernels.Saxpy(len(y), float32(a), any(x).([]float32), 1, y, 1)
	case []float64:
		kernels.Daxpy(len(y), float64(a), any(x).([]float64), 1, y, 1)
	}
}

// Float64s returns v's elements converted to float64 (a new slice). Numeric
// and bool dtypes are supported; bool converts to 0 and 1.
func Float64s(v G.Value) ([]float64, error) {
	s, err := Slice(v)
	if err != nil {
		return nil, err
	}
	return SliceFloat64s(s)
}

// SliceFloat64s converts a numeric or bool slice to a new []float64.
func SliceFloat64s(s any) ([]float64, error) {
	switch d := s.(type) {
	case []float64:
		return append([]float64(nil), d...), nil
	case []float32:
		return convert(d), nil
	case []int:
		return convert(d), nil
	case []int64:
		return convert(d), nil
	case []int32:
		return convert(d), nil
	case []int16:
		return convert(d), nil
	case []int8:
		return convert(d), nil
	case []uint:
		return convert(d), nil
	case []uint64:
		return convert(d), nil
	case []uint32:
		return convert(d), nil
	case []uint16:
		return convert(d), nil
	case []uint8:
		return convert(d), nil
	case []bool:
		out := make([]float64, len(d))
		for i, b := range d {
			if b {
				out[i] = 1
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("element type %T is not numeric", s)
}

type number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

func convert[T number](in []T) []float64 {
	out := make([]float64, len(in))
	for i, v := range in {
		out[i] = float64(v)
	}
	return out
}

// SetFloat64s writes vals, converted, into a []float32 or []float64.
func SetFloat64s(dst any, vals []float64) error {
	switch d := dst.(type) {
	case []float64:
		if len(d) == len(vals) {
			copy(d, vals)
			return nil
		}
	case []float32:
		if len(d) == len(vals) {
			for i, v := range vals {
				d[i] = float32(v)
			}
			return nil
		}
	default:
		return fmt.Errorf("set: element type %T is not float32 or float64", dst)
	}
	return fmt.Errorf("set: %d values into %d elements", len(vals), Len(dst))
}

// MaxBytes is the most memory one tensor may ask for: what a Go program
// can allocate at all on a 64-bit platform (the runtime's limit is 2^48
// bytes; a larger make panics).
const MaxBytes = 1 << 47

// Elements returns how many elements a tensor of shape holds (1 for a
// scalar). A negative dimension, or a shape whose elements of elemSize
// bytes would need more than MaxBytes, is an error naming the shape, so
// that no caller allocates from an untrusted shape and panics.
func Elements(shape []int, elemSize int) (int, error) {
	return ElementsWithin(shape, elemSize, MaxBytes)
}

// ElementsWithin is Elements with a smaller bound than MaxBytes: what
// maxBytes bytes hold.
func ElementsWithin(shape []int, elemSize, maxBytes int) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %v has a negative dimension", shape)
		}
		if d != 0 && n > maxBytes/d {
			return 0, fmt.Errorf("shape %v is too large: more than %d elements", shape, maxBytes)
		}
		n *= d
	}
	if elemSize > 0 && n > maxBytes/elemSize {
		return 0, fmt.Errorf("shape %v is too large: %d elements of %d bytes need more than %d bytes", shape, n, elemSize, maxBytes)
	}
	return n, nil
}
