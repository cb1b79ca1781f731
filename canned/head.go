package canned

import (
	"fmt"
	"math"
	"strconv"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
)

// DefaultLabelKey is the key of the label in a batch's labels when a head
// names none.
const DefaultLabelKey = "label"

// Signature keys of the heads' export outputs besides
// model.DefaultServingSignature, as TensorFlow's heads name them.
const (
	ClassifySignature = "classification"
	RegressSignature  = "regression"
	PredictSignature  = "predict"
)

// Prediction keys, as TensorFlow's PredictionKeys.
const (
	LogitsKey        = "logits"
	LogisticKey      = "logistic"
	ProbabilitiesKey = "probabilities"
	ClassIDsKey      = "class_ids"
	ClassesKey       = "classes"
	AllClassIDsKey   = "all_class_ids"
	AllClassesKey    = "all_classes"
	PredictionsKey   = "predictions"
)

// Eval metric keys, as TensorFlow's MetricKeys. The loss itself is the
// estimator's "loss".
const (
	AccuracyKey         = "accuracy"
	AccuracyBaselineKey = "accuracy_baseline"
	AUCKey              = "auc"
	AUCPRKey            = "auc_precision_recall"
	AverageLossKey      = "average_loss"
	LabelMeanKey        = "label/mean"
	PredictionMeanKey   = "prediction/mean"
	PrecisionKey        = "precision"
	RecallKey           = "recall"
	// RMSEKey and MAEKey are a regressor's root mean squared error and
	// mean absolute error (over every label element, weighted): towerflow's
	// additions to TensorFlow's regression metrics.
	RMSEKey = "rmse"
	MAEKey  = "mae"
)

// A Head turns a model's logits into what a model function returns: in
// Train and Eval mode the loss of the logits against the labels (TensorFlow's
// SUM_OVER_BATCH_SIZE reduction: the sum of the examples' weighted losses over
// the number of loss elements, so that N towers train as one device), in
// Eval mode its eval metrics, in Predict mode its predictions and export
// signatures. It is tf.estimator's Head; BinaryHead, MultiClassHead and
// RegressionHead are TensorFlow's three.
type Head interface {
	// LogitsDimension is the number of logits per example the head
	// takes: 1 for a binary classifier, n for n classes, the label
	// dimension for a regressor.
	LogitsDimension() int
	// Spec returns the spec of mode for logits of shape (batch,
	// LogitsDimension()) (float32 or float64), reading the labels from
	// labels and any example weights from features. It sets no train ops.
	// In Train mode it returns the loss alone: predictions and metrics
	// would be computed, and thrown away, every step.
	Spec(mode model.Mode, logits *G.Node, features model.Features, labels model.Labels) (*model.Spec, error)
	// ClassNames names the classes, by class id (nil for a regressor):
	// the label vocabulary, or the ids as decimal strings. The predictions
	// "classes" and "all_classes" hold class ids (gorgonia has no
	// strings); ClassNames[id] is the class TensorFlow's string tensor
	// would hold.
	ClassNames() []string
	// Label returns the label settings: its key, its example-weight
	// feature and its vocabulary, which a parser of raw records needs.
	Label() LabelSpec
}

// LabelSpec is where a head finds its labels and weights, and what a parser
// of raw records must turn them into.
type LabelSpec struct {
	// Key is the label's key in the batch's labels.
	Key string
	// WeightColumn is the label, or else feature, of per-example
	// weights; "" for none.
	WeightColumn string
	// Vocabulary, for a classifier, lists the classes a raw label string
	// may name; its index is the class id the head reads. Nil when labels
	// are class ids already (or for a regressor).
	Vocabulary []string
	// Dimension is the number of label values per example: 1 for a
	// classifier, the label dimension for a regressor.
	Dimension int
	// Classes is the number of classes (0 for a regressor).
	Classes int
}

