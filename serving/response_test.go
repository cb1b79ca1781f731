package serving

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"
)

// TestServerOutputs covers how outputs become JSON, and the outputs a
// server cannot answer with (its own failure: 500).
func TestServerOutputs(t *testing.T) {
	outs := func(kv ...any) func(int) map[string]*tensor.Dense {
		return func(int) map[string]*tensor.Dense {
			m := map[string]*tensor.Dense{}
			for i := 0; i < len(kv); i += 2 {
				m[kv[i].(string)] = kv[i+1].(*tensor.Dense)
			}
			return m
		}
	}
	two := []int{2}
	tests := []struct {
		name, method, verb, body string
		out                      func(int) map[string]*tensor.Dense
		code                     int
		want                     string // the body, or a substring of the error
	}{
		{"integer and byte outputs, rows", "predict", "predict", `{"instances": [[1], [2]]}`,
			outs("i", dense(two, int32(-3), 4), "u", dense([]int{2, 2}, uint8(0), 1, 254, 255)), 200,
			`{"predictions":[{"i":-3,"u":[0,1]},{"i":4,"u":[254,255]}]}`},
		{"float32 output, columns", "predict", "predict", `{"inputs": [[1], [2]]}`,
			outs("f", dense(two, float32(0.1), 1e-7)), 200, `{"outputs":[0.1,1e-07]}`},
		{"float labels, no scores", "classify", "classify", `{"examples": [{"x": 1}, {"x": 2}]}`,
			outs("classes", dense(two, 1.5, 2)), 200, `{"results":[[["1.5",0.0]],[["2",0.0]]]}`},
		{"one score per example", "classify", "classify", `{"examples": [{"x": 1}, {"x": 2}]}`,
			outs("scores", dense(two, 0.25, 0.5)), 200, `{"results":[[["",0.25]],[["",0.5]]]}`},
		{"float32 regression of one output by another name", "regress", "regress", `{"examples": [{"x": 1}, {"x": 2}]}`,
			outs("y", dense(two, float32(0.1), 3)), 200, `{"results":[0.1,3.0]}`},
		{"wrong rows", "predict", "predict", `{"instances": [[1], [2]]}`, outs("y", dense([]int{3}, 1.0, 2, 3)), 500,
			`output "y" has shape [3], want 2 rows along dimension 0`},
		{"no outputs", "predict", "predict", `{"instances": [[1], [2]]}`, outs(), 500, "the servable returned no outputs"},
		{"nil output", "predict", "predict", `{"instances": [[1], [2]]}`, outs("y", (*tensor.Dense)(nil)), 500, `output "y" is nil`},
		{"classify without scores and classes", "classify", "classify", `{"examples": [{"x": 1}, {"x": 2}]}`,
			outs("y", dense(two, 1.0, 2)), 500, `has neither a "scores" nor a "classes" output`},
		{"classify scores of rank 3", "classify", "classify", `{"examples": [{"x": 1}, {"x": 2}]}`,
			outs("scores", dense([]int{2, 1, 1}, 1.0, 2)), 500, `classify output "scores" has shape [2 1 1]`},
		{"classify classes of rank 3", "classify", "classify", `{"examples": [{"x": 1}, {"x": 2}]}`,
			outs("classes", dense([]int{2, 1, 1}, 1.0, 2)), 500, `classify output "classes" has shape [2 1 1]`},
		{"classify scores and classes disagree", "classify", "classify", `{"examples": [{"x": 1}, {"x": 2}]}`,
			outs("scores", dense(two, 1.0, 2), "classes", dense([]int{2, 2}, 1, 2, 3, 4)), 500, "have 1 and 2 classes"},
		{"classify boolean scores", "classify", "classify", `{"examples": [{"x": 1}, {"x": 2}]}`,
			outs("scores", dense(two, true, false)), 500, `"scores" has dtype bool, want a number`},
		{"regress without outputs", "regress", "regress", `{"examples": [{"x": 1}, {"x": 2}]}`,
			outs("a", dense(two, 1.0, 2), "b", dense(two, 1.0, 2)), 500, `the regress signature has no "outputs" output (it has ["a" "b"])`},
		{"regress two values per example", "regress", "regress", `{"examples": [{"x": 1}, {"x": 2}]}`,
			outs("outputs", dense([]int{2, 2}, 1.0, 2, 3, 4)), 500, "regress output has shape [2 2]"},
		{"regress booleans", "regress", "regress", `{"examples": [{"x": 1}, {"x": 2}]}`,
			outs("outputs", dense(two, true, false)), 500, "regress output has dtype bool, want a number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(&stubServable{method: tc.method, out: tc.out})}}, Config{})
			res := do(t, hs, "POST", "/v1/models/m:"+tc.verb, tc.body)
			if res.code != tc.code {
				t.Fatalf("status %d, want %d: %s", res.code, tc.code, res.body)
			}
			if tc.code == 200 {
				if diff := cmp.Diff(tc.want, res.body); diff != "" {
					t.Errorf("body (-want +got):\n%s", diff)
				}
			} else if msg := errorOf(t, res.body); !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not contain %q", msg, tc.want)
			}
		})
	}
}
