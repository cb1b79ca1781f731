package metrics

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// meanIoUMetric is the metric of MeanIoU and NewMeanIoU, its state laid out
// as NewMeanIoU documents.
type meanIoUMetric struct {
	kind       string
	numClasses int
	state      []float64
}

// NewMeanIoU returns a zero tf.metrics.mean_iou over numClasses classes: the
// mean over classes of the intersection over union,
// IoU = true_positive / (true_positive + false_positive + false_negative),
// from a streaming confusion matrix (tensorflow/python/ops/metrics_impl.py,
// mean_iou and _streaming_confusion_matrix).
//
// The state is the numClasses × numClasses confusion matrix in row-major
// order, as TF's total_confusion_matrix: element [l*numClasses + p] is the
// total weight of the examples with label l and prediction p. The Kind is
// "mean_iou(num_classes=N)".
//
// Update takes labels, predictions[, weights]. Labels and predictions are
// class ids of any numeric dtype (or bool, as 0 and 1), flattened, with the
// same number of elements. Every id must be an integer in [0, numClasses):
// TF's confusion_matrix asserts that labels and predictions are
// non-negative and below num_classes, and an id outside that range is an
// Update error naming the value. (TF casts float ids to int64, truncating;
// here a fractional id is an error, since it almost always means scores
// were passed instead of class ids.)
//
// Result follows TF's compute_mean_iou: with the row sums (label weight)
// and column sums (prediction weight) of the matrix and its diagonal,
// denominator[c] = row[c] + col[c] - diag[c]; "the mean is only computed
// over classes that appear in the label or prediction tensor", i.e. classes
// whose denominator is not 0 (with non-negative weights: > 0); a class's
// IoU is diag/denominator where the denominator is > 0 and diag/1
// otherwise; the result is the sum of the IoUs over the number of counted
// classes, and 0 when no class is counted. TF computes it in float32; this
// in float64.
//
// It fails if numClasses is below 1.
func NewMeanIoU(numClasses int) (Metric, error) {
	if err := validNumClasses("NewMeanIoU", numClasses); err != nil {
		return nil, err
	}
	return newMeanIoU(numClasses), nil
}

func validNumClasses(fn string, numClasses int) error {
	if numClasses < 1 {
		return fmt.Errorf("metrics.%s: numClasses must be at least 1, got %d", fn, numClasses)
	}
	// The state is numClasses² sums; refuse sizes that cannot be allocated
	// rather than panic in make.
	if numClasses > 1<<15 {
		return fmt.Errorf("metrics.%s: numClasses %d is too large (a confusion matrix of %d² elements); at most %d", fn, numClasses, numClasses, 1<<15)
	}
	return nil
}

func newMeanIoU(numClasses int) *meanIoUMetric {
	return &meanIoUMetric{
		kind:       fmt.Sprintf("mean_iou(num_classes=%d)", numClasses),
		numClasses: numClasses,
		state:      make([]float64, numClasses*numClasses),
	}
}

// Kind is "mean_iou(num_classes=N)".
func (m *meanIoUMetric) Kind() string { return m.kind }

// State is the confusion matrix, row-major, rows by label.
func (m *meanIoUMetric) State() []float64 { return m.state }

// classID checks that v, element i of the input called name, is an integer
// in [0, n) and returns it.
func classID(kind, name string, a array, i int, n int) (int, error) {
	v := a.data[i]
	if v != math.Trunc(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("metrics: %s: %s element %d of shape %v is %v, not an integer class id", kind, name, i, a.shape, v)
	}
	if v < 0 || v >= float64(n) {
		return 0, fmt.Errorf("metrics: %s: %s element %d of shape %v is %v, outside the class ids [0, %d)", kind, name, i, a.shape, v, n)
	}
	return int(v), nil
}

// Update folds labels, predictions[, weights] in.
func (m *meanIoUMetric) Update(inputs []*tensor.Dense) error {
	labels, predictions, weights, err := labelsAndPredictions(m.kind, inputs)
	if err != nil {
		return err
	}
	n := m.numClasses
	cells := make([]int, len(labels.data))
	for i := range labels.data {
		l, err := classID(m.kind, "labels", labels, i, n)
		if err != nil {
			return err
		}
		p, err := classID(m.kind, "predictions", predictions, i, n)
		if err != nil {
			return err
		}
		cells[i] = l*n + p
	}
	for i, c := range cells {
		m.state[c] += weights[i]
	}
	return nil
}

// classIoU returns each class's intersection over union, and whether the
// class counts towards the mean (its denominator is not 0), as
// compute_mean_iou.
func (m *meanIoUMetric) classIoU() (iou []float64, counted []bool) {
	n := m.numClasses
	iou = make([]float64, n)
	counted = make([]bool, n)
	for c := range n {
		var row, col float64
		for j := range n {
			row += m.state[c*n+j] // weight labelled c
			col += m.state[j*n+c] // weight predicted c
		}
		diag := m.state[c*n+c]
		den := row + col - diag
		counted[c] = den != 0
		if den > 0 {
			iou[c] = diag / den
		} else {
			iou[c] = diag
		}
	}
	return iou, counted
}

// Result is the mean IoU over the counted classes, 0 if there is none.
func (m *meanIoUMetric) Result() float64 {
	iou, counted := m.classIoU()
	var sum, valid float64
	for c, v := range iou {
		sum += v // TF sums every class's IoU, counted or not
		if counted[c] {
			valid++
		}
	}
	if valid <= 0 {
		return 0
	}
	return sum / valid
}

// MeanIoU binds tf.metrics.mean_iou over numClasses classes (see
// NewMeanIoU). Inputs are labels, predictions (class ids) and, with Weights,
// the weights. A nil node, numClasses below 1 or an option other than
// Weights set Bound.Err.
func MeanIoU(labels, predictions *G.Node, numClasses int, opts ...Option) Bound {
	if err := validNumClasses("MeanIoU", numClasses); err != nil {
		return invalid("MeanIoU", err)
	}
	return bind("MeanIoU", func() Metric { return newMeanIoU(numClasses) }, opts, labelsPredictions, labels, predictions)
}
