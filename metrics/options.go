package metrics

import (
	"fmt"

	G "gorgonia.org/gorgonia"
)

// Option is the one option type of the package: an optional setting of a
// bound constructor (Accuracy, AUC, ...) or of NewAUC. Weights applies to
// every bound constructor; NumThresholds and Curve apply to AUC and NewAUC
// only. Passing an option that does not apply is an error, e.g.
// Mean(v, NumThresholds(10)) gives a Bound whose Err is
// "metrics.Mean: option NumThresholds does not apply to Mean", and
// NewAUC(Weights(w)) fails likewise. The zero Option sets nothing.
type Option struct {
	kind optionKind     // one bit; a constructor accepts a set of them
	name string         // the function that made it, for errors
	set  func(*options) // nil in the zero Option
}

// optionKind is an option's bit in the set of options a constructor
// accepts.
type optionKind uint8

const (
	optWeights optionKind = 1 << iota
	optNumThresholds
	optCurve
)

// Weights sets per-example weights, broadcast like TF: the same shape as the
// predictions (values, for Mean), or [batch] / [batch, 1] broadcast over the
// trailing dimensions, or a scalar. For RecallAtK, whose predictions hold a
// score per class, the weights are per example: [batch], [batch, 1] or a
// scalar. Weights of 0 mask examples. Weights(nil) means no weights.
//
// It applies to every bound constructor, which adds w to Bound.Inputs. A
// metric made by a New* constructor takes its weights as the last input of
// Update instead, so NewAUC(Weights(w)) is an error.
func Weights(w *G.Node) Option {
	return Option{optWeights, "Weights", func(o *options) { o.weights = w }}
}

// NumThresholds sets the number of thresholds of AUC and NewAUC (default
// 200, at least 2), as TF's num_thresholds: the two end points 0-1e-7 and
// 1+1e-7 and n-2 points spaced evenly in between.
func NumThresholds(n int) Option {
	return Option{optNumThresholds, "NumThresholds", func(o *options) { o.numThresholds = n }}
}

// Curve selects the curve of AUC and NewAUC: ROC (default) or PR.
func Curve(c CurveKind) Option {
	return Option{optCurve, "Curve", func(o *options) { o.curve = c }}
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

// options is what the options of one call set, over the defaults.
type options struct {
	weights       *G.Node
	numThresholds int
	curve         CurveKind
}

// makeOptions applies opts, in order, over the defaults. fn names the
// constructor for the error; accepts is the set of options that apply to
// it. The first option outside that set is an error.
func makeOptions(fn string, accepts optionKind, opts []Option) (options, error) {
	o := options{numThresholds: DefaultNumThresholds, curve: ROC}
	for _, opt := range opts {
		if opt.set == nil {
			continue
		}
		if accepts&opt.kind == 0 {
			return options{}, fmt.Errorf("metrics.%s: option %s does not apply to %s", fn, opt.name, fn)
		}
		opt.set(&o)
	}
	return o, nil
}
