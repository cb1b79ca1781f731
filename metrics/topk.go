package metrics

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// recallAtKMetric is the metric of RecallAtK and NewRecallAtK.
type recallAtKMetric struct {
	kind  string
	k     int
	state [2]float64
}

// NewRecallAtK returns a zero tf.metrics.recall_at_k for classifiers with a
// single label per example, without class_id: the weighted fraction of
// examples whose label is among the k classes of highest score
// (tensorflow/python/ops/metrics_impl.py: recall_at_k takes
// "_, top_k_idx = nn.top_k(predictions, k)" and recall_at_top_k counts
// tp = |top_k ∩ labels| and fn = |labels − top_k| per example, weighted,
// and divides tp / (tp + fn)).
//
// Update takes labels, predictions[, weights]. predictions are scores (such
// as logits or probabilities) of shape [batch, numClasses] (or
// [D1, ..., DN, numClasses]; the last dimension is the classes, as TF);
// labels are class ids of any numeric dtype with one per example, of shape
// [batch] or [batch, 1]; weights are per example ([batch], [batch, 1] or a
// scalar). k must not exceed numClasses (TF's top_k needs the "last
// dimension at least k"). A label must be an integer; as TF documents,
// label values outside [0, numClasses) "always count towards
// false_negative_at_<k>". Scores must not be NaN.
//
// Ties: TF's top_k "If two elements are equal, the lower-index element
// appears first", so a label is in the top k exactly when fewer than k
// classes rank ahead of it, class j ranking ahead of the label l when
// score[j] > score[l], or score[j] == score[l] and j < l. For scores
// [0.5, 0.5, 0.2] and k = 1, label 0 is a hit and label 1 a miss.
//
// The state is [true_positive_at_k, false_negative_at_k], the two variables
// of TF's recall_at_top_k: the total weight of the examples whose label is
// among the top k predictions, and of those whose label is not. The Kind is
// "recall_at_k(k=K)".
//
// Result is tp / (tp + fn), and 0 before any (nonzero-weight) example: TF
// divides without a guard and would give NaN there; 0 matches
// tf.metrics.recall. It fails if k is below 1.
func NewRecallAtK(k int) (Metric, error) {
	if err := validK("NewRecallAtK", k); err != nil {
		return nil, err
	}
	return newRecallAtK(k), nil
}

func validK(fn string, k int) error {
	if k < 1 {
		return fmt.Errorf("metrics.%s: k must be at least 1, got %d", fn, k)
	}
	return nil
}

func newRecallAtK(k int) *recallAtKMetric {
	return &recallAtKMetric{kind: fmt.Sprintf("recall_at_k(k=%d)", k), k: k}
}

// Kind is "recall_at_k(k=K)".
func (m *recallAtKMetric) Kind() string { return m.kind }

// State is [true_positive_at_k, false_negative_at_k].
func (m *recallAtKMetric) State() []float64 { return m.state[:] }

// Result is tp / (tp + fn), 0 when tp + fn is 0.
func (m *recallAtKMetric) Result() float64 {
	d := m.state[0] + m.state[1]
	if d == 0 {
		return 0
	}
	return m.state[0] / d
}

// Update folds labels, predictions[, weights] in.
func (m *recallAtKMetric) Update(inputs []*tensor.Dense) error {
	args, w, err := convertInputs(m.kind, inputs, "labels", "predictions")
	if err != nil {
		return err
	}
	labels, scores := args[0], args[1]
	if len(scores.shape) < 2 {
		return fmt.Errorf("metrics: %s: predictions must be scores of shape [batch, num_classes], got shape %v", m.kind, scores.shape)
	}
	rank := len(scores.shape)
	numClasses := scores.shape[rank-1]
	batchShape := scores.shape[:rank-1].Clone()
	batch := batchShape.TotalSize()
	if len(labels.data) != batch {
		return fmt.Errorf("metrics: %s: labels of shape %v do not hold one class id per example of predictions of shape %v (want %d labels, shape %v or %v)",
			m.kind, labels.shape, scores.shape, batch, batchShape, append(batchShape.Clone(), 1))
	}
	if m.k > numClasses {
		return fmt.Errorf("metrics: %s: k=%d exceeds the %d classes of predictions of shape %v", m.kind, m.k, numClasses, scores.shape)
	}
	weights, err := broadcastWeights(m.kind, w, batchShape)
	if err != nil {
		return err
	}
	for i, s := range scores.data {
		if math.IsNaN(s) {
			return fmt.Errorf("metrics: %s: predictions element %d of shape %v is NaN", m.kind, i, scores.shape)
		}
	}
	var tp, fn float64
	for i, l := range labels.data {
		if l != math.Trunc(l) || math.IsInf(l, 0) {
			return fmt.Errorf("metrics: %s: labels element %d of shape %v is %v, not an integer class id", m.kind, i, labels.shape, l)
		}
		row := scores.data[i*numClasses : (i+1)*numClasses]
		if l >= 0 && l < float64(numClasses) && inTopK(row, int(l), m.k) {
			tp += weights[i]
		} else {
			fn += weights[i]
		}
	}
	m.state[0] += tp
	m.state[1] += fn
	return nil
}

// inTopK reports whether class l is among the top k of scores, ties broken
// toward the lower index as TF's top_k.
func inTopK(scores []float64, l, k int) bool {
	s := scores[l]
	ahead := 0
	for j, v := range scores {
		if v > s || (v == s && j < l) {
			ahead++
			if ahead >= k {
				return false
			}
		}
	}
	return true
}

// RecallAtK binds tf.metrics.recall_at_k with one label per example (see
// NewRecallAtK). Inputs are labels (class ids, [batch] or [batch, 1]),
// predictions (scores, [batch, numClasses]) and, with Weights, the
// per-example weights. A nil node, k below 1 or an option other than
// Weights set Bound.Err.
func RecallAtK(labels, predictions *G.Node, k int, opts ...Option) Bound {
	if err := validK("RecallAtK", k); err != nil {
		return invalid("RecallAtK", err)
	}
	return bind("RecallAtK", func() Metric { return newRecallAtK(k) }, opts, labelsPredictions, labels, predictions)
}
