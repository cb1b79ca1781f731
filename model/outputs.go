package model

// Export outputs: the named tensors a model function offers to a serving
// client under a signature key (TensorFlow's ExportOutput). A model function
// returns them in its Spec; in predict mode the Estimator computes them, and
// under replication each output is concatenated along dimension 0 in tower
// order. Package export writes them into export directories and serves them.

import (
	"fmt"
	"sort"

	G "gorgonia.org/gorgonia"
)

// DefaultServingSignature is the signature key a server uses when a request names
// none, as in TensorFlow Serving.
const DefaultServingSignature = "serving_default"

// ExportOutput is one signature's outputs: named graph nodes, each with the batch
// along dimension 0.
type ExportOutput interface {
	// Method names the signature's method: "predict", "classify" or "regress".
	Method() string
	// Nodes returns the output's tensors by name; absent parts are left out.
	Nodes() map[string]*G.Node
}

// PredictOutput is a signature of arbitrary named outputs.
type PredictOutput struct {
	Outputs map[string]*G.Node
}

// Method returns "predict".
func (PredictOutput) Method() string { return "predict" }

// Nodes returns the outputs.
func (p PredictOutput) Nodes() map[string]*G.Node { return p.Outputs }

// ClassificationOutput is a classifier's signature: per-class scores and/or class
// labels; either may be nil and is then absent.
type ClassificationOutput struct {
	Scores  *G.Node
	Classes *G.Node
	// ClassNames names the classes, as TensorFlow's string classes tensor
	// does (gorgonia has no string tensors): without Classes, column j of
	// Scores (shape [batch, len(ClassNames)]) is class ClassNames[j]; with
	// Classes, which then holds integer class indexes, index i is class
	// ClassNames[i]. An export keeps them in its signature, and a server
	// answers classify requests with them as the labels.
	ClassNames []string
}

// Method returns "classify".
func (ClassificationOutput) Method() string { return "classify" }

// Nodes returns "scores" and "classes", whichever are set.
func (c ClassificationOutput) Nodes() map[string]*G.Node {
	out := map[string]*G.Node{}
	if c.Scores != nil {
		out["scores"] = c.Scores
	}
	if c.Classes != nil {
		out["classes"] = c.Classes
	}
	return out
}

// RegressionOutput is a regressor's signature: one value per example.
type RegressionOutput struct {
	Value *G.Node
}

// Method returns "regress".
func (RegressionOutput) Method() string { return "regress" }

// Nodes returns "outputs", TensorFlow's name for a regression value.
func (r RegressionOutput) Nodes() map[string]*G.Node {
	if r.Value == nil {
		return map[string]*G.Node{}
	}
	return map[string]*G.Node{"outputs": r.Value}
}

// DescribeOutputs returns a stable description of a set of outputs: signature
// keys, methods and output names, used to check that every tower exported
// the same signatures.
func DescribeOutputs(outputs map[string]ExportOutput) string {
	keys := make([]string, 0, len(outputs))
	for k := range outputs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ""
	for _, k := range keys {
		o := outputs[k]
		if o == nil {
			s += fmt.Sprintf("%s=nil;", k)
			continue
		}
		names := make([]string, 0)
		for n := range o.Nodes() {
			names = append(names, n)
		}
		sort.Strings(names)
		s += fmt.Sprintf("%s=%s%v;", k, o.Method(), names)
	}
	return s
}
