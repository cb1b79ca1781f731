package serving

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/sharding"
)

// echoServable answers classify and regress from the features it was
// handed, after checking that they are what the signature takes (a
// mismatch fails the Run, which the server answers with 500): regress's
// "outputs" are x, classify's "scores" x and 1−x (as float32); a value
// that is not finite (in float32 for the scores) is answered as 0, which
// JSON can hold. It keeps the last x it saw.
type echoServable struct {
	sigs map[string]export.Signature
	mu   sync.Mutex
	x    []float64
}

func newEchoServable() *echoServable {
	x := export.TensorInfo{Dtype: "float64", Shape: []int{-1, 1}}
	classify := export.Signature{Method: "classify", Inputs: map[string]export.TensorInfo{"x": x},
		Outputs: map[string]export.TensorInfo{"scores": {Dtype: "float32", Shape: []int{-1, 2}}}}
	return &echoServable{sigs: map[string]export.Signature{
		"serving_default": classify,
		"classify":        classify,
		"regress": {Method: "regress", Inputs: map[string]export.TensorInfo{
			"x": x, "flag": {Dtype: "bool", Shape: []int{-1}}, "ids": {Dtype: "int64", Shape: []int{-1, 2}}, "u": {Dtype: "uint8", Shape: []int{-1}},
		}, Outputs: map[string]export.TensorInfo{"outputs": x}},
		"regress_bag": {Method: "regress", Inputs: map[string]export.TensorInfo{
			"x": x, "bag": {Dtype: "int64", Shape: []int{-1, 3}, Sparse: true},
		}, Outputs: map[string]export.TensorInfo{"outputs": x}},
	}}
}

// RunSparse checks the sparse inputs (checkSparse) and runs the dense
// ones.
func (e *echoServable) RunSparse(ctx context.Context, name string, features map[string]*tensor.Dense, sparse map[string]sharding.SparseCOO) (map[string]*tensor.Dense, error) {
	sig, ok := e.sigs[name]
	if !ok {
		return nil, fmt.Errorf("%w: signature %q", errMalformed, name)
	}
	dense, err := checkSparse(sig, features, sparse)
	if err != nil {
		return nil, err
	}
	one := &echoServable{sigs: map[string]export.Signature{name: {Method: sig.Method, Inputs: dense, Outputs: sig.Outputs}}}
	out, err := one.Run(ctx, name, features)
	e.mu.Lock()
	e.x = one.x
	e.mu.Unlock()
	return out, err
}

func (e *echoServable) Version() int64                          { return 1 }
func (e *echoServable) Signatures() map[string]export.Signature { return e.sigs }
func (e *echoServable) Close() error                            { return nil }

func (e *echoServable) Run(_ context.Context, name string, features map[string]*tensor.Dense) (map[string]*tensor.Dense, error) {
	sig, ok := e.sigs[name]
	if !ok || len(features) != len(sig.Inputs) {
		return nil, fmt.Errorf("%w: signature %q, %d inputs", errMalformed, name, len(features))
	}
	rows := -1
	for in, ti := range sig.Inputs {
		t := features[in]
		if t == nil || t.Dtype() != servedDtypes[ti.Dtype].dt {
			return nil, fmt.Errorf("%w: input %q is %v", errMalformed, in, t)
		}
		shape := t.Shape()
		if len(shape) != len(ti.Shape) || !slices.Equal(shape[1:], tensor.Shape(ti.Shape[1:])) || shape[0] < 1 || (rows >= 0 && shape[0] != rows) ||
			shape.TotalSize() != reflectLen(t.Data()) {
			return nil, fmt.Errorf("%w: input %q has shape %v, want %v", errMalformed, in, shape, ti.Shape)
		}
		rows = shape[0]
	}
	x := slices.Clone(features["x"].Data().([]float64))
	e.mu.Lock()
	e.x = x
	e.mu.Unlock()
	if sig.Method == "regress" {
		out := make([]float64, rows)
		for i, v := range x {
			if !math.IsInf(v, 0) && !math.IsNaN(v) {
				out[i] = v
			}
		}
		return map[string]*tensor.Dense{"outputs": tensor.New(tensor.WithShape(rows, 1), tensor.WithBacking(out))}, nil
	}
	scores := make([]float32, 2*rows)
	for i, v := range x {
		scores[2*i], scores[2*i+1] = finite32(v), finite32(1-v)
	}
	return map[string]*tensor.Dense{"scores": tensor.New(tensor.WithShape(rows, 2), tensor.WithBacking(scores))}, nil
}

// finite32 is v as a float32, or 0 where that is not finite.
func finite32(v float64) float32 {
	f := float32(v)
	if math.IsInf(float64(f), 0) || math.IsNaN(float64(f)) {
		return 0
	}
	return f
}

// lastX returns the x of the last Run, and forgets it.
func (e *echoServable) lastX() []float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.x
	e.x = nil
	return x
}

