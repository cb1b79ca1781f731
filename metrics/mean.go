package metrics

import (
	"math"

	"gorgonia.org/tensor"
)

// meanState is the state of Mean and Accuracy, TF's two metric variables
// "total" and "count".
const (
	iTotal = iota
	iCount
	meanStateLen
)

// ratio is a metric whose value is state[total] / state[count], 0 while
// count <= 0, as TF's math_ops.div_no_nan(total, maximum(count, 0)) in
// tf.metrics.mean (tensorflow/python/ops/metrics_impl.py).
type ratio struct {
	kind  string
	state [meanStateLen]float64
}

func (r *ratio) Kind() string     { return r.kind }
func (r *ratio) State() []float64 { return r.state[:] }

func (r *ratio) Result() float64 {
	if r.state[iCount] <= 0 {
		return 0
	}
	return r.state[iTotal] / r.state[iCount]
}

// add folds per-element values and weights in: total += sum(w*v),
// count += sum(w).
func (r *ratio) add(values, weights []float64) {
	var total, count float64
	for i, v := range values {
		total += weights[i] * v
		count += weights[i]
	}
	r.state[iTotal] += total
	r.state[iCount] += count
}

// MeanMetric is the metric NewMean returns.
type MeanMetric struct{ ratio }

// NewMean returns a zero tf.metrics.mean: the weighted mean of values.
// Update takes values[, weights]. The state is [total, count] where total is
// the sum of weights*values and count the sum of weights (the number of
// values without weights), as TF's mean (tensorflow/python/ops/
// metrics_impl.py): "update_op increments total with the reduced sum of the
// product of values and weights, and it increments count with the reduced
// sum of weights". TF sums in float32; this sums in float64.
func NewMean() Metric { return &MeanMetric{ratio{kind: "mean"}} }

// Update folds values[, weights] in.
func (m *MeanMetric) Update(inputs []*tensor.Dense) error {
	args, w, err := convertInputs(m.kind, inputs, "values")
	if err != nil {
		return err
	}
	values := args[0]
	weights, err := broadcastWeights(m.kind, w, values.shape)
	if err != nil {
		return err
	}
	m.add(values.data, weights)
	return nil
}

// AccuracyMetric is the metric NewAccuracy returns.
type AccuracyMetric struct{ ratio }

// NewAccuracy returns a zero tf.metrics.accuracy: the weighted mean of
// labels == predictions. Update takes labels, predictions[, weights]; labels
// and predictions must have the same number of elements (TF's rank-squeezing
// of a trailing 1 is implied, as only the element order matters).
//
// As in TF, predictions are first cast to the labels' dtype: to bool
// (nonzero is true) for bool labels, truncated toward zero for integer
// labels, rounded to float32 for float32 labels. The state is [total, count]
// of tf.metrics.mean applied to is_correct (tensorflow/python/ops/
// metrics_impl.py, accuracy: "an is_correct operation computes a Tensor with
// elements 1.0 where the corresponding elements of predictions and labels
// match and 0.0 otherwise").
func NewAccuracy() Metric { return &AccuracyMetric{ratio{kind: "accuracy"}} }

// Update folds labels, predictions[, weights] in.
func (m *AccuracyMetric) Update(inputs []*tensor.Dense) error {
	args, w, err := convertInputs(m.kind, inputs, "labels", "predictions")
	if err != nil {
		return err
	}
	labels, predictions := args[0], args[1]
	if err := sameSize(m.kind, labels, predictions); err != nil {
		return err
	}
	weights, err := broadcastWeights(m.kind, w, predictions.shape)
	if err != nil {
		return err
	}
	cast := castTo(labels.class, predictions.class)
	correct := make([]float64, len(labels.data))
	for i, l := range labels.data {
		if cast(predictions.data[i]) == l {
			correct[i] = 1
		}
	}
	m.add(correct, weights)
	return nil
}

// castTo returns the conversion of a prediction of class from to the labels'
// class to, as math_ops.cast(predictions, labels.dtype) in TF's accuracy.
func castTo(to, from class) func(float64) float64 {
	switch {
	case to == classBool:
		return func(p float64) float64 { return b2f(p != 0) }
	case to == classInt && from != classInt && from != classBool:
		return math.Trunc
	case to == classFloat32 && from == classFloat64:
		return func(p float64) float64 { return float64(float32(p)) }
	}
	return func(p float64) float64 { return p }
}
