package model_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/model"
)

func outputNodes(names ...string) map[string]*G.Node {
	g := G.NewGraph()
	out := map[string]*G.Node{}
	for _, n := range names {
		out[n] = G.NewMatrix(g, tensor.Float64, G.WithShape(2, 1), G.WithName(n))
	}
	return out
}

// names maps each output name to its node's name, so different nodes compare
// by identity.
func nodeNames(m map[string]*G.Node) map[string]string {
	out := map[string]string{}
	for k, n := range m {
		out[k] = n.Name()
	}
	return out
}

func TestNodesAndMethod(t *testing.T) {
	n := outputNodes("a", "b", "s", "c", "v")
	tests := []struct {
		name       string
		out        model.ExportOutput
		wantMethod string
		wantNodes  map[string]string
	}{
		{"predict", model.PredictOutput{Outputs: map[string]*G.Node{"x": n["a"], "y": n["b"]}}, "predict", map[string]string{"x": "a", "y": "b"}},
		{"predict empty", model.PredictOutput{}, "predict", map[string]string{}},
		{"classification both", model.ClassificationOutput{Scores: n["s"], Classes: n["c"]}, "classify", map[string]string{"scores": "s", "classes": "c"}},
		{"classification only scores", model.ClassificationOutput{Scores: n["s"]}, "classify", map[string]string{"scores": "s"}},
		{"classification only classes", model.ClassificationOutput{Classes: n["c"]}, "classify", map[string]string{"classes": "c"}},
		{"classification empty", model.ClassificationOutput{}, "classify", map[string]string{}},
		{"regression", model.RegressionOutput{Value: n["v"]}, "regress", map[string]string{"outputs": "v"}},
		{"regression empty", model.RegressionOutput{}, "regress", map[string]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.out.Method(); got != tc.wantMethod {
				t.Errorf("method %q, want %q", got, tc.wantMethod)
			}
			got := tc.out.Nodes()
			if diff := cmp.Diff(tc.wantNodes, nodeNames(got)); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			for k, v := range got {
				if v == nil {
					t.Errorf("output %q is present but nil", k)
				}
			}
		})
	}
}

// TestNodesPointers: the nodes returned are the ones given, not copies.
func TestNodesPointers(t *testing.T) {
	n := outputNodes("s", "c", "v")
	c := model.ClassificationOutput{Scores: n["s"], Classes: n["c"]}.Nodes()
	r := model.RegressionOutput{Value: n["v"]}.Nodes()
	if c["scores"] != n["s"] || c["classes"] != n["c"] || r["outputs"] != n["v"] {
		t.Error("Nodes returned different nodes than given")
	}
}

func TestDescribe(t *testing.T) {
	n := outputNodes("a", "b", "c")
	pred := model.PredictOutput{Outputs: map[string]*G.Node{"y": n["a"], "x": n["b"]}}
	tests := []struct {
		name string
		in   map[string]model.ExportOutput
		want string
	}{
		{"none", nil, ""},
		{"empty", map[string]model.ExportOutput{}, ""},
		{"one regression", map[string]model.ExportOutput{model.DefaultServingSignature: model.RegressionOutput{Value: n["a"]}}, "serving_default=regress[outputs];"},
		{"sorted keys and names", map[string]model.ExportOutput{
			"z":                           pred,
			model.DefaultServingSignature: model.ClassificationOutput{Scores: n["a"], Classes: n["b"]},
			"a":                           model.ClassificationOutput{Scores: n["c"]},
		}, "a=classify[scores];serving_default=classify[classes scores];z=predict[x y];"},
		{"nil output", map[string]model.ExportOutput{"k": nil}, "k=nil;"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := model.DescribeOutputs(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			// Stable: map iteration order varies between calls.
			for range 20 {
				if again := model.DescribeOutputs(tc.in); again != got {
					t.Fatalf("Describe changed from %q to %q", got, again)
				}
			}
		})
	}
}

// TestDescribeIgnoresNodes: two towers build different node objects for the
// same signatures; their descriptions agree.
func TestDescribeIgnoresNodes(t *testing.T) {
	t0, t1 := outputNodes("p", "q"), outputNodes("p", "q")
	a := map[string]model.ExportOutput{"s": model.PredictOutput{Outputs: map[string]*G.Node{"p": t0["p"], "q": t0["q"]}}}
	b := map[string]model.ExportOutput{"s": model.PredictOutput{Outputs: map[string]*G.Node{"q": t1["q"], "p": t1["p"]}}}
	if da, db := model.DescribeOutputs(a), model.DescribeOutputs(b); da != db {
		t.Errorf("same signatures on different graphs: %q vs %q", da, db)
	}
}

func TestDescribeDiffers(t *testing.T) {
	n := outputNodes("a", "b")
	base := map[string]model.ExportOutput{model.DefaultServingSignature: model.ClassificationOutput{Scores: n["a"]}}
	tests := []struct {
		name  string
		other map[string]model.ExportOutput
	}{
		{"no outputs", nil},
		{"other key", map[string]model.ExportOutput{"classify": model.ClassificationOutput{Scores: n["a"]}}},
		{"other method, same names", map[string]model.ExportOutput{model.DefaultServingSignature: model.PredictOutput{Outputs: map[string]*G.Node{"scores": n["a"]}}}},
		{"classes instead of scores", map[string]model.ExportOutput{model.DefaultServingSignature: model.ClassificationOutput{Classes: n["a"]}}},
		{"scores and classes", map[string]model.ExportOutput{model.DefaultServingSignature: model.ClassificationOutput{Scores: n["a"], Classes: n["b"]}}},
		{"extra signature", map[string]model.ExportOutput{model.DefaultServingSignature: model.ClassificationOutput{Scores: n["a"]}, "r": model.RegressionOutput{Value: n["b"]}}},
		{"regression", map[string]model.ExportOutput{model.DefaultServingSignature: model.RegressionOutput{Value: n["a"]}}},
		{"nil output", map[string]model.ExportOutput{model.DefaultServingSignature: nil}},
	}
	want := model.DescribeOutputs(base)
	seen := map[string]string{want: "base"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := model.DescribeOutputs(tc.other)
			if prev, dup := seen[got]; dup {
				t.Errorf("%q describes as %q, like %q", tc.name, got, prev)
			}
			seen[got] = tc.name
		})
	}
}