// ClassID returns the class id of the raw label value s: its index in
// the vocabulary, or, without one, s parsed as an integer in [0,
// Classes). Anything else is an error naming s.
func (l LabelSpec) ClassID(s string) (int64, error) {
	if l.Classes == 0 {
		return 0, fmt.Errorf("label %q: a regressor's label has no classes", l.Key)
	}
	if l.Vocabulary != nil {
		for i, v := range l.Vocabulary {
			if v == s {
				return int64(i), nil
			}
		}
		return 0, fmt.Errorf("label %q: value %q is not in the label vocabulary %q", l.Key, s, l.Vocabulary)
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 0 || id >= int64(l.Classes) {
		return 0, fmt.Errorf("label %q: value %q is not a class id in [0, %d)", l.Key, s, l.Classes)
	}
	return id, nil
}

// BinaryHead is TensorFlow's BinaryClassHead: one logit per example,
// sigmoid cross-entropy loss. Labels are numbers in [0, 1] of shape (batch)
// or (batch, 1), any numeric dtype; with LabelVocabulary, class ids 0
// (LabelVocabulary[0], the negative class) and 1 (the positive class),
// which LabelSpec.ClassID gives for raw strings.
//
// Predictions: logits (batch, 1); logistic, the sigmoid of the logit
// (batch, 1); probabilities (batch, 2); class_ids (batch, 1, int64: 1 when
// the logit is positive); classes (batch, 1, int64 class ids: see
// Head.ClassNames); all_class_ids and all_classes (batch, 2, int64).
//
// Eval metrics: accuracy, precision and recall of class_ids; auc and
// auc_precision_recall of logistic (200 thresholds, trapezoidal); average_loss
// (the weighted mean of the examples' losses); label/mean; prediction/mean
// (of logistic); accuracy_baseline (max(label/mean, 1 − label/mean)).
//
// Export signatures: serving_default and "classification" classify
// (scores: probabilities, the classes named by ClassNames), "regression"
// regresses (logistic), "predict" answers every prediction.
type BinaryHead struct {
	// LabelKey is the label's key in the batch; "" means DefaultLabelKey.
	LabelKey string
	// WeightColumn names the example weights, of shape (batch) or (batch,
	// 1), non-negative: a label of that name (where a columns.Transformer
	// parses them) or else a feature (as TensorFlow's weight_column); ""
	// weighs every example 1. Predict mode reads no weights.
	WeightColumn string
	// LabelVocabulary, when set, names the negative and positive class (two
	// distinct strings).
	LabelVocabulary []string
}

// MultiClassHead is TensorFlow's MultiClassHead: NClasses logits per
// example, softmax cross-entropy loss. Labels are class ids in [0,
// NClasses) of shape (batch) or (batch, 1), any numeric dtype; with
// LabelVocabulary, the index of the class's name (LabelSpec.ClassID).
//
// Predictions: logits and probabilities (batch, NClasses); class_ids and
// classes (batch, 1, int64); all_class_ids and all_classes (batch,
// NClasses, int64).
//
// Eval metrics: accuracy (of class_ids) and average_loss.
//
// Export signatures: serving_default and "classification" classify
// (scores: probabilities, the classes named by ClassNames), "predict"
// answers every prediction.
type MultiClassHead struct {
	// NClasses is the number of classes, at least 3 (a binary problem
	// takes a BinaryHead, as TensorFlow requires).
	NClasses int
	// LabelKey is the label's key in the batch; "" means DefaultLabelKey.
	LabelKey string
	// WeightColumn names the example weights, as BinaryHead's.
	WeightColumn string
	// LabelVocabulary, when set, names the NClasses classes (distinct
	// strings).
	LabelVocabulary []string
}

// RegressionHead is TensorFlow's RegressionHead: LabelDimension values per
// example, squared-error loss. Labels have shape (batch, LabelDimension)
// (or (batch) for one value), any numeric dtype.
//
// Predictions: predictions (batch, LabelDimension), the logits.
//
// Eval metrics: average_loss (the weighted mean squared error per
// element), label/mean, prediction/mean; and, beyond TensorFlow's, rmse
// and mae.
//
// Export signatures: with one label value, serving_default and
// "regression" regress; "predict" answers the predictions (and is the
// default with several label values, which a regress signature cannot
// carry).
type RegressionHead struct {
	// LabelDimension is the number of values per example; 0 means 1.
	LabelDimension int
	// LabelKey is the label's key in the batch; "" means DefaultLabelKey.
	LabelKey string
	// WeightColumn names the example weights, as BinaryHead's.
	WeightColumn string
}

func labelKey(k string) string {
	if k == "" {
		return DefaultLabelKey
	}
	return k
}

// LogitsDimension returns 1.
func (h BinaryHead) LogitsDimension() int { return 1 }

// LogitsDimension returns NClasses.
func (h MultiClassHead) LogitsDimension() int { return h.NClasses }

// LogitsDimension returns the label dimension.
func (h RegressionHead) LogitsDimension() int { return max(h.LabelDimension, 1) }

// ClassNames returns the label vocabulary, or "0" and "1".
func (h BinaryHead) ClassNames() []string { return classNames(h.LabelVocabulary, 2) }

// ClassNames returns the label vocabulary, or the class ids as strings.
func (h MultiClassHead) ClassNames() []string { return classNames(h.LabelVocabulary, h.NClasses) }

// ClassNames returns nil: a regressor has no classes.
func (h RegressionHead) ClassNames() []string { return nil }

func classNames(vocab []string, n int) []string {
	if vocab != nil {
		return append([]string(nil), vocab...)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}

// Label returns the head's label settings.
func (h BinaryHead) Label() LabelSpec {
	return LabelSpec{Key: labelKey(h.LabelKey), WeightColumn: h.WeightColumn, Vocabulary: h.LabelVocabulary, Dimension: 1, Classes: 2}
}

// Label returns the head's label settings.
func (h MultiClassHead) Label() LabelSpec {
	return LabelSpec{Key: labelKey(h.LabelKey), WeightColumn: h.WeightColumn, Vocabulary: h.LabelVocabulary, Dimension: 1, Classes: h.NClasses}
}

// Label returns the head's label settings.
func (h RegressionHead) Label() LabelSpec {
	return LabelSpec{Key: labelKey(h.LabelKey), WeightColumn: h.WeightColumn, Dimension: h.LogitsDimension()}
}

// Check reports whether the head's settings are valid.
func (h BinaryHead) Check() error {
	return checkVocabulary("BinaryHead", h.LabelVocabulary, 2)
}

// Check reports whether the head's settings are valid.
func (h MultiClassHead) Check() error {
	if h.NClasses < 3 {
		return fmt.Errorf("canned.MultiClassHead: NClasses %d, want at least 3 (two classes take a BinaryHead)", h.NClasses)
	}
	return checkVocabulary("MultiClassHead", h.LabelVocabulary, h.NClasses)
}

// Check reports whether the head's settings are valid.
func (h RegressionHead) Check() error {
	if h.LabelDimension < 0 {
		return fmt.Errorf("canned.RegressionHead: LabelDimension %d, want a positive number (0 means 1)", h.LabelDimension)
	}
	return nil
}

func checkVocabulary(head string, vocab []string, n int) error {
	if vocab == nil {
		return nil
	}
	if len(vocab) != n {
		return fmt.Errorf("canned.%s: label vocabulary %q has %d entries, want %d", head, vocab, len(vocab), n)
	}
	seen := map[string]bool{}
	for _, v := range vocab {
		if seen[v] {
			return fmt.Errorf("canned.%s: label vocabulary %q lists %q twice", head, vocab, v)
		}
		seen[v] = true
	}
	return nil
}

// headParts are what one head makes of its inputs; headSpec takes the
// steps every head takes with them.
type headParts struct {
	// loss is the labels as the metrics read them and the loss (Train and
	// Eval).
	loss func(in inputs) (y, loss *G.Node, err error)
	// outputs are the predictions and the export signatures (Eval and
	// Predict).
	outputs func() (map[string]*G.Node, map[string]model.ExportOutput, error)
	// kind is the per-example loss that average_loss averages; metrics
	// the other eval metrics.
	kind    lossKind
	metrics func(y *G.Node, p map[string]*G.Node, w []metrics.Option) map[string]metrics.Bound
}

// headSpec makes a head's spec in mode: the loss in Train and Eval (only
// it in Train), the predictions and export signatures in Eval and
// Predict, the eval metrics with average_loss in Eval. check is the
// head's Check.
func headSpec(where string, check error, l LabelSpec, mode model.Mode, logits *G.Node, features model.Features, labels model.Labels, parts headParts) (*model.Spec, error) {
	if check != nil {
		return nil, check
	}
	in, err := headInputs(where, l, mode, logits, features, labels)
	if err != nil {
		return nil, err
	}
	spec := &model.Spec{}
	var y *G.Node
	if mode != model.Predict {
		if y, spec.Loss, err = parts.loss(in); err != nil {
			return nil, err
		}
		if mode == model.Train {
			return spec, nil
		}
	}
	if spec.Predictions, spec.ExportOutputs, err = parts.outputs(); err != nil {
		return nil, err
	}
	if mode != model.Eval {
		return spec, nil
	}
	losses, err := exampleLosses(where, parts.kind, logits, y)
	if err != nil {
		return nil, err
	}
	spec.EvalMetrics = parts.metrics(y, spec.Predictions, in.metricOpts)
	spec.EvalMetrics[AverageLossKey] = metrics.Mean(losses, in.metricOpts...)
	return spec, nil
}

// lossOf is a head's loss function's result, its error named by where.
func lossOf(where string, y, loss *G.Node, err error) (*G.Node, *G.Node, error) {
	if err != nil {
		return nil, nil, fmt.Errorf("%s: loss: %w", where, err)
	}
	return y, loss, nil
}

// Spec returns the binary head's spec (see Head).
func (h BinaryHead) Spec(mode model.Mode, logits *G.Node, features model.Features, labels model.Labels) (*model.Spec, error) {
	const where = "canned.BinaryHead"
	return headSpec(where, h.Check(), h.Label(), mode, logits, features, labels, headParts{
		loss: func(in inputs) (*G.Node, *G.Node, error) {
			// Labels as the logits: (batch, 1) of their dtype, in [0, 1].
			y, err := convert(where, "labels", in.labels, logits.Dtype(), 1, unitInterval)
			if err != nil {
				return nil, nil, err
			}
			loss, err := layers.SigmoidCrossEntropy(logits, y, in.lossOpts...)
			return lossOf(where, y, loss, err)
		},
		outputs: func() (map[string]*G.Node, map[string]model.ExportOutput, error) {
			p, err := binaryPredictions(where, logits)
			if err != nil {
				return nil, nil, err
			}
			out := classifierExports(p, h.ClassNames())
			out[RegressSignature] = model.RegressionOutput{Value: p[LogisticKey]}
			return p, out, nil
		},
		kind: sigmoidLoss,
		metrics: func(y *G.Node, p map[string]*G.Node, w []metrics.Option) map[string]metrics.Bound {
			return map[string]metrics.Bound{
				AccuracyKey:         metrics.Accuracy(y, p[ClassIDsKey], w...),
				PrecisionKey:        metrics.Precision(y, p[ClassIDsKey], w...),
				RecallKey:           metrics.Recall(y, p[ClassIDsKey], w...),
				AUCKey:              metrics.AUC(y, p[LogisticKey], append(w, metrics.Curve(metrics.ROC))...),
				AUCPRKey:            metrics.AUC(y, p[LogisticKey], append(w, metrics.Curve(metrics.PR))...),
				LabelMeanKey:        metrics.Mean(y, w...),
				PredictionMeanKey:   metrics.Mean(p[LogisticKey], w...),
				AccuracyBaselineKey: metrics.AccuracyBaseline(y, w...),
			}
		},
	})
}

// Spec returns the multi-class head's spec (see Head).
func (h MultiClassHead) Spec(mode model.Mode, logits *G.Node, features model.Features, labels model.Labels) (*model.Spec, error) {
	const where = "canned.MultiClassHead"
	return headSpec(where, h.Check(), h.Label(), mode, logits, features, labels, headParts{
		loss: func(in inputs) (*G.Node, *G.Node, error) {
			// Class ids, (batch, 1) in the logits' dtype, checked against
			// NClasses; the loss takes them as (batch).
			y, err := convert(where, "labels", in.labels, logits.Dtype(), 1, classIDs(h.NClasses))
			if err != nil {
				return nil, nil, err
			}
			ids, err := layers.Reshape(y, tensor.Shape{y.Shape()[0]})
			if err != nil {
				return nil, nil, fmt.Errorf("%s: labels: %w", where, err)
			}
			loss, err := layers.SparseSoftmaxCrossEntropy(logits, ids, in.lossOpts...)
			return lossOf(where, y, loss, err)
		},
		outputs: func() (map[string]*G.Node, map[string]model.ExportOutput, error) {
			p, err := multiClassPredictions(where, logits)
			if err != nil {
				return nil, nil, err
			}
			return p, classifierExports(p, h.ClassNames()), nil
		},
		kind: softmaxLoss,
		metrics: func(y *G.Node, p map[string]*G.Node, w []metrics.Option) map[string]metrics.Bound {
			return map[string]metrics.Bound{AccuracyKey: metrics.Accuracy(y, p[ClassIDsKey], w...)}
		},
	})
}

// classifierExports returns a classifier's signatures over its
// predictions p: classify (also the default) with the probabilities as
// scores of classNames, and predict with every prediction.
func classifierExports(p map[string]*G.Node, classNames []string) map[string]model.ExportOutput {
	classify := model.ClassificationOutput{Scores: p[ProbabilitiesKey], ClassNames: classNames}
	return map[string]model.ExportOutput{
		model.DefaultServingSignature: classify,
		ClassifySignature:             classify,
		PredictSignature:              model.PredictOutput{Outputs: p},
	}
}

// Spec returns the regression head's spec (see Head).
func (h RegressionHead) Spec(mode model.Mode, logits *G.Node, features model.Features, labels model.Labels) (*model.Spec, error) {
	const where = "canned.RegressionHead"
	d := h.LogitsDimension()
	return headSpec(where, h.Check(), h.Label(), mode, logits, features, labels, headParts{
		loss: func(in inputs) (*G.Node, *G.Node, error) {
			y, err := convert(where, "labels", in.labels, logits.Dtype(), d, nil)
			if err != nil {
				return nil, nil, err
			}
			loss, err := squaredError(logits, y, in.weights)
			return lossOf(where, y, loss, err)
		},
		outputs: func() (map[string]*G.Node, map[string]model.ExportOutput, error) {
			p := map[string]*G.Node{PredictionsKey: logits}
			predict := model.PredictOutput{Outputs: p}
			out := map[string]model.ExportOutput{
				model.DefaultServingSignature: predict,
				PredictSignature:              predict,
			}
			if d == 1 {
				regress := model.RegressionOutput{Value: logits}
				out[model.DefaultServingSignature] = regress
				out[RegressSignature] = regress
			}
			return p, out, nil
		},
		kind: squaredLoss,
		metrics: func(y *G.Node, p map[string]*G.Node, w []metrics.Option) map[string]metrics.Bound {
			return map[string]metrics.Bound{
				LabelMeanKey:      metrics.Mean(y, w...),
				PredictionMeanKey: metrics.Mean(logits, w...),
				RMSEKey:           metrics.RootMeanSquaredError(y, logits, w...),
				MAEKey:            metrics.MeanAbsoluteError(y, logits, w...),
			}
		},
	})
}

// inputs are a head's checked inputs.
type inputs struct {
	labels *G.Node // nil in Predict mode
	// weights are the example weights, (batch) in the logits' dtype; nil
	// without a weight column.
	weights    *G.Node
	lossOpts   []layers.LossOption
	metricOpts []metrics.Option
}

// headInputs checks the logits against the head's dimension and finds the
// labels (outside Predict mode) and the example weights.
func headInputs(where string, l LabelSpec, mode model.Mode, logits *G.Node, features model.Features, labels model.Labels) (inputs, error) {
	var in inputs
	if logits == nil {
		return in, fmt.Errorf("%s: nil logits", where)
	}
	if dt := logits.Dtype(); dt != tensor.Float32 && dt != tensor.Float64 {
		return in, fmt.Errorf("%s: logits %s have dtype %v, want float32 or float64", where, logits.Name(), dt)
	}
	if s := logits.Shape(); len(s) != 2 || s[1] != l.dimension() {
		return in, fmt.Errorf("%s: logits %s have shape %v, want (batch, %d)", where, logits.Name(), s, l.dimension())
	}
	if mode != model.Predict {
		y, err := labels.Lookup(l.Key)
		if err != nil {
			return in, fmt.Errorf("%s: %w (the head's LabelKey names the label: \"\" is %q; a columns.Transformer parses it when made from TransformerConfig)", where, err, DefaultLabelKey)
		}
		in.labels = y
	}
	if l.WeightColumn != "" && mode != model.Predict {
		w := labels[l.WeightColumn]
		if w == nil {
			var err error
			if w, err = features.Lookup(l.WeightColumn); err != nil {
				return in, fmt.Errorf("%s: weight column (neither a label nor a feature): %w", where, err)
			}
		}
		var err error
		if w, err = convert(where, fmt.Sprintf("weight column %q", l.WeightColumn), w, logits.Dtype(), 1, nonNegative); err != nil {
			return in, err
		}
		if in.weights, err = layers.Reshape(w, tensor.Shape{w.Shape()[0]}); err != nil {
			return in, fmt.Errorf("%s: weight column %q: %w", where, l.WeightColumn, err)
		}
		in.lossOpts = []layers.LossOption{layers.ExampleWeights(in.weights)}
		in.metricOpts = []metrics.Option{metrics.Weights(in.weights)}
	}
	return in, nil
}

// dimension is the logits per example of a head with these labels.
func (l LabelSpec) dimension() int {
	if l.Classes > 2 {
		return l.Classes
	}
	return l.Dimension
}

// A valueCheck returns an error for a value a label or weight may not have.
type valueCheck func(v float64) error

func unitInterval(v float64) error {
	if !(v >= 0 && v <= 1) {
		return fmt.Errorf("%v is not in [0, 1]", v)
	}
	return nil
}

func nonNegative(v float64) error {
	if !(v >= 0) || math.IsInf(v, 1) {
		return fmt.Errorf("%v is not a finite non-negative weight", v)
	}
	return nil
}

func classIDs(n int) valueCheck {
	return func(v float64) error {
		if !(v >= 0 && v < float64(n)) || v != math.Trunc(v) {
			return fmt.Errorf("%v is not a class id in [0, %d)", v, n)
		}
		return nil
	}
}

// convert returns x, whose rows hold width values each ((batch) or (batch,
// width), any numeric dtype), as (batch, width) of dtype dt, checking every
// value with check (nil: none); what names x in errors, which name the
// example.
func convert(where, what string, x *G.Node, dt tensor.Dtype, width int, check valueCheck) (*G.Node, error) {
	s := x.Shape()
	if len(s) == 0 || s.TotalSize() != s[0]*width {
		return nil, fmt.Errorf("%s: %s %s have shape %v, want (batch, %d)", where, what, x.Name(), s, width)
	}
	name := fmt.Sprintf("%s: %s", where, what)
	if check != nil {
		// The check's identity is in the name: the heads use one check
		// per what.
		name += " (checked)"
	}
	op := &rowOp{name: name, arity: 1, dtype: dt, cols: width, fn: func(i int, in [][]float64, out []float64) error {
		for j, v := range in[0] {
			if check != nil {
				if err := check(v); err != nil {
					return fmt.Errorf("example %d: %w", i, err)
				}
			}
			out[j] = v
		}
		return nil
	}}
	return op.apply(x)
}

// squaredError is the SUM_OVER_BATCH_SIZE reduction of the squared errors
// of pred and labels, each example's weighted by weights (nil: 1).
func squaredError(pred, labels, weights *G.Node) (*G.Node, error) {
	if weights == nil {
		return layers.MeanSquaredError(pred, labels)
	}
	diff, err := G.Sub(pred, labels)
	if err != nil {
		return nil, err
	}
	sq, err := G.Square(diff)
	if err != nil {
		return nil, err
	}
	w, err := layers.Reshape(weights, tensor.Shape{weights.Shape()[0], 1})
	if err != nil {
		return nil, err
	}
	weighted, err := G.BroadcastHadamardProd(sq, w, nil, []byte{1})
	if err != nil {
		return nil, err
	}
	return G.Mean(weighted)
}

// A lossKind is the per-example loss of a head.
type lossKind int

const (
	sigmoidLoss lossKind = iota
	softmaxLoss
	squaredLoss
)

func (k lossKind) String() string {
	return [...]string{"sigmoid cross-entropy", "softmax cross-entropy", "squared error"}[k]
}

// exampleLosses returns the unreduced loss of each example (TensorFlow's
// unweighted_loss): (batch, 1) for the classifiers, (batch, d) for a
// regressor, in the logits' dtype, for average_loss.
func exampleLosses(where string, k lossKind, logits, labels *G.Node) (*G.Node, error) {
	cols := 1
	if k == squaredLoss {
		cols = logits.Shape()[1]
	}
	op := &rowOp{name: fmt.Sprintf("%s: %v per example", where, k), arity: 2, dtype: logits.Dtype(), cols: cols,
		fn: func(_ int, in [][]float64, out []float64) error {
			x, z := in[0], in[1]
			switch k {
			case sigmoidLoss:
				out[0] = max(x[0], 0) - x[0]*z[0] + math.Log1p(math.Exp(-math.Abs(x[0])))
			case softmaxLoss:
				m := math.Inf(-1)
				for _, v := range x {
					m = max(m, v)
				}
				var sum float64
				for _, v := range x {
					sum += math.Exp(v - m)
				}
				out[0] = m + math.Log(sum) - x[int(z[0])]
			case squaredLoss:
				for j := range out {
					out[j] = (x[j] - z[j]) * (x[j] - z[j])
				}
			}
			return nil
		}}
	return op.apply(logits, labels)
}

// allClassIDs returns (batch, n) int64 rows 0, 1, …, n−1 (all_class_ids).
func allClassIDs(where string, logits *G.Node, n int) (*G.Node, error) {
	op := &rowOp{name: fmt.Sprintf("%s: all class ids of %d", where, n), arity: 1, dtype: tensor.Int64, cols: n,
		fn: func(_ int, _ [][]float64, out []float64) error {
			for j := range out {
				out[j] = float64(j)
			}
			return nil
		}}
	return op.apply(logits)
}

// argMax returns the class id of each row's largest logit, (batch, 1)
// int64; of equal logits the first wins, as tf.argmax. positive, for one
// logit, is TensorFlow's argmax over (0, logit): 1 when the logit is
// positive.
func argMax(where string, logits *G.Node) (*G.Node, error) {
	op := &rowOp{name: where + ": class ids", arity: 1, dtype: tensor.Int64, cols: 1,
		fn: func(_ int, in [][]float64, out []float64) error {
			x := in[0]
			if len(x) == 1 {
				out[0] = 0
				if x[0] > 0 {
					out[0] = 1
				}
				return nil
			}
			best := 0
			for j, v := range x {
				if v > x[best] {
					best = j
				}
			}
			out[0] = float64(best)
			return nil
		}}
	return op.apply(logits)
}

// binaryProbabilities returns the softmax of (0, logit) per row: (1 − p,
// p) for p the sigmoid of the logit, (batch, 2).
func binaryProbabilities(where string, logits *G.Node) (*G.Node, error) {
	op := &rowOp{name: where + ": probabilities", arity: 1, dtype: logits.Dtype(), cols: 2,
		fn: func(_ int, in [][]float64, out []float64) error {
			p := sigmoid(in[0][0])
			out[0], out[1] = 1-p, p
			return nil
		}}
	return op.apply(logits)
}

// logistic returns the sigmoid of each logit.
func logistic(where string, logits *G.Node) (*G.Node, error) {
	op := &rowOp{name: where + ": logistic", arity: 1, dtype: logits.Dtype(), cols: 1,
		fn: func(_ int, in [][]float64, out []float64) error {
			out[0] = sigmoid(in[0][0])
			return nil
		}}
	return op.apply(logits)
}

// sigmoid is 1/(1+e^−x), computed without overflow.
func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

func binaryPredictions(where string, logits *G.Node) (map[string]*G.Node, error) {
	p := map[string]*G.Node{LogitsKey: logits}
	var err error
	if p[LogisticKey], err = logistic(where, logits); err != nil {
		return nil, err
	}
	if p[ProbabilitiesKey], err = binaryProbabilities(where, logits); err != nil {
		return nil, err
	}
	if p[ClassIDsKey], err = argMax(where, logits); err != nil {
		return nil, err
	}
	p[ClassesKey] = p[ClassIDsKey]
	if p[AllClassIDsKey], err = allClassIDs(where, logits, 2); err != nil {
		return nil, err
	}
	p[AllClassesKey] = p[AllClassIDsKey]
	return p, nil
}

func multiClassPredictions(where string, logits *G.Node) (map[string]*G.Node, error) {
	p := map[string]*G.Node{LogitsKey: logits}
	var err error
	if p[ProbabilitiesKey], err = layers.Softmax(logits); err != nil {
		return nil, fmt.Errorf("%s: probabilities: %w", where, err)
	}
	if p[ClassIDsKey], err = argMax(where, logits); err != nil {
		return nil, err
	}
	p[ClassesKey] = p[ClassIDsKey]
	if p[AllClassIDsKey], err = allClassIDs(where, logits, logits.Shape()[1]); err != nil {
		return nil, err
	}
	p[AllClassesKey] = p[AllClassIDsKey]
	return p, nil
}
