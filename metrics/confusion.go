package metrics

import (
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Binary confusion metrics: Precision, Recall and the weighted counts
// TruePositives, FalsePositives, TrueNegatives and FalseNegatives, as in TF1
// (tensorflow/python/ops/metrics_impl.py). Each casts labels and predictions
// to bool, "math_ops.cast(predictions, dtype=dtypes.bool)": nonzero
// (including NaN) is true, zero is false; predictions are not thresholded at
// 0.5, so pass thresholded predictions, or use PrecisionAtThresholds and
// RecallAtThresholds for scores.

// outcome is one cell of the binary confusion matrix.
type outcome int

const (
	truePositive outcome = iota
	falsePositive
	trueNegative
	falseNegative
)

// binaryOutcome classifies a (label, prediction) pair cast to bool.
func binaryOutcome(label, prediction float64) outcome {
	switch l, p := label != 0, prediction != 0; {
	case l && p:
		return truePositive
	case !l && p:
		return falsePositive
	case !l && !p:
		return trueNegative
	}
	return falseNegative
}

// confusionCounts folds labels, predictions[, weights] into one weighted sum
// per outcome, the _count_condition of TF: "values = math_ops.multiply(values,
// weights)" and "state_ops.assign_add(count, math_ops.reduce_sum(values))".
func confusionCounts(kind string, inputs []*tensor.Dense) (counts [4]float64, err error) {
	args, w, err := convertInputs(kind, inputs, "labels", "predictions")
	if err != nil {
		return counts, err
	}
	labels, predictions := args[0], args[1]
	if err := sameSize(kind, labels, predictions); err != nil {
		return counts, err
	}
	weights, err := broadcastWeights(kind, w, predictions.shape)
	if err != nil {
		return counts, err
	}
	for i, l := range labels.data {
		counts[binaryOutcome(l, predictions.data[i])] += weights[i]
	}
	return counts, nil
}

// pairRatio is the metric of Precision and Recall: its state is two
// weighted counts [a, b] and its value a / (a + b), 0 while a + b <= 0.
type pairRatio struct {
	kind  string
	a, b  outcome
	state [2]float64
}

func (m *pairRatio) Kind() string     { return m.kind }
func (m *pairRatio) State() []float64 { return m.state[:] }

// Result is a / (a + b), or 0 unless a + b > 0, as TF's compute_precision
// and compute_recall: "array_ops.where(math_ops.greater(tp + fp, 0),
// math_ops.divide(tp, tp + fp), 0)".
func (m *pairRatio) Result() float64 {
	if d := m.state[0] + m.state[1]; d > 0 {
		return m.state[0] / d
	}
	return 0
}

// Update folds labels, predictions[, weights] in.
func (m *pairRatio) Update(inputs []*tensor.Dense) error {
	c, err := confusionCounts(m.kind, inputs)
	if err != nil {
		return err
	}
	m.state[0] += c[m.a]
	m.state[1] += c[m.b]
	return nil
}

// NewPrecision returns a zero tf.metrics.precision: true positives / (true
// positives + false positives), 0 when there is no positive prediction (TF:
// "where(greater(tp + fp, 0), divide(tp, tp + fp), 0)"). Update takes
// labels, predictions[, weights]; both are cast to bool (nonzero is true)
// and must have the same number of elements. The state is
// [true_positives, false_positives], weighted sums as TF's true_positives
// and false_positives.
func NewPrecision() Metric {
	return &pairRatio{kind: "precision", a: truePositive, b: falsePositive}
}

// NewRecall returns a zero tf.metrics.recall: true positives / (true
// positives + false negatives), 0 when there is no positive label (TF:
// "where(greater(true_p + false_n, 0), divide(true_p, true_p + false_n),
// 0)"). Update takes labels, predictions[, weights], cast to bool. The state
// is [true_positives, false_negatives].
func NewRecall() Metric {
	return &pairRatio{kind: "recall", a: truePositive, b: falseNegative}
}

// countMetric is the metric of TruePositives, FalsePositives,
// TrueNegatives and FalseNegatives: a weighted count, whose Kind names
// which.
type countMetric struct {
	kind  string
	of    outcome
	state [1]float64
}

func newCount(kind string, of outcome) Metric { return &countMetric{kind: kind, of: of} }

// NewTruePositives returns a zero tf.metrics.true_positives: the total
// weight of the examples whose label and prediction are both true (TF:
// "logical_and(equal(labels, True), equal(predictions, True))"). Update takes
// labels, predictions[, weights], cast to bool. The state is [count].
func NewTruePositives() Metric { return newCount("true_positives", truePositive) }

// NewFalsePositives returns a zero tf.metrics.false_positives: the total
// weight of the examples with a false label and a true prediction (TF:
// "logical_and(equal(labels, False), equal(predictions, True))"). The
// state is [count].
func NewFalsePositives() Metric { return newCount("false_positives", falsePositive) }

// NewTrueNegatives returns a zero tf.metrics.true_negatives: the total
// weight of the examples whose label and prediction are both false (TF:
// "logical_and(equal(labels, False), equal(predictions, False))"). The
// state is [count].
func NewTrueNegatives() Metric { return newCount("true_negatives", trueNegative) }

// NewFalseNegatives returns a zero tf.metrics.false_negatives: the total
// weight of the examples with a true label and a false prediction (TF:
// "logical_and(equal(labels, True), equal(predictions, False))"). The
// state is [count].
func NewFalseNegatives() Metric { return newCount("false_negatives", falseNegative) }

// Kind is "true_positives", "false_positives", "true_negatives" or
// "false_negatives".
func (m *countMetric) Kind() string { return m.kind }

// State is [count].
func (m *countMetric) State() []float64 { return m.state[:] }

// Result is the count.
func (m *countMetric) Result() float64 { return m.state[0] }

// Update folds labels, predictions[, weights] in.
func (m *countMetric) Update(inputs []*tensor.Dense) error {
	c, err := confusionCounts(m.kind, inputs)
	if err != nil {
		return err
	}
	m.state[0] += c[m.of]
	return nil
}

// Precision binds tf.metrics.precision (see NewPrecision). Inputs are
// labels, predictions and, with Weights, the weights. A nil node or an
// option other than Weights sets Bound.Err.
func Precision(labels, predictions *G.Node, opts ...Option) Bound {
	return bind("Precision", NewPrecision, opts, labelsPredictions, labels, predictions)
}

// Recall binds tf.metrics.recall (see NewRecall). Inputs and errors are as
// for Precision.
func Recall(labels, predictions *G.Node, opts ...Option) Bound {
	return bind("Recall", NewRecall, opts, labelsPredictions, labels, predictions)
}

// TruePositives binds tf.metrics.true_positives (see NewTruePositives).
// Inputs and errors are as for Precision.
func TruePositives(labels, predictions *G.Node, opts ...Option) Bound {
	return bind("TruePositives", NewTruePositives, opts, labelsPredictions, labels, predictions)
}

// FalsePositives binds tf.metrics.false_positives (see NewFalsePositives).
// Inputs and errors are as for Precision.
func FalsePositives(labels, predictions *G.Node, opts ...Option) Bound {
	return bind("FalsePositives", NewFalsePositives, opts, labelsPredictions, labels, predictions)
}

// TrueNegatives binds tf.metrics.true_negatives (see NewTrueNegatives).
// Inputs and errors are as for Precision.
func TrueNegatives(labels, predictions *G.Node, opts ...Option) Bound {
	return bind("TrueNegatives", NewTrueNegatives, opts, labelsPredictions, labels, predictions)
}

// FalseNegatives binds tf.metrics.false_negatives (see NewFalseNegatives).
// Inputs and errors are as for Precision.
func FalseNegatives(labels, predictions *G.Node, opts ...Option) Bound {
	return bind("FalseNegatives", NewFalseNegatives, opts, labelsPredictions, labels, predictions)
}
