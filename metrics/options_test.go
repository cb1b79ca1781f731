package metrics

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
)

// outcome of passing options to a constructor: the Bound's (or metric's)
// Kind, its number of inputs, and its error.
type optionOutcome struct {
	Kind   string
	Inputs int
	Err    string
}

// boundConstructor is a bound constructor of the package with valid nodes
// and settings, the kind it binds and its number of inputs without weights.
type boundConstructor struct {
	name   string
	kind   string
	inputs int
	bind   func(...Option) Bound
}

func boundConstructors(l, p *G.Node) []boundConstructor {
	return []boundConstructor{
		{"Accuracy", "accuracy", 2, func(o ...Option) Bound { return Accuracy(l, p, o...) }},
		{"Mean", "mean", 1, func(o ...Option) Bound { return Mean(p, o...) }},
		{"AUC", "auc(curve=ROC,thresholds=200)", 2, func(o ...Option) Bound { return AUC(l, p, o...) }},
		{"MeanSquaredError", "mean_squared_error", 2, func(o ...Option) Bound { return MeanSquaredError(l, p, o...) }},
		{"RootMeanSquaredError", "root_mean_squared_error", 2, func(o ...Option) Bound { return RootMeanSquaredError(l, p, o...) }},
		{"MeanAbsoluteError", "mean_absolute_error", 2, func(o ...Option) Bound { return MeanAbsoluteError(l, p, o...) }},
		{"Precision", "precision", 2, func(o ...Option) Bound { return Precision(l, p, o...) }},
		{"Recall", "recall", 2, func(o ...Option) Bound { return Recall(l, p, o...) }},
		{"TruePositives", "true_positives", 2, func(o ...Option) Bound { return TruePositives(l, p, o...) }},
		{"FalsePositives", "false_positives", 2, func(o ...Option) Bound { return FalsePositives(l, p, o...) }},
		{"TrueNegatives", "true_negatives", 2, func(o ...Option) Bound { return TrueNegatives(l, p, o...) }},
		{"FalseNegatives", "false_negatives", 2, func(o ...Option) Bound { return FalseNegatives(l, p, o...) }},
		{"PrecisionAtThresholds", "precision_at_thresholds(0.5)", 2, func(o ...Option) Bound {
			return PrecisionAtThresholds(l, p, []float64{0.5}, o...)
		}},
		{"RecallAtThresholds", "recall_at_thresholds(0.5)", 2, func(o ...Option) Bound {
			return RecallAtThresholds(l, p, []float64{0.5}, o...)
		}},
		{"MeanIoU", "mean_iou(num_classes=3)", 2, func(o ...Option) Bound { return MeanIoU(l, p, 3, o...) }},
		{"RecallAtK", "recall_at_k(k=2)", 2, func(o ...Option) Bound { return RecallAtK(l, p, 2, o...) }},
	}
}

// TestOptionsApply passes each option, alone, to every constructor that
// takes options: Weights applies to every bound constructor, NumThresholds
// and Curve to AUC and NewAUC only; any other pairing is an error naming the
// option and the constructor, and gives an invalid Bound (or no metric).
func TestOptionsApply(t *testing.T) {
	v := vectors(4, "labels", "preds", "w")
	labels, preds, w := v[0], v[1], v[2]
	// Each option with what it does where it applies: the kind it gives
	// AUC ("" leaves the kind alone) and the inputs it adds.
	opts := []struct {
		name    string
		opt     Option
		aucKind string
		inputs  int
	}{
		{"Weights", Weights(w), "", 1},
		{"NumThresholds", NumThresholds(10), "auc(curve=ROC,thresholds=10)", 0},
		{"Curve", Curve(PR), "auc(curve=PR,thresholds=200)", 0},
	}
	// The valid pairs; every other pair is an error.
	applies := func(constructor, option string) bool {
		switch constructor {
		case "AUC":
			return true
		case "NewAUC":
			return option != "Weights"
		}
		return option == "Weights"
	}
	outcome := func(kind string, inputs int, err error) optionOutcome {
		o := optionOutcome{Kind: kind, Inputs: inputs}
		if err != nil {
			o.Err = err.Error()
		}
		return o
	}

	want := map[string]optionOutcome{}
	got := map[string]optionOutcome{}
	for _, c := range boundConstructors(labels, preds) {
		for _, o := range opts {
			key := c.name + "+" + o.name
			switch {
			case !applies(c.name, o.name):
				want[key] = optionOutcome{
					Kind: "invalid(" + c.name + ")",
					Err:  fmt.Sprintf("metrics.%s: option %s does not apply to %s", c.name, o.name, c.name),
				}
			case o.aucKind != "":
				want[key] = optionOutcome{Kind: o.aucKind, Inputs: c.inputs + o.inputs}
			default:
				want[key] = optionOutcome{Kind: c.kind, Inputs: c.inputs + o.inputs}
			}
			b := c.bind(o.opt)
			got[key] = outcome(b.Kind(), len(b.Inputs), b.Err)
		}
	}
	for _, o := range opts {
		key := "NewAUC+" + o.name
		if applies("NewAUC", o.name) {
			want[key] = optionOutcome{Kind: o.aucKind}
		} else {
			want[key] = optionOutcome{Err: "metrics.NewAUC: option " + o.name + " does not apply to NewAUC"}
		}
		m, err := NewAUC(o.opt)
		kind := ""
		if m != nil {
			kind = m.Kind()
		}
		got[key] = outcome(kind, 0, err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("constructor+option outcomes (-want +got):\n%s", d)
	}
}

// TestOptionsOrder checks the rules around the applicability check: the
// first inapplicable option in call order is the one named, applicability
// is checked before values, the zero Option is no option, and an
// inapplicable option spoils a Bound whose nodes are fine.
func TestOptionsOrder(t *testing.T) {
	x := vectors(2, "x")[0]
	tests := []struct {
		name string
		b    Bound
		want optionOutcome
	}{
		{
			"first inapplicable named", Mean(x, Weights(x), Curve(PR), NumThresholds(3)),
			optionOutcome{Kind: "invalid(Mean)", Err: "metrics.Mean: option Curve does not apply to Mean"},
		},
		{
			"applicability before value", Accuracy(x, x, NumThresholds(1)),
			optionOutcome{Kind: "invalid(Accuracy)", Err: "metrics.Accuracy: option NumThresholds does not apply to Accuracy"},
		},
		{
			"inapplicable before nil node", Precision(nil, x, Curve(ROC)),
			optionOutcome{Kind: "invalid(Precision)", Err: "metrics.Precision: option Curve does not apply to Precision"},
		},
		{
			"AUC value after applicability", AUC(x, x, NumThresholds(1)),
			optionOutcome{Kind: "invalid(AUC)", Err: "metrics.AUC: NumThresholds must be at least 2, got 1"},
		},
		{"zero Option", Mean(x, Option{}), optionOutcome{Kind: "mean", Inputs: 1}},
		{
			"later option wins", AUC(x, x, NumThresholds(3), NumThresholds(4), Weights(nil)),
			optionOutcome{Kind: "auc(curve=ROC,thresholds=4)", Inputs: 2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := optionOutcome{Kind: tc.b.Kind(), Inputs: len(tc.b.Inputs)}
			if tc.b.Err != nil {
				got.Err = tc.b.Err.Error()
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
