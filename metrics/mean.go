package metrics

import (
	"math"

	G "gorgonia.org/gorgonia"
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

// meanMetric is the metric of Mean and NewMean.
type meanMetric struct{ ratio }

// NewMean returns a zero tf.metrics.mean: the weighted mean of values.
// Update takes values[, weights]. The state is [total, count] where total is
// the sum of weights*values and count the sum of weights (the number of
// values without weights), as TF's mean (tensorflow/python/ops/
// metrics_impl.py): "update_op increments total with the reduced sum of the
// product of values and weights, and it increments count with the reduced
// sum of weights". TF sums in float32; this sums in float64.
func NewMean() Metric { return &meanMetric{ratio{kind: "mean"}} }

// Update folds values[, weights] in.
func (m *meanMetric) Update(inputs []*tensor.Dense) error {
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

// Mean binds tf.metrics.mean: the weighted mean of values (see NewMean).
// Inputs are values and, with Weights, the weights. A nil node or an option
// other than Weights sets Bound.Err.
func Mean(values *G.Node, opts ...Option) Bound {
	return bind("Mean", NewMean, opts, valuesOnly, values)
}

// accuracyMetric is the metric of Accuracy and NewAccuracy.
type accuracyMetric struct{ ratio }

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
func NewAccuracy() Metric { return &accuracyMetric{ratio{kind: "accuracy"}} }

// Update folds labels, predictions[, weights] in.
func (m *accuracyMetric) Update(inputs []*tensor.Dense) error {
	labels, predictions, weights, err := labelsAndPredictions(m.kind, inputs)
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

// Accuracy binds tf.metrics.accuracy: the weighted mean of labels ==
// predictions (see NewAccuracy). Inputs are labels, predictions and, with
// Weights, the weights. A nil node or an option other than Weights sets
// Bound.Err.
func Accuracy(labels, predictions *G.Node, opts ...Option) Bound {
	return bind("Accuracy", NewAccuracy, opts, labelsPredictions, labels, predictions)
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

// errorMean is the metric of MeanSquaredError and MeanAbsoluteError, and
// the state and update of RootMeanSquaredError: tf.metrics.mean of a
// per-element error of labels and predictions.
type errorMean struct {
	ratio
	err func(label, prediction float64) float64
}

// Update folds labels, predictions[, weights] in.
func (m *errorMean) Update(inputs []*tensor.Dense) error {
	labels, predictions, weights, err := labelsAndPredictions(m.kind, inputs)
	if err != nil {
		return err
	}
	errs := make([]float64, len(labels.data))
	for i, l := range labels.data {
		errs[i] = m.err(l, predictions.data[i])
	}
	m.add(errs, weights)
	return nil
}

func squaredError(l, p float64) float64  { return (l - p) * (l - p) }
func absoluteError(l, p float64) float64 { return math.Abs(p - l) }

// NewMeanSquaredError returns a zero tf.metrics.mean_squared_error: the
// weighted mean of (labels - predictions)². Update takes labels,
// predictions[, weights]; labels and predictions must have the same number
// of elements. The state is [total, count] of tf.metrics.mean applied to
// squared_error (tensorflow/python/ops/metrics_impl.py, mean_squared_error:
// "squared_error = math_ops.squared_difference(labels, predictions); return
// mean(squared_error, weights, ...)"): total is the sum of
// weights*squared_error, count the sum of weights. TF computes in the input
// dtype and sums in float32; this computes and sums in float64.
func NewMeanSquaredError() Metric {
	return &errorMean{ratio{kind: "mean_squared_error"}, squaredError}
}

// rootMeanSquaredError is the metric of RootMeanSquaredError and
// NewRootMeanSquaredError: errorMean of the squared errors, whose Result is
// the square root.
type rootMeanSquaredError struct{ errorMean }

// NewRootMeanSquaredError returns a zero tf.metrics.root_mean_squared_error:
// the square root of the weighted mean squared error. Its state and Update
// are those of NewMeanSquaredError ([total, count] of the squared errors);
// only Result differs, as in TF, where root_mean_squared_error calls
// mean_squared_error and returns math_ops.sqrt(mse)
// (tensorflow/python/ops/metrics_impl.py). Its Kind differs too, so the two
// are never merged with each other.
func NewRootMeanSquaredError() Metric {
	return &rootMeanSquaredError{errorMean{ratio{kind: "root_mean_squared_error"}, squaredError}}
}

// Result is sqrt(total / count), 0 while count <= 0.
func (m *rootMeanSquaredError) Result() float64 { return math.Sqrt(m.ratio.Result()) }

// NewMeanAbsoluteError returns a zero tf.metrics.mean_absolute_error: the
// weighted mean of |predictions - labels|. Update takes labels,
// predictions[, weights]. The state is [total, count] of tf.metrics.mean
// applied to the absolute errors (tensorflow/python/ops/metrics_impl.py,
// mean_absolute_error: "absolute_errors = math_ops.abs(predictions -
// labels); return mean(absolute_errors, weights, ...)").
func NewMeanAbsoluteError() Metric {
	return &errorMean{ratio{kind: "mean_absolute_error"}, absoluteError}
}

// MeanSquaredError binds tf.metrics.mean_squared_error (see
// NewMeanSquaredError). Inputs are labels, predictions and, with Weights,
// the weights. A nil node or an option other than Weights sets Bound.Err.
func MeanSquaredError(labels, predictions *G.Node, opts ...Option) Bound {
	return bind("MeanSquaredError", NewMeanSquaredError, opts, labelsPredictions, labels, predictions)
}

// RootMeanSquaredError binds tf.metrics.root_mean_squared_error (see
// NewRootMeanSquaredError). Inputs are labels, predictions and, with
// Weights, the weights. A nil node or an option other than Weights sets
// Bound.Err.
func RootMeanSquaredError(labels, predictions *G.Node, opts ...Option) Bound {
	return bind("RootMeanSquaredError", NewRootMeanSquaredError, opts, labelsPredictions, labels, predictions)
}

// MeanAbsoluteError binds tf.metrics.mean_absolute_error (see
// NewMeanAbsoluteError). Inputs are labels, predictions and, with Weights,
// the weights. A nil node or an option other than Weights sets Bound.Err.
func MeanAbsoluteError(labels, predictions *G.Node, opts ...Option) Bound {
	return bind("MeanAbsoluteError", NewMeanAbsoluteError, opts, labelsPredictions, labels, predictions)
}
