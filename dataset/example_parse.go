package dataset

import (
	"fmt"
	"maps"
	"slices"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/sharding"
)

// FeatureSpec says how ParseExamples turns one feature of a batch of
// Examples into a tensor, as a tf.io.FixedLenFeature or VarLenFeature.
type FeatureSpec struct {
	// Dtype is the tensor's: tensor.Int64 for an int64 list,
	// tensor.Float32 or tensor.Float64 for a float list, tensor.String
	// for a bytes list. A feature of another kind is an error.
	Dtype tensor.Dtype
	// VarLen makes the feature variable-length: a sparse feature of dense
	// shape [batch, max(1, longest list)], example i's value j at index
	// [i, j] (TensorFlow's VarLenFeature, but for the width of an
	// all-empty batch, which is 1 rather than 0 so that the batch's
	// tensors have no zero-sized dimension past the first). A missing
	// feature is an empty list.
	VarLen bool
	// Shape is a fixed-length feature's shape in one example (nil or
	// empty: a scalar); its list must hold exactly the shape's number of
	// values, in row-major order, and the batch's tensor has shape
	// [batch, Shape...].
	Shape []int
	// Default is a fixed-length feature's value when an example lacks it:
	// a list of the feature's kind with the shape's number of values.
	// Without one (KindNone), a missing feature is an error.
	Default Feature
	// Label puts the tensor in the batch's Labels rather than its
	// Features (a fixed-length feature only: labels are dense).
	Label bool
}

