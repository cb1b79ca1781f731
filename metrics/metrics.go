// Package metrics holds towerflow's streaming evaluation metrics.
//
// A metric is the Go counterpart of a TF1 tf.metrics.* function: where TF
// keeps a metric's running state in local variables (counts, weighted sums,
// confusion counts at thresholds) and increments them with an update op, a
// Metric here keeps the whole of its state as one vector of additive float64
// sums, State, and folds batches in with Update. Because every element of the
// state is a sum, two states of the same Kind combine by element-wise
// addition (Merge), a metric is reset by zeroing (Reset), and the value is a
// pure function of the state (Result). This mirrors TF's own distribution
// strategy, which creates metric variables with
// aggregation=VariableAggregation.SUM and sums the replicas before computing
// the value (metric_variable and _aggregate_across_replicas in
// tensorflow/python/ops/metrics_impl.py).
//
// Its place in towerflow:
//
//   - A model function binds metrics to nodes of its graph, for example
//     metrics.Accuracy(labels, predictions) or metrics.AUC(labels, probs,
//     metrics.Weights(w)). The result is a Bound: the nodes whose values the
//     metric needs (Inputs) and a constructor for a fresh zero-state metric
//     (New).
//   - Metric values are updated in Go, not by graph ops: after each eval step
//     the values computed for Bound.Inputs are handed to Metric.Update (see
//     also Bound.Update and UpdateValues, which read gorgonia values).
//   - Under replication every tower (graph copy) owns its own metric per name
//     and updates it from its shard of the batch. ReduceIntoFirst then adds
//     every replica into tower 0's metric and zeroes the replicas, so tower 0
//     holds the metric over the whole input; Results reads the values.
//
// The metrics, each with a bound constructor taking nodes and an unbound
// New* constructor (TF1 name in parentheses):
//
//	Mean (mean), Accuracy (accuracy)
//	MeanSquaredError (mean_squared_error)
//	RootMeanSquaredError (root_mean_squared_error)
//	MeanAbsoluteError (mean_absolute_error)
//	Precision (precision), Recall (recall)
//	TruePositives, FalsePositives, TrueNegatives, FalseNegatives
//	  (true_positives, false_positives, true_negatives, false_negatives)
//	AUC (auc, ROC or PR, trapezoidal)
//	PrecisionAtThresholds (precision_at_thresholds)
//	RecallAtThresholds (recall_at_thresholds)
//	MeanIoU (mean_iou)
//	RecallAtK (recall_at_k with one label per example)
//
// Every one keeps its state as additive sums, takes optional per-example
// Weights, and computes its value from the state alone.
//
// Errors: bound constructors never panic; a nil node or a bad option sets
// Bound.Err (see Bound). Unbound constructors that take no configuration
// (NewMean, NewPrecision, ...) cannot fail and return a Metric; those that
// do (NewAUC, NewPrecisionAtThresholds, NewRecallAtThresholds, NewMeanIoU,
// NewRecallAtK) return (Metric, error). Bad data (wrong input count, shapes
// that do not match, out-of-range values) is an error from Update, which
// leaves the state unchanged.
//
// Inputs may have any numeric dtype (float32, float64, the int and uint
// types) or bool; they are converted to float64. Labels and predictions must
// have the same number of elements (except for RecallAtK, whose predictions
// hold a score per class). Optional weights are broadcast like TF's
// weights_broadcast_ops.broadcast_weights (after _remove_squeezable_dimensions):
// a scalar, the shape of the predictions, or a prefix of it such as [batch]
// or [batch, 1], broadcast over the trailing dimensions.
package metrics