// FuzzClassifyRegress sends fuzzed classify and regress requests (in
// TensorFlow Serving's format: "signature_name", "context", "examples")
// through the server's handler: the server never fails (5xx), never hands
// Run features its signature does not take, always answers a JSON object,
// {"error": message} or {"results": [...]}, and its results are one per
// example Run was handed: regress's the value of that example's x,
// classify's two [label, score] pairs with x's scores. Seeds are the
// request the mnist example writes, and TensorFlow Serving's examples.
//
//	go test -run '^$' -fuzz '^FuzzClassifyRegress$' -fuzztime 60s -fuzzminimizetime 1s ./serving
func FuzzClassifyRegress(f *testing.F) {
	seeds := []string{
		`{"examples": [{"x": [0.25]}, {"x": [0.5]}]}`,
		`{"signature_name": "classify", "examples": [{"x": 0.25}, {"x": 1e300}]}`,
		`{"signature_name": "classify", "context": {"x": 0.75}, "examples": [{}, {}]}`,
		`{"signature_name": "regress", "examples": [{"x": 1, "flag": true, "ids": [1, 2], "u": 255}]}`,
		`{"signature_name": "regress", "context": {"flag": false, "u": 0}, "examples": [{"x": -2.5, "ids": [[3], [4]]}, {"x": [7], "ids": [5, 6]}]}`,
		`{"signature_name": "regress", "examples": [{"x": NaN, "flag": 1, "ids": [1, 2], "u": 1}]}`,
		`{"examples": [{"x": "a"}]}`, `{"examples": []}`, `{"examples": {}}`, `{"context": [], "examples": [{}]}`,
		`{"examples": [{"x": 1}], "examples": [{"x": 2}, {"x": 3}]}`,
		`{"signature_name": "regress_bag", "examples": [{"x": 1, "bag": [1, 2, 3]}, {"x": 2, "bag": []}, {"x": 3, "bag": 7}]}`,
		`{"signature_name": "regress_bag", "context": {"bag": [4, 4]}, "examples": [{"x": 1}, {"x": 2}]}`,
		`{"signature_name": "regress_bag", "examples": [{"x": 1, "bag": [1, 2, 3, 4]}, {"x": 2, "bag": [[1]]}, {"x": 3, "bag": [1.5]}]}`,
		`{"signature_name": "regress_bag", "examples": [{"x": 0, "bag": []}]}`,
	}
	// The request the mnist example writes with -serve, for an input x.
	req, err := json.Marshal(map[string]any{"examples": []map[string][]float32{{"x": {0.5}}, {"x": {0}}}})
	if err != nil {
		f.Fatal(err)
	}
	seeds = append(seeds, string(req))
	for _, s := range seeds {
		for method := range uint8(2) {
			f.Add(method, []byte(s))
		}
	}
	echo := newEchoServable()
	srv, err := NewServer([]ModelConfig{{
		Name: "m",
		Loader: func(current int64) (Servable, error) {
			if current == 0 {
				return echo, nil
			}
			return nil, nil
		},
	}}, Config{MaxBodyBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	f.Fuzz(func(t *testing.T, method uint8, body []byte) {
		path := "/v1/models/m:classify"
		if method%2 == 1 {
			path = "/v1/models/m:regress"
		}
		echo.lastX()
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest("POST", path, bytes.NewReader(body)))
		answer := w.Body.Bytes()
		if w.Code >= 500 {
			t.Fatalf("POST %s %q: status %d: %s", path, body, w.Code, answer)
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(answer, &doc); err != nil {
			t.Fatalf("POST %s %q: status %d, not a JSON object: %s", path, body, w.Code, answer)
		}
		if w.Code != http.StatusOK {
			if _, ok := doc["error"]; !ok || len(doc) != 1 {
				t.Fatalf("POST %s %q: status %d: %s, want {\"error\": ...}", path, body, w.Code, answer)
			}
			return
		}
		x := echo.lastX()
		if len(doc) != 1 || doc["results"] == nil || x == nil {
			t.Fatalf("POST %s %q: status 200: %s, want {\"results\": ...} from a Run", path, body, answer)
		}
		if method%2 == 1 {
			var results []float64
			if err := json.Unmarshal(doc["results"], &results); err != nil {
				t.Fatalf("POST %s %q: results %s: %v", path, body, doc["results"], err)
			}
			want := make([]float64, len(x))
			for i, v := range x {
				if !math.IsInf(v, 0) && !math.IsNaN(v) {
					want[i] = v
				}
			}
			if !slices.Equal(results, want) {
				t.Fatalf("POST %s %q: results %v, want the examples' x %v", path, body, results, want)
			}
			return
		}
		var results [][][2]any
		if err := json.Unmarshal(doc["results"], &results); err != nil {
			t.Fatalf("POST %s %q: results %s: %v", path, body, doc["results"], err)
		}
		if len(results) != len(x) {
			t.Fatalf("POST %s %q: %d results for %d examples", path, body, len(results), len(x))
		}
		for i, r := range results {
			if len(r) != 2 {
				t.Fatalf("POST %s %q: result %d is %v, want two classes", path, body, i, r)
			}
			for j, want := range []float32{finite32(x[i]), finite32(1 - x[i])} {
				label, isString := r[j][0].(string)
				score, isNumber := r[j][1].(float64)
				if !isString || label != "" || !isNumber || float32(score) != want {
					t.Fatalf("POST %s %q: result %d class %d is %v, want [\"\", %v]", path, body, i, j, r[j], want)
				}
			}
		}
	})
}
