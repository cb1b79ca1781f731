package metrics

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Bound is a metric bound to graph nodes of a model function.
//
// Bound constructors (Accuracy, AUC, MeanIoU, ...) never panic on bad
// configuration, which is user input: a nil node, an invalid setting
// (NumThresholds below 2, k below 1, numClasses below 1, no thresholds, ...)
// or an option that does not apply to the metric (NumThresholds for Mean)
// sets Err instead. Such a Bound is still usable without nil checks: New
// returns a metric of Kind "invalid(<constructor>)" with an empty State, a
// NaN Result, and an Update that returns Err; Inputs is nil; and
// Bound.Update returns Err.
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

// Names of the input nodes of bound constructors, for the nil-node error.
var (
	labelsPredictions = []string{"labels", "predictions"}
	valuesOnly        = []string{"values"}
)

// bind makes the Bound of constructor fn (such as "Accuracy"), whose only
// option is Weights, over nodes named by names. An option other than
// Weights or a nil node sets Err.
func bind(fn string, newMetric func() Metric, opts []Option, names []string, nodes ...*G.Node) Bound {
	o, err := makeOptions(fn, optWeights, opts)
	if err != nil {
		return invalid(fn, err)
	}
	return bindNodes(fn, newMetric, o, names, nodes...)
}

// bindNodes makes the Bound of constructor fn over nodes, named by names,
// plus the weights of o. A nil node sets Err.
func bindNodes(fn string, newMetric func() Metric, o options, names []string, nodes ...*G.Node) Bound {
	for i, n := range nodes {
		if n == nil {
			return invalid(fn, fmt.Errorf("metrics.%s: %s node (input %d) is nil", fn, names[i], i))
		}
	}
	if o.weights != nil {
		nodes = append(nodes, o.weights)
	}
	return Bound{New: newMetric, Inputs: nodes}
}
