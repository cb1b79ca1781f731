package metrics

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/towerflow/towerflow/internal/numeric"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// class is the dtype family of an input, which decides how accuracy casts
// predictions to the labels' type.
type class int

const (
	classFloat64 class = iota
	classFloat32
	classInt
	classBool
)

// array is an input converted to float64, with its shape.
type array struct {
	shape tensor.Shape
	data  []float64
	class class
}

// fromDense converts t to float64 in row-major order. t may have any
// numeric dtype (float32, float64, int, int8..int64, uint, uint8..uint64) or
// bool (true is 1); it may be a scalar or a view.
func fromDense(t *tensor.Dense) (array, error) {
	if t == nil {
		return array{}, fmt.Errorf("nil tensor")
	}
	shape := t.Shape()
	if shape.TotalSize() == 0 {
		// Data panics on an empty tensor.
		return array{shape: shape.Clone(), data: []float64{}, class: dtypeClass(t.Dtype())}, nil
	}
	if t.RequiresIterator() {
		m, ok := t.Materialize().(*tensor.Dense)
		if !ok {
			return array{}, fmt.Errorf("cannot materialize view of shape %v", shape)
		}
		t = m
	}
	d, err := numeric.Slice(t)
	if err != nil {
		return array{}, err
	}
	data, err := numeric.SliceFloat64s(d)
	if err != nil {
		return array{}, fmt.Errorf("unsupported data type %T (want a numeric or bool dtype)", d)
	}
	n := shape.TotalSize()
	if len(data) < n {
		return array{}, fmt.Errorf("shape %v needs %d elements, data has %d", shape, n, len(data))
	}
	// Only the first TotalSize elements count: a backing may be longer.
	return array{shape: shape.Clone(), data: data[:n:n], class: dtypeClass(t.Dtype())}, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func dtypeClass(dt tensor.Dtype) class {
	switch dt {
	case tensor.Float32:
		return classFloat32
	case tensor.Bool:
		return classBool
	case tensor.Float64:
		return classFloat64
	}
	switch dt.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return classInt
	}
	return classFloat64
}

// toDense converts a gorgonia Value (a *tensor.Dense, a scalar such as
// *gorgonia.F64, or a dual value) to a *tensor.Dense for Metric.Update.
// A *tensor.Dense is returned as it is.
func toDense(v G.Value) (*tensor.Dense, error) {
	if v == nil {
		return nil, fmt.Errorf("nil value")
	}
	if d, ok := v.(*tensor.Dense); ok {
		return d, nil
	}
	shape := v.Shape()
	if shape.TotalSize() == 0 {
		return tensor.New(tensor.Of(v.Dtype()), tensor.WithShape(shape.Clone()...)), nil
	}
	data := v.Data()
	rv := reflect.ValueOf(data)
	if rv.Kind() != reflect.Slice {
		if !shape.IsScalarEquiv() {
			return nil, fmt.Errorf("scalar data %T for shape %v", data, shape)
		}
		d := tensor.New(tensor.FromScalar(data))
		if !shape.IsScalar() {
			if err := d.Reshape(shape.Clone()...); err != nil {
				return nil, err
			}
		}
		return d, nil
	}
	n := shape.TotalSize()
	if rv.Len() < n {
		return nil, fmt.Errorf("shape %v needs %d elements, data has %d", shape, n, rv.Len())
	}
	// Copy, so that the metric never aliases the graph's memory.
	cp := reflect.MakeSlice(rv.Type(), n, n)
	reflect.Copy(cp, rv.Slice(0, n))
	if shape.IsScalar() {
		shape = tensor.Shape{1}
	}
	return tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(cp.Interface())), nil
}

// UpdateValues converts gorgonia values (for example the Value() of each of
// a Bound's Inputs after the graph has run: a *tensor.Dense, a scalar such
// as *gorgonia.F64, or a dual value) to *tensor.Dense and calls m.Update.
func UpdateValues(m Metric, vals []G.Value) error {
	ts := make([]*tensor.Dense, len(vals))
	for i, v := range vals {
		d, err := toDense(v)
		if err != nil {
			return fmt.Errorf("metrics: %s: input %d: %w", m.Kind(), i, err)
		}
		ts[i] = d
	}
	return m.Update(ts)
}

