package metrics

import (
	"fmt"
	"sort"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Constants of tf.metrics.auc (tensorflow/python/ops/metrics_impl.py).
const (
	// aucKEpsilon widens the end thresholds to 0-kepsilon and 1+kepsilon "to
	// account for floating point imprecisions", so that predictions of
	// exactly 0 or 1 fall inside.
	aucKEpsilon = 1e-7
	// aucEpsilon is added to the rate numerators and denominators "to avoid
	// dividing by 0".
	aucEpsilon = 1e-6
)

// aucMetric is the metric of AUC and NewAUC, its state laid out as NewAUC
// documents.
type aucMetric struct {
	kind       string
	curve      CurveKind
	thresholds []float32
	state      []float64
}

// NewAUC returns a zero tf.metrics.auc with summation_method='trapezoidal'
// (TF1's default). Options: NumThresholds (default 200) and Curve (default
// ROC); Weights does not apply, the weights being Update's last input.
// Update takes labels, predictions[, weights]; labels are cast to bool
// (nonzero is true), predictions must lie in [0, 1] (TF asserts
// "predictions must be in [0, 1]"), and both must have the same number of
// elements.
//
// As in TF, the thresholds are 0-1e-7, i/(n-1) for i = 1..n-2, and 1+1e-7,
// held as float32 and compared with the predictions cast to float32
// (prediction > threshold counts as positive), so a prediction equal to a
// threshold falls at or below it exactly as in TF. Result follows TF's
// compute_auc: with epsilon = 1e-6, recall = (tp+eps)/(tp+fn+eps),
// fp_rate = fp/(fp+tn+eps), precision = (tp+eps)/(tp+fp+eps), and the area
// is the trapezoidal sum over consecutive thresholds of
// (x[i]-x[i+1]) * (y[i]+y[i+1])/2 with (x, y) = (fp_rate, recall) for ROC
// and (recall, precision) for PR. TF evaluates in float32; this in float64.
//
// The state is four blocks of NumThresholds sums each, in this order: true
// positives, false negatives, true negatives, false positives, i.e. TF's
// _confusion_matrix_at_thresholds variables: tp[i] is the total weight of
// the predictions above thresholds[i] whose label is true, fn[i] of those
// at most thresholds[i] whose label is true, tn[i] of those at most
// thresholds[i] whose label is false, fp[i] of those above thresholds[i]
// whose label is false. The Kind is "auc(curve=ROC|PR,thresholds=N)".
//
// NewAUC fails if NumThresholds is below 2, the curve is neither ROC nor
// PR (TF raises "Curve must be either ROC or PR"), or an option does not
// apply.
func NewAUC(opts ...Option) (Metric, error) {
	o, err := aucOptions("NewAUC", optNumThresholds|optCurve, opts)
	if err != nil {
		return nil, err
	}
	return newAUC(o), nil
}

// AUC binds tf.metrics.auc with the trapezoidal summation (TF1's default):
// the area under the ROC or PR curve, approximated from confusion counts at
// NumThresholds thresholds (see NewAUC). Inputs are labels (cast to bool),
// predictions (which must lie in [0, 1]) and, with Weights, the weights.
// Its options are Weights, NumThresholds and Curve. A nil node, an invalid
// NumThresholds or Curve (see NewAUC) or another option set Bound.Err.
func AUC(labels, predictions *G.Node, opts ...Option) Bound {
	o, err := aucOptions("AUC", optWeights|optNumThresholds|optCurve, opts)
	if err != nil {
		return invalid("AUC", err)
	}
	return bindNodes("AUC", func() Metric { return newAUC(o) }, o, labelsPredictions, labels, predictions)
}

// aucOptions applies and checks the options of AUC or NewAUC, fn, which
// accepts the options in accepts.
func aucOptions(fn string, accepts optionKind, opts []Option) (options, error) {
	o, err := makeOptions(fn, accepts, opts)
	if err != nil {
		return options{}, err
	}
	if o.numThresholds < 2 {
		return options{}, fmt.Errorf("metrics.%s: NumThresholds must be at least 2, got %d", fn, o.numThresholds)
	}
	if o.curve != ROC && o.curve != PR {
		return options{}, fmt.Errorf("metrics.%s: curve must be ROC or PR, got %v", fn, o.curve)
	}
	return o, nil
}

func newAUC(o options) *aucMetric {
	n := o.numThresholds
	return &aucMetric{
		kind:       fmt.Sprintf("auc(curve=%v,thresholds=%d)", o.curve, n),
		curve:      o.curve,
		thresholds: aucThresholds(n),
		state:      make([]float64, 4*n),
	}
}

// aucThresholds returns TF's thresholds for num_thresholds n:
// [0 - kepsilon] + [(i+1)/(n-1) for i in range(n-2)] + [1 + kepsilon],
// computed in float64 (Python floats) and then held as float32, the dtype of
// the array_ops.constant(thresholds) that TF compares against.
func aucThresholds(n int) []float32 {
	t := make([]float32, n)
	t[0] = float32(0.0 - aucKEpsilon)
	for i := 0; i < n-2; i++ {
		t[i+1] = float32(float64(i+1) * 1.0 / float64(n-1))
	}
	t[n-1] = float32(1.0 + aucKEpsilon)
	return t
}

// Kind is "auc(curve=ROC|PR,thresholds=N)".
func (m *aucMetric) Kind() string { return m.kind }

// State is tp, fn, tn, fp, NumThresholds sums each.
func (m *aucMetric) State() []float64 { return m.state }

// confusion returns the four blocks of the live state: true positives, false
// negatives, true negatives and false positives at each threshold.
func (m *aucMetric) confusion() (tp, fn, tn, fp []float64) {
	n := len(m.thresholds)
	return m.state[:n:n], m.state[n : 2*n : 2*n], m.state[2*n : 3*n : 3*n], m.state[3*n:]
}

// Update folds labels, predictions[, weights] in.
func (m *aucMetric) Update(inputs []*tensor.Dense) error {
	labels, predictions, weights, err := labelsAndPredictions(m.kind, inputs)
	if err != nil {
		return err
	}
	if err := checkUnitInterval(m.kind, predictions); err != nil {
		return err
	}
	n := len(m.thresholds)
	// A prediction p is above thresholds[i] exactly for i < k, where k is
	// the number of thresholds below p. Bucket the weights by k, then
	// tp[i] = pos weight with k > i, fn[i] = pos weight with k <= i, and
	// likewise fp and tn from the negatives.
	pos := make([]float64, n+1)
	neg := make([]float64, n+1)
	for i, p := range predictions.data {
		p32 := float32(p)
		k := sort.Search(n, func(j int) bool { return m.thresholds[j] >= p32 })
		if labels.data[i] != 0 {
			pos[k] += weights[i]
		} else {
			neg[k] += weights[i]
		}
	}
	// Suffix sums: posAbove[i] is the positive weight with k > i.
	posAbove := make([]float64, n)
	negAbove := make([]float64, n)
	var pa, na float64
	for i := n - 1; i >= 0; i-- {
		pa += pos[i+1]
		na += neg[i+1]
		posAbove[i], negAbove[i] = pa, na
	}
	tp, fn, tn, fp := m.confusion()
	var pb, nb float64 // weight with k <= i
	for i := range n {
		pb += pos[i]
		nb += neg[i]
		tp[i] += posAbove[i]
		fn[i] += pb
		tn[i] += nb
		fp[i] += negAbove[i]
	}
	return nil
}

// Result is the area under the curve from the confusion counts.
func (m *aucMetric) Result() float64 {
	tp, fn, tn, fp := m.confusion()
	n := len(tp)
	x := make([]float64, n)
	y := make([]float64, n)
	for i := range n {
		rec := (tp[i] + aucEpsilon) / (tp[i] + fn[i] + aucEpsilon)
		if m.curve == PR {
			x[i] = rec
			y[i] = (tp[i] + aucEpsilon) / (tp[i] + fp[i] + aucEpsilon)
		} else {
			x[i] = fp[i] / (fp[i] + tn[i] + aucEpsilon)
			y[i] = rec
		}
	}
	var area float64
	for i := 0; i+1 < n; i++ {
		area += (x[i] - x[i+1]) * (y[i] + y[i+1]) / 2
	}
	return area
}

// checkUnitInterval enforces TF's assertion in _confusion_matrix_at_thresholds
// (tensorflow/python/ops/metrics_impl.py): "predictions must be in [0, 1]".
// NaN fails too.
func checkUnitInterval(kind string, predictions array) error {
	for i, p := range predictions.data {
		if !(p >= 0 && p <= 1) {
			return fmt.Errorf("metrics: %s: predictions must be in [0, 1], element %d of shape %v is %v", kind, i, predictions.shape, p)
		}
	}
	return nil
}
