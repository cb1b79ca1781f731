package metrics

import (
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// accuracyBaselineMetric is the metric of AccuracyBaseline and
// NewAccuracyBaseline: a weighted mean of labels whose value is
// max(mean, 1 − mean).
type accuracyBaselineMetric struct{ ratio }

// NewAccuracyBaseline returns a zero accuracy baseline of binary labels:
// the accuracy of always predicting the more frequent class, max(m, 1 − m)
// for m the weighted mean of the labels, as TensorFlow's binary heads
// report it (metric key accuracy_baseline, computed from label/mean's
// total and count: max(total, count − total) / count). Update takes
// labels[, weights]; labels are 0 or 1 (or in between, as the mean
// takes them). The state is label/mean's: [total, count], the sums of
// weights*labels and of weights; the value is 0 while count <= 0.
func NewAccuracyBaseline() Metric {
	return &accuracyBaselineMetric{ratio{kind: "accuracy_baseline"}}
}

// Update folds labels[, weights] in.
func (m *accuracyBaselineMetric) Update(inputs []*tensor.Dense) error {
	args, w, err := convertInputs(m.kind, inputs, "labels")
	if err != nil {
		return err
	}
	labels := args[0]
	weights, err := broadcastWeights(m.kind, w, labels.shape)
	if err != nil {
		return err
	}
	m.add(labels.data, weights)
	return nil
}

// Result is max(total, count − total) / count, 0 while count <= 0.
func (m *accuracyBaselineMetric) Result() float64 {
	total, count := m.state[iTotal], m.state[iCount]
	if count <= 0 {
		return 0
	}
	return max(total, count-total) / count
}

// AccuracyBaseline binds the accuracy baseline of binary labels (see
// NewAccuracyBaseline). Inputs are labels and, with Weights, the weights.
// A nil node or an option other than Weights sets Bound.Err.
func AccuracyBaseline(labels *G.Node, opts ...Option) Bound {
	return bind("AccuracyBaseline", NewAccuracyBaseline, opts, []string{"labels"}, labels)
}
