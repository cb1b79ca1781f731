package metrics

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// atThresholdsEpsilon is the epsilon of TF's precision_at_thresholds and
// recall_at_thresholds, "# Avoid division by zero. epsilon = 1e-7".
const atThresholdsEpsilon = 1e-7

// atThresholds is the metric of PrecisionAtThresholds and
// RecallAtThresholds (and their New*): two blocks of len(thresholds)
// weighted sums, tp and other (false positives for precision, false
// negatives for recall), i.e. the variables of TF's
// _confusion_matrix_at_thresholds with includes=("tp", "fp") or ("tp",
// "fn").
type atThresholds struct {
	kind       string
	thresholds []float64 // as given, for the result keys
	t32        []float32 // as TF compares them
	other      outcome   // falsePositive or falseNegative
	state      []float64
}

// validThresholds checks thresholds for PrecisionAtThresholds and
// RecallAtThresholds; fn names the constructor for the error.
func validThresholds(fn string, thresholds []float64) error {
	if len(thresholds) == 0 {
		return fmt.Errorf("metrics.%s: thresholds must not be empty", fn)
	}
	seen := make(map[float64]int, len(thresholds))
	for i, t := range thresholds {
		if math.IsNaN(t) {
			return fmt.Errorf("metrics.%s: threshold %d is NaN", fn, i)
		}
		if j, dup := seen[t]; dup {
			return fmt.Errorf("metrics.%s: thresholds %d and %d are both %v (each needs its own result key)", fn, j, i, t)
		}
		seen[t] = i
	}
	return nil
}

func newAtThresholds(name string, other outcome, thresholds []float64) *atThresholds {
	ts := append([]float64(nil), thresholds...)
	t32 := make([]float32, len(ts))
	strs := make([]string, len(ts))
	for i, t := range ts {
		t32[i] = float32(t)
		strs[i] = formatThreshold(t)
	}
	return &atThresholds{
		kind:       name + "(" + strings.Join(strs, ",") + ")",
		thresholds: ts,
		t32:        t32,
		other:      other,
		state:      make([]float64, 2*len(ts)),
	}
}

// formatThreshold is the shortest decimal that reads back as t, e.g. "0.5".
func formatThreshold(t float64) string { return strconv.FormatFloat(t, 'g', -1, 64) }

func (m *atThresholds) Kind() string     { return m.kind }
func (m *atThresholds) State() []float64 { return m.state }

func (m *atThresholds) blocks() (tp, other []float64) {
	n := len(m.thresholds)
	return m.state[:n:n], m.state[n:]
}

// Update folds labels, predictions[, weights] in.
func (m *atThresholds) Update(inputs []*tensor.Dense) error {
	labels, predictions, weights, err := labelsAndPredictions(m.kind, inputs)
	if err != nil {
		return err
	}
	if err := checkUnitInterval(m.kind, predictions); err != nil {
		return err
	}
	tp, other := m.blocks()
	for i, p := range predictions.data {
		p32, pos := float32(p), labels.data[i] != 0
		for j, t := range m.t32 {
			above := p32 > t // TF: pred_is_pos = greater(predictions, thresholds)
			switch {
			case pos && above:
				tp[j] += weights[i]
			case !pos && above && m.other == falsePositive:
				other[j] += weights[i]
			case pos && !above && m.other == falseNegative:
				other[j] += weights[i]
			}
		}
	}
	return nil
}

// values returns tp / (epsilon + tp + other) at each threshold, in the
// order of the thresholds.
func (m *atThresholds) values() []float64 {
	tp, other := m.blocks()
	out := make([]float64, len(tp))
	for i := range tp {
		out[i] = tp[i] / (atThresholdsEpsilon + tp[i] + other[i])
	}
	return out
}

// Result is the value at the first threshold.
func (m *atThresholds) Result() float64 {
	tp, other := m.blocks()
	return tp[0] / (atThresholdsEpsilon + tp[0] + other[0])
}

// Results implements MultiResult: the value at each threshold t keyed
// "threshold_<t>", t formatted as the shortest decimal that reads back as
// the threshold given (e.g. "threshold_0.5").
func (m *atThresholds) Results() map[string]float64 {
	vals := m.values()
	out := make(map[string]float64, len(vals))
	for i, t := range m.thresholds {
		out["threshold_"+formatThreshold(t)] = vals[i]
	}
	return out
}