// ParseError is the error of ParseExamples for one example's feature:
// Example is its index in the batch, which a caller that knows the file
// and record it came from names.
type ParseError struct {
	Example int
	Feature string
	Err     error
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("example %d: feature %q: %v", e.Example, e.Feature, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// ParseExamples turns a batch of Examples into a sharding.Batch, feature
// by feature as spec says (TensorFlow's parse_example): a fixed-length
// feature becomes a dense tensor of shape [len(examples), Shape...] in
// Features (or Labels), a variable-length one a sharding.SparseCOO in
// Sparse. Features of the examples that spec does not name are left out.
// A feature of the wrong kind, a fixed-length feature with the wrong
// number of values, or missing without a default, is a *ParseError
// naming the example and the feature; a spec that cannot be met (a dtype
// no list has, a default of the wrong kind or length, a sparse label, a
// negative or zero dimension) is an error naming the feature.
func ParseExamples(examples []Example, spec map[string]FeatureSpec) (sharding.Batch, error) {
	if len(examples) == 0 {
		return sharding.Batch{}, fmt.Errorf("dataset: parse examples: no examples")
	}
	if len(spec) == 0 {
		return sharding.Batch{}, fmt.Errorf("dataset: parse examples: the spec names no features")
	}
	b := sharding.Batch{Features: map[string]*tensor.Dense{}}
	for _, name := range slices.Sorted(maps.Keys(spec)) {
		s := spec[name]
		kind, err := s.check()
		if err != nil {
			return sharding.Batch{}, fmt.Errorf("dataset: parse examples: feature %q: %w", name, err)
		}
		if s.VarLen {
			sp, err := parseVarLen(examples, name, kind, s.Dtype)
			if err != nil {
				return sharding.Batch{}, fmt.Errorf("dataset: parse examples: %w", err)
			}
			if b.Sparse == nil {
				b.Sparse = map[string]sharding.SparseCOO{}
			}
			b.Sparse[name] = sp
			continue
		}
		t, err := parseFixed(examples, name, kind, s)
		if err != nil {
			return sharding.Batch{}, fmt.Errorf("dataset: parse examples: %w", err)
		}
		if s.Label {
			if b.Labels == nil {
				b.Labels = map[string]*tensor.Dense{}
			}
			b.Labels[name] = t
		} else {
			b.Features[name] = t
		}
	}
	return b, nil
}

// kindOf is the kind of list a tensor of dtype is parsed from.
func kindOf(dt tensor.Dtype) Kind {
	switch dt {
	case tensor.Int64:
		return KindInt64
	case tensor.Float32, tensor.Float64:
		return KindFloat
	case tensor.String:
		return KindBytes
	}
	return KindNone
}

// check checks s and returns the kind of list it parses.
func (s FeatureSpec) check() (Kind, error) {
	kind := kindOf(s.Dtype)
	if kind == KindNone {
		return kind, fmt.Errorf("dtype %v: want int64, float32, float64 or string", s.Dtype)
	}
	if s.VarLen {
		switch {
		case s.Label:
			return kind, fmt.Errorf("a variable-length feature cannot be a label (labels are dense)")
		case len(s.Shape) > 0:
			return kind, fmt.Errorf("a variable-length feature has no shape, got %v", s.Shape)
		case s.Default.Kind() != KindNone:
			return kind, fmt.Errorf("a variable-length feature has no default")
		}
		return kind, nil
	}
	n := 1
	for _, d := range s.Shape {
		if d <= 0 {
			return kind, fmt.Errorf("shape %v: every dimension must be positive", s.Shape)
		}
		if n > (1<<31)/d {
			return kind, fmt.Errorf("shape %v is too large", s.Shape)
		}
		n *= d
	}
	if err := s.Default.Validate(); err != nil {
		return kind, fmt.Errorf("default: %w", err)
	}
	if dk := s.Default.Kind(); dk != KindNone && (dk != kind || s.Default.Len() != n) {
		return kind, fmt.Errorf("default has %d %s values, want %d %s values for shape %v", s.Default.Len(), dk, n, kind, s.Shape)
	}
	return kind, nil
}

// parseFixed makes the dense tensor of a fixed-length feature.
func parseFixed(examples []Example, name string, kind Kind, s FeatureSpec) (*tensor.Dense, error) {
	per := 1
	for _, d := range s.Shape {
		per *= d
	}
	shape := append([]int{len(examples)}, s.Shape...)
	var (
		i64 []int64
		f32 []float32
		f64 []float64
		str []string
	)
	n := len(examples) * per
	switch s.Dtype {
	case tensor.Int64:
		i64 = make([]int64, 0, n)
	case tensor.Float32:
		f32 = make([]float32, 0, n)
	case tensor.Float64:
		f64 = make([]float64, 0, n)
	default:
		str = make([]string, 0, n)
	}
	for i, ex := range examples {
		f, ok := ex[name]
		if !ok {
			if s.Default.Kind() == KindNone {
				return nil, &ParseError{Example: i, Feature: name, Err: fmt.Errorf("missing, and the spec gives no default")}
			}
			f = s.Default
		}
		if k := f.Kind(); k != kind && f.Len() > 0 {
			return nil, &ParseError{Example: i, Feature: name, Err: fmt.Errorf("holds %s values, want %s for dtype %v", k, kind, s.Dtype)}
		}
		if f.Len() != per {
			return nil, &ParseError{Example: i, Feature: name, Err: fmt.Errorf("has %d values, want %d for shape %v", f.Len(), per, s.Shape)}
		}
		switch s.Dtype {
		case tensor.Int64:
			i64 = append(i64, f.Int64s...)
		case tensor.Float32:
			f32 = append(f32, f.Floats...)
		case tensor.Float64:
			for _, v := range f.Floats {
				f64 = append(f64, float64(v))
			}
		default:
			for _, v := range f.Bytes {
				str = append(str, string(v))
			}
		}
	}
	var backing any
	switch s.Dtype {
	case tensor.Int64:
		backing = i64
	case tensor.Float32:
		backing = f32
	case tensor.Float64:
		backing = f64
	default:
		backing = str
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing)), nil
}

// parseVarLen makes the sparse feature of a variable-length feature.
func parseVarLen(examples []Example, name string, kind Kind, dt tensor.Dtype) (sharding.SparseCOO, error) {
	nnz, width := 0, 1
	for i, ex := range examples {
		f := ex[name]
		if k := f.Kind(); k != kind && f.Len() > 0 {
			return sharding.SparseCOO{}, &ParseError{Example: i, Feature: name, Err: fmt.Errorf("holds %s values, want %s for dtype %v", k, kind, dt)}
		}
		nnz += f.Len()
		width = max(width, f.Len())
	}
	indices := make([][]int, 0, nnz)
	coords := make([]int, 0, 2*nnz) // one allocation for every index
	var backing any
	switch dt {
	case tensor.Int64:
		v := make([]int64, 0, nnz)
		for _, ex := range examples {
			v = append(v, ex[name].Int64s...)
		}
		backing = v
	case tensor.Float32:
		v := make([]float32, 0, nnz)
		for _, ex := range examples {
			v = append(v, ex[name].Floats...)
		}
		backing = v
	case tensor.Float64:
		v := make([]float64, 0, nnz)
		for _, ex := range examples {
			for _, x := range ex[name].Floats {
				v = append(v, float64(x))
			}
		}
		backing = v
	default:
		v := make([]string, 0, nnz)
		for _, ex := range examples {
			for _, x := range ex[name].Bytes {
				v = append(v, string(x))
			}
		}
		backing = v
	}
	for i, ex := range examples {
		for j := range ex[name].Len() {
			coords = append(coords, i, j)
			indices = append(indices, coords[len(coords)-2:len(coords):len(coords)])
		}
	}
	return sharding.SparseCOO{
		Indices:    indices,
		Values:     tensor.New(tensor.WithShape(nnz), tensor.WithBacking(backing)),
		DenseShape: []int{len(examples), width},
	}, nil
}