import (
	"fmt"
	"math"
	"sort"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Metric is a streaming metric.
//
// A Metric is not safe for concurrent use; give every tower its own.
type Metric interface {
	// Kind names the metric and its configuration, e.g. "accuracy", "mean",
	// "auc(curve=ROC,thresholds=200)"; two metrics can be merged only when
	// kinds and state lengths agree.
	Kind() string
	// State is the live state vector; callers may add into it or zero it.
	State() []float64
	// Update folds one batch in. inputs are the values of Bound.Inputs for
	// that batch, in the same order (e.g. labels, predictions, and weights
	// when given). On error the state is left unchanged.
	Update(inputs []*tensor.Dense) error
	// Result computes the value from the state alone.
	Result() float64
}

// Bound is a metric bound to graph nodes of a model function.
//
// Bound constructors (Accuracy, AUC, MeanIoU, ...) never panic on bad
// configuration, which is user input: a nil node or an invalid option
// (NumThresholds below 2, k below 1, numClasses below 1, no thresholds, ...)
// sets Err instead. Such a Bound is still usable without nil checks: New
// returns a metric of Kind "invalid(<constructor>)" with an empty State, a
// NaN Result, and an Update that returns Err; Inputs is nil; and Bound.Update
// returns Err.
//
// The estimator must check Err when it validates a spec (before building any
// metric) and report it as an error naming the tower and the metric, e.g.
// "tower 0: eval metric \"iou\": metrics.MeanIoU: numClasses must be at
// least 1, got 0".
type Bound struct {
	New    func() Metric // a fresh zero-state metric; never nil from this package
	Inputs []*G.Node     // nodes whose values Update receives; nil when Err is set
	Err    error         // the configuration error, if any
}

// Kind is the Kind of the metrics b.New creates.
func (b Bound) Kind() string { return b.New().Kind() }

// Update reads the current values of b.Inputs (after the graph has run) and
// folds them into m, which is normally one that b.New created. It returns
// b.Err when that is set.
func (b Bound) Update(m Metric) error {
	if b.Err != nil {
		return b.Err
	}
	vals := make([]G.Value, len(b.Inputs))
	for i, n := range b.Inputs {
		if n == nil {
			return fmt.Errorf("metrics: %s: input node %d is nil", m.Kind(), i)
		}
		vals[i] = n.Value()
		if vals[i] == nil {
			return fmt.Errorf("metrics: %s: input node %d (%s) has no value; has the graph run?", m.Kind(), i, n.Name())
		}
	}
	return UpdateValues(m, vals)
}

// MultiResult is implemented by metrics whose value is a vector, such as
// PrecisionAtThresholds and RecallAtThresholds (one value per threshold).
// Result() of such a metric is one element of it (documented per metric);
// Results() is all of them, keyed by a suffix such as "threshold_0.5".
//
// The package-level Results reports each suffix of a metric named name as an
// extra entry "name/suffix" (besides "name" itself), so an estimator that
// reports Results gets one number per threshold for free, e.g.
// "precision/threshold_0.5" and "precision/threshold_0.9".
type MultiResult interface {
	Results() map[string]float64
}

// invalidMetric is what Bound.New returns when Bound.Err is set.
type invalidMetric struct {
	kind string
	err  error
}

func (m *invalidMetric) Kind() string                    { return m.kind }
func (m *invalidMetric) State() []float64                { return []float64{} }
func (m *invalidMetric) Update(in []*tensor.Dense) error { return m.err }
func (m *invalidMetric) Result() float64                 { return math.NaN() }

// invalid returns the Bound of constructor fn that failed with err.
func invalid(fn string, err error) Bound {
	kind := "invalid(" + fn + ")"
	return Bound{New: func() Metric { return &invalidMetric{kind: kind, err: err} }, Err: err}
}

// CurveKind selects the curve whose area AUC computes.
type CurveKind int

const (
	// ROC is the receiver operating characteristic: recall (true positive
	// rate) over false positive rate.
	ROC CurveKind = iota
	// PR is the precision-recall curve: precision over recall.
	PR
)

// String returns "ROC" or "PR", the spelling of TF's curve argument.
func (c CurveKind) String() string {
	switch c {
	case ROC:
		return "ROC"
	case PR:
		return "PR"
	}
	return fmt.Sprintf("CurveKind(%d)", int(c))
}

// DefaultNumThresholds is TF's default num_thresholds for tf.metrics.auc.
const DefaultNumThresholds = 200

type options struct {
	weights       *G.Node
	numThresholds int
	curve         CurveKind
}

func makeOptions(opts []Option) options {
	o := options{numThresholds: DefaultNumThresholds, curve: ROC}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// Option configures a metric. Options that do not apply to a metric (such as
// NumThresholds for Mean) are ignored by it.
type Option func(*options)

// Weights sets per-example weights, broadcast like TF: the same shape as the
// predictions (values, for Mean), or [batch] / [batch, 1] broadcast over the
// trailing dimensions, or a scalar. For RecallAtK, whose predictions hold a
// score per class, the weights are per example: [batch], [batch, 1] or a
// scalar. Weights of 0 mask examples. Weights(nil) means no weights.
func Weights(w *G.Node) Option { return func(o *options) { o.weights = w } }

// NumThresholds sets the number of thresholds of AUC (default 200, at least
// 2), as TF's num_thresholds: the two end points 0-1e-7 and 1+1e-7 and
// n-2 points spaced evenly in between.
func NumThresholds(n int) Option { return func(o *options) { o.numThresholds = n } }

// Curve selects the curve of AUC: ROC (default) or PR.
func Curve(c CurveKind) Option { return func(o *options) { o.curve = c } }

// bind makes the Bound of constructor fn (such as "Accuracy") over nodes,
// named by names, plus the weights of o. A nil node sets Err.
func bind(fn string, m func() Metric, o options, names []string, nodes ...*G.Node) Bound {
	for i, n := range nodes {
		if n == nil {
			return invalid(fn, fmt.Errorf("metrics.%s: %s node (input %d) is nil", fn, names[i], i))
		}
	}
	if o.weights != nil {
		nodes = append(nodes, o.weights)
	}
	return Bound{New: m, Inputs: nodes}
}

var (
	labelsPredictions = []string{"labels", "predictions"}
	valuesOnly        = []string{"values"}
)

// Accuracy binds tf.metrics.accuracy: the weighted mean of labels ==
// predictions (see NewAccuracy). Inputs are labels, predictions and, with
// Weights, the weights. A nil node sets Bound.Err.
func Accuracy(labels, predictions *G.Node, opts ...Option) Bound {
	return bind("Accuracy", NewAccuracy, makeOptions(opts), labelsPredictions, labels, predictions)
}

// Mean binds tf.metrics.mean: the weighted mean of values (see NewMean).
// Inputs are values and, with Weights, the weights. A nil node sets
// Bound.Err.
func Mean(values *G.Node, opts ...Option) Bound {
	return bind("Mean", NewMean, makeOptions(opts), valuesOnly, values)
}

// AUC binds tf.metrics.auc with the trapezoidal summation (TF1's default):
// the area under the ROC or PR curve, approximated from confusion counts at
// NumThresholds thresholds (see NewAUC). Inputs are labels (cast to bool),
// predictions (which must lie in [0, 1]) and, with Weights, the weights. A
// nil node or invalid options (see NewAUC) set Bound.Err.
func AUC(labels, predictions *G.Node, opts ...Option) Bound {
	o := makeOptions(opts)
	if err := validAUC("AUC", o); err != nil {
		return invalid("AUC", err)
	}
	return bind("AUC", func() Metric { return newAUC(o) }, o, labelsPredictions, labels, predictions)
}

// Merge adds src's state into dst. It fails, leaving dst unchanged, when the
// kinds or the state lengths differ.
func Merge(dst, src Metric) error {
	if dst == nil || src == nil {
		return fmt.Errorf("metrics: merge: nil metric (dst %v, src %v)", dst == nil, src == nil)
	}
	if dk, sk := dst.Kind(), src.Kind(); dk != sk {
		return fmt.Errorf("metrics: merge: kinds differ: dst %q, src %q", dk, sk)
	}
	d, s := dst.State(), src.State()
	if len(d) != len(s) {
		return fmt.Errorf("metrics: merge %q: state lengths differ: dst %d, src %d", dst.Kind(), len(d), len(s))
	}
	for i, v := range s {
		d[i] += v
	}
	return nil
}

// Reset zeroes m's state.
func Reset(m Metric) {
	clear(m.State())
}

// ReduceIntoFirst adds every replica's metric into tower 0's metric of the
// same name and zeroes the replicas. replicas[i] is tower i's metrics by
// name. Repeating it any number of times gives the same tower-0 state
// (idempotent, since replicas are zeroed).
//
// All towers must hold the same metric names, and each name the same Kind
// and state length, as tower 0; a replica must not share its state with
// tower 0. Otherwise the error names the tower index and the metric name,
// and nothing is modified: every tower is validated before any is added.
func ReduceIntoFirst(replicas []map[string]Metric) error {
	if len(replicas) == 0 {
		return nil
	}
	first := replicas[0]
	names := sortedNames(first)
	for _, name := range names {
		if first[name] == nil {
			return fmt.Errorf("metrics: tower 0: metric %q is nil", name)
		}
	}
	for t := 1; t < len(replicas); t++ {
		rep := replicas[t]
		for _, name := range names {
			m, ok := rep[name]
			if !ok {
				return fmt.Errorf("metrics: tower %d: metric %q is missing (tower 0 has it)", t, name)
			}
			if m == nil {
				return fmt.Errorf("metrics: tower %d: metric %q is nil", t, name)
			}
			want := first[name]
			if k, k0 := m.Kind(), want.Kind(); k != k0 {
				return fmt.Errorf("metrics: tower %d: metric %q has kind %q, tower 0 has %q", t, name, k, k0)
			}
			s, s0 := m.State(), want.State()
			if len(s) != len(s0) {
				return fmt.Errorf("metrics: tower %d: metric %q (%s) has state length %d, tower 0 has %d", t, name, m.Kind(), len(s), len(s0))
			}
			if len(s) > 0 && &s[0] == &s0[0] {
				return fmt.Errorf("metrics: tower %d: metric %q shares its state with tower 0", t, name)
			}
		}
		if len(rep) != len(first) {
			for _, name := range sortedNames(rep) {
				if _, ok := first[name]; !ok {
					return fmt.Errorf("metrics: tower %d: metric %q is extra (tower 0 has no such metric)", t, name)
				}
			}
		}
	}
	for t := 1; t < len(replicas); t++ {
		for _, name := range names {
			dst, src := first[name].State(), replicas[t][name].State()
			for i, v := range src {
				dst[i] += v
			}
			clear(src)
		}
	}
	return nil
}

// Results returns Result() of each metric by name. A metric that implements
// MultiResult adds one more entry per element of its Results(), named
// name + "/" + suffix (e.g. "precision/threshold_0.5"); such an entry never
// replaces the Result of a metric that is itself so named.
func Results(ms map[string]Metric) map[string]float64 {
	out := make(map[string]float64, len(ms))
	for name, m := range ms {
		out[name] = m.Result()
	}
	for name, m := range ms {
		mr, ok := m.(MultiResult)
		if !ok {
			continue
		}
		for suffix, v := range mr.Results() {
			key := name + "/" + suffix
			if _, taken := ms[key]; !taken {
				out[key] = v
			}
		}
	}
	return out
}

// String formats results as "name=value" pairs sorted by name, for logs.
func String(results map[string]float64) string {
	names := make([]string, 0, len(results))
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%g", n, results[n])
	}
	return b.String()
}

func sortedNames(ms map[string]Metric) []string {
	names := make([]string, 0, len(ms))
	for n := range ms {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