// NewPrecisionAtThresholds returns a zero tf.metrics.precision_at_thresholds:
// at each threshold t, the total weight of the predictions above t whose
// label is true, divided by the total weight of the predictions above t. As
// in TF (tensorflow/python/ops/metrics_impl.py), it is computed from the
// true and false positive counts of _confusion_matrix_at_thresholds as
// "math_ops.divide(tp, epsilon + tp + fp)" with epsilon = 1e-7, so it is 0
// (not NaN) where no prediction is above the threshold, and very slightly
// below the exact ratio elsewhere.
//
// Update takes labels, predictions[, weights]: labels are cast to bool
// (nonzero is true); predictions must lie in [0, 1] (TF asserts
// "predictions must be in [0, 1]") and are compared as float32 with the
// thresholds held as float32, prediction > threshold counting as positive,
// exactly as TF. The state is len(thresholds) true positives, then
// len(thresholds) false positives.
//
// Result is the precision at the first threshold; Results (MultiResult)
// has them all, keyed "threshold_<t>", which the package-level Results
// reports as "name/threshold_<t>". The Kind lists the thresholds,
// e.g. "precision_at_thresholds(0.5,0.9)".
//
// It fails if thresholds is empty, holds a NaN, or holds a value twice.
// Thresholds outside [0, 1] are allowed, as in TF.
func NewPrecisionAtThresholds(thresholds []float64) (Metric, error) {
	if err := validThresholds("NewPrecisionAtThresholds", thresholds); err != nil {
		return nil, err
	}
	return newPrecisionAtThresholds(thresholds), nil
}

func newPrecisionAtThresholds(thresholds []float64) *atThresholds {
	return newAtThresholds("precision_at_thresholds", falsePositive, thresholds)
}

// NewRecallAtThresholds returns a zero tf.metrics.recall_at_thresholds: at
// each threshold t, the total weight of the predictions above t whose label
// is true, divided by the total weight of the true labels, computed as TF's
// "math_ops.divide(tp, epsilon + tp + fn)" with epsilon = 1e-7
// (tensorflow/python/ops/metrics_impl.py). Inputs, comparisons, Result,
// Results and failures are as for NewPrecisionAtThresholds. The
// state is len(thresholds) true positives, then len(thresholds) false
// negatives. The Kind is e.g. "recall_at_thresholds(0.5,0.9)".
func NewRecallAtThresholds(thresholds []float64) (Metric, error) {
	if err := validThresholds("NewRecallAtThresholds", thresholds); err != nil {
		return nil, err
	}
	return newRecallAtThresholds(thresholds), nil
}

func newRecallAtThresholds(thresholds []float64) *atThresholds {
	return newAtThresholds("recall_at_thresholds", falseNegative, thresholds)
}

// PrecisionAtThresholds binds tf.metrics.precision_at_thresholds (see
// NewPrecisionAtThresholds). Inputs are labels, predictions and, with
// Weights, the weights. A nil node, bad thresholds (empty, NaN,
// duplicated) or an option other than Weights set Bound.Err.
func PrecisionAtThresholds(labels, predictions *G.Node, thresholds []float64, opts ...Option) Bound {
	if err := validThresholds("PrecisionAtThresholds", thresholds); err != nil {
		return invalid("PrecisionAtThresholds", err)
	}
	ts := append([]float64(nil), thresholds...)
	return bind("PrecisionAtThresholds", func() Metric { return newPrecisionAtThresholds(ts) },
		opts, labelsPredictions, labels, predictions)
}

// RecallAtThresholds binds tf.metrics.recall_at_thresholds (see
// NewRecallAtThresholds). Inputs and errors are as for
// PrecisionAtThresholds.
func RecallAtThresholds(labels, predictions *G.Node, thresholds []float64, opts ...Option) Bound {
	if err := validThresholds("RecallAtThresholds", thresholds); err != nil {
		return invalid("RecallAtThresholds", err)
	}
	ts := append([]float64(nil), thresholds...)
	return bind("RecallAtThresholds", func() Metric { return newRecallAtThresholds(ts) },
		opts, labelsPredictions, labels, predictions)
}
