// Package export describes what a model serves: its export outputs, the
// named tensors a model function offers to a serving client under a
// signature key (TensorFlow's ExportOutput). A model function returns them in
// its Spec; in predict mode the Estimator computes them, and under
// replication each output is concatenated along dimension 0 in tower order.
//
// Writing an export directory, loading it and serving it over HTTP build on
// these types.
package export

import (
	"fmt"
	"sort"

	G "gorgonia.org/gorgonia"
)

// DefaultSignature is the signature key a server uses when a request names
// none, as in TensorFlow Serving.
const DefaultSignature = "serving_default"

// Output is one signature's outputs: named graph nodes, each with the batch
// along dimension 0.
type Output interface {
	// Method names the signature's method: "predict", "classify" or "regress".
	Method() string
	// Nodes returns the output's tensors by name; absent parts are left out.
	Nodes() map[string]*G.Node
}

// Predict is a signature of arbitrary named outputs.
type Predict struct {
	Outputs map[string]*G.Node
}

// Method returns "predict".
func (Predict) Method() string { return "predict" }

// Nodes returns the outputs.
func (p Predict) Nodes() map[string]*G.Node { return p.Outputs }

// Classification is a classifier's signature: per-class scores and/or class
// labels; either may be nil and is then absent.
type Classification struct {
	Scores  *G.Node
	Classes *G.Node
}

// Method returns "classify".
func (Classification) Method() string { return "classify" }

// Nodes returns "scores" and "classes", whichever are set.
func (c Classification) Nodes() map[string]*G.Node {
	out := map[string]*G.Node{}
	if c.Scores != nil {
		out["scores"] = c.Scores
	}
	if c.Classes != nil {
		out["classes"] = c.Classes
	}
	return out
}

// Regression is a regressor's signature: one value per example.
type Regression struct {
	Value *G.Node
}

// Method returns "regress".
func (Regression) Method() string { return "regress" }

// Nodes returns "outputs", TensorFlow's name for a regression value.
func (r Regression) Nodes() map[string]*G.Node {
	if r.Value == nil {
		return map[string]*G.Node{}
	}
	return map[string]*G.Node{"outputs": r.Value}
}

// Describe returns a stable description of a set of outputs: signature
// keys, methods and output names, used to check that every tower exported
// the same signatures.
func Describe(outputs map[string]Output) string {
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