// convertInputs converts a metric's inputs: want names the required inputs in order;
// one more input, if present, is the weights. kind prefixes the errors.
func convertInputs(kind string, inputs []*tensor.Dense, want ...string) (args []array, weights *array, err error) {
	if len(inputs) != len(want) && len(inputs) != len(want)+1 {
		return nil, nil, fmt.Errorf("metrics: %s: got %d inputs, want %d (%s) or %d (%s, weights)",
			kind, len(inputs), len(want), strings.Join(want, ", "), len(want)+1, strings.Join(want, ", "))
	}
	names := append(append([]string(nil), want...), "weights")
	all := make([]array, len(inputs))
	for i, t := range inputs {
		a, err := fromDense(t)
		if err != nil {
			return nil, nil, fmt.Errorf("metrics: %s: %s (input %d): %w", kind, names[i], i, err)
		}
		all[i] = a
	}
	if len(all) > len(want) {
		weights = &all[len(want)]
	}
	return all[:len(want)], weights, nil
}

// broadcastWeights returns one weight per element of a tensor of shape
// target (nil weights: all 1), following TF's _remove_squeezable_dimensions
// and weights_broadcast_ops.broadcast_weights, relaxed to align the weights'
// dimensions with the leading dimensions of target:
//
//   - a scalar (or any all-ones shape of a single element) applies to every
//     element;
//   - trailing dimensions of size 1 beyond target's rank are dropped (TF
//     squeezes weights of rank+1);
//   - missing trailing dimensions are taken as 1 (TF expands weights of
//     rank-1), so [batch] and [batch, 1] broadcast over the trailing
//     dimensions of [batch, ...];
//   - then every dimension must equal target's or be 1.
func broadcastWeights(kind string, w *array, target tensor.Shape) ([]float64, error) {
	n := target.TotalSize()
	out := make([]float64, n)
	if w == nil {
		for i := range out {
			out[i] = 1
		}
		return out, nil
	}
	if len(w.data) == 1 && w.shape.IsScalarEquiv() {
		for i := range out {
			out[i] = w.data[0]
		}
		return out, nil
	}
	bad := func() ([]float64, error) {
		return nil, fmt.Errorf("metrics: %s: weights of shape %v do not broadcast to shape %v (want a scalar, the same shape, or a prefix of it such as [batch] or [batch, 1])",
			kind, w.shape, target)
	}
	ws := append([]int(nil), w.shape...)
	for len(ws) > len(target) && ws[len(ws)-1] == 1 {
		ws = ws[:len(ws)-1]
	}
	if len(ws) > len(target) {
		return bad()
	}
	for len(ws) < len(target) {
		ws = append(ws, 1)
	}
	for i := range ws {
		if ws[i] != target[i] && ws[i] != 1 {
			return bad()
		}
	}
	if n == 0 {
		return out, nil
	}
	// Strides of the weights, with 0 for broadcast dimensions.
	rank := len(target)
	stride := make([]int, rank)
	acc := 1
	for i := rank - 1; i >= 0; i-- {
		if ws[i] != 1 {
			stride[i] = acc
		}
		acc *= ws[i]
	}
	idx := make([]int, rank)
	off := 0
	for i := range out {
		out[i] = w.data[off]
		// Advance the row-major index into target.
		for d := rank - 1; d >= 0; d-- {
			idx[d]++
			off += stride[d]
			if idx[d] < target[d] {
				break
			}
			off -= stride[d] * idx[d]
			idx[d] = 0
		}
	}
	return out, nil
}

// sameSize checks that labels and predictions have the same number of
// elements.
func sameSize(kind string, labels, predictions array) error {
	if len(labels.data) != len(predictions.data) {
		return fmt.Errorf("metrics: %s: labels of shape %v and predictions of shape %v differ in size (%d vs %d elements)",
			kind, labels.shape, predictions.shape, len(labels.data), len(predictions.data))
	}
	return nil
}

// labelsAndPredictions converts the inputs of a metric taking labels,
// predictions and optional weights: labels and predictions must have the
// same number of elements, and the weights are broadcast to the
// predictions' shape.
func labelsAndPredictions(kind string, inputs []*tensor.Dense) (labels, predictions array, weights []float64, err error) {
	args, w, err := convertInputs(kind, inputs, "labels", "predictions")
	if err != nil {
		return array{}, array{}, nil, err
	}
	labels, predictions = args[0], args[1]
	if err := sameSize(kind, labels, predictions); err != nil {
		return array{}, array{}, nil, err
	}
	weights, err = broadcastWeights(kind, w, predictions.shape)
	if err != nil {
		return array{}, array{}, nil, err
	}
	return labels, predictions, weights, nil
}
