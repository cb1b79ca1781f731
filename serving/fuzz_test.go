package serving

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/sharding"
)

// checkingServable has the signatures of the fake servable and answers
// every Run with outputs of the signature's dtypes and shapes (zeros, and
// class indexes within the class names), after checking that the
// features are what the signature takes: an input missing or unknown, a
// wrong dtype, shape or row count fails the Run with errMalformed, which
// the server answers with 500.
type checkingServable struct{ sigs map[string]export.Signature }

// errMalformed is the failure of a Run handed features its signature does
// not take.
var errMalformed = fmt.Errorf("the server decoded features the signature does not take")

func (c *checkingServable) Version() int64                          { return 1 }
func (c *checkingServable) Signatures() map[string]export.Signature { return c.sigs }
func (c *checkingServable) Close() error                            { return nil }

func (c *checkingServable) Run(_ context.Context, name string, features map[string]*tensor.Dense) (map[string]*tensor.Dense, error) {
	sig, ok := c.sigs[name]
	if !ok || len(features) != len(sig.Inputs) {
		return nil, fmt.Errorf("%w: signature %q, inputs %q", errMalformed, name, slices.Sorted(maps.Keys(features)))
	}
	rows := -1
	for in, ti := range sig.Inputs {
		t := features[in]
		if t == nil || t.Dtype() != servedDtypes[ti.Dtype].dt {
			return nil, fmt.Errorf("%w: input %q is %v", errMalformed, in, t)
		}
		shape := t.Shape()
		if len(shape) != len(ti.Shape) || !slices.Equal(shape[1:], tensor.Shape(ti.Shape[1:])) || shape[0] < 1 || (rows >= 0 && shape[0] != rows) ||
			t.Shape().TotalSize() != reflectLen(t.Data()) {
			return nil, fmt.Errorf("%w: input %q has shape %v, want %v", errMalformed, in, shape, ti.Shape)
		}
		rows = shape[0]
	}
	outs := map[string]*tensor.Dense{}
	for out, ti := range sig.Outputs {
		shape := append([]int{rows}, ti.Shape[1:]...)
		t := tensor.New(tensor.WithShape(shape...), tensor.Of(servedDtypes[ti.Dtype].dt))
		if out == "classes" && len(sig.ClassNames) > 0 {
			t = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(make([]int64, tensor.Shape(shape).TotalSize())))
		}
		outs[out] = t
	}
	return outs, nil
}

// RunSparse checks the sparse inputs (checkSparse) and runs the dense
// ones.
func (c *checkingServable) RunSparse(ctx context.Context, name string, features map[string]*tensor.Dense, sparse map[string]sharding.SparseCOO) (map[string]*tensor.Dense, error) {
	sig, ok := c.sigs[name]
	if !ok {
		return nil, fmt.Errorf("%w: signature %q", errMalformed, name)
	}
	dense, err := checkSparse(sig, features, sparse)
	if err != nil {
		return nil, err
	}
	one := &checkingServable{sigs: map[string]export.Signature{name: {Method: sig.Method, Inputs: dense, Outputs: sig.Outputs, ClassNames: sig.ClassNames}}}
	return one.Run(ctx, name, features)
}

// checkSparse checks a request's sparse inputs as the servables' Run
// checks the dense ones: each a valid sharding.SparseCOO of the input's
// dtype and dense shape [rows of "x", most values], the values of row r at
// [r, 0], [r, 1], ... in order. It returns the signature's dense inputs.
func checkSparse(sig export.Signature, features map[string]*tensor.Dense, sparse map[string]sharding.SparseCOO) (map[string]export.TensorInfo, error) {
	if len(features)+len(sparse) != len(sig.Inputs) || features["x"] == nil {
		return nil, fmt.Errorf("%w: inputs %q and sparse %q", errMalformed, slices.Sorted(maps.Keys(features)), slices.Sorted(maps.Keys(sparse)))
	}
	dense := map[string]export.TensorInfo{}
	for in, ti := range sig.Inputs {
		if !ti.Sparse {
			dense[in] = ti
			continue
		}
		s, ok := sparse[in]
		if !ok || s.Validate() != nil || s.Values.Dtype() != servedDtypes[ti.Dtype].dt || len(s.DenseShape) != 2 || s.DenseShape[1] != ti.Shape[1] ||
			s.DenseShape[0] != features["x"].Shape()[0] || s.Values.DataSize() != len(s.Indices) {
			return nil, fmt.Errorf("%w: sparse input %q is %+v", errMalformed, in, s)
		}
		for i, idx := range s.Indices {
			newRow := i == 0 || idx[0] != s.Indices[i-1][0]
			if (i > 0 && idx[0] < s.Indices[i-1][0]) || (newRow && idx[1] != 0) || (!newRow && idx[1] != s.Indices[i-1][1]+1) {
				return nil, fmt.Errorf("%w: sparse input %q: entry %d has index %v, after %v", errMalformed, in, i, idx, s.Indices[max(i-1, 0)])
			}
		}
	}
	return dense, nil
}

func reflectLen(data any) int {
	switch d := data.(type) {
	case []float32:
		return len(d)
	case []float64:
		return len(d)
	case []int64:
		return len(d)
	case []int32:
		return len(d)
	case []uint8:
		return len(d)
	case []bool:
		return len(d)
	}
	return -1
}

// withBag adds to sigs the predict signature "bag": "x" as "serving_default"
// takes it, and "bag", a sparse input of at most 3 int64 values per example.
func withBag(sigs map[string]export.Signature) map[string]export.Signature {
	x := sigs["serving_default"].Inputs["x"]
	sigs["bag"] = export.Signature{Method: "predict", Inputs: map[string]export.TensorInfo{"x": x, "bag": {Dtype: "int64", Shape: []int{-1, 3}, Sparse: true}},
		Outputs: sigs["serving_default"].Outputs}
	return sigs
}

// fuzzPaths are the routes a fuzzed request goes to.
var fuzzPaths = []string{
	"/v1/models/m:predict", "/v1/models/m:classify", "/v1/models/m:regress",
	"/v1/models/m/versions/1:predict", "/v1/models/m/labels/stable:classify", "/v1/models/m/labels/nope:regress",
}

// FuzzServeRequest sends fuzzed request bodies through the server's
// handler, to a predict, classify or regress route, as they are or
// gzipped: the server never fails (5xx), never hands Run features its
// signature does not take, and always answers JSON: {"error": message}
// or the method's answer.
//
//	go test -run '^$' -fuzz FuzzServeRequest -fuzztime 60s ./serving
func FuzzServeRequest(f *testing.F) {
	seeds := []string{
		`{"instances": [[1.0], [2.5]]}`,
		`{"inputs": {"x": [[1]]}}`,
		`{"signature_name": "multi", "instances": [{"a": [1.5, 2], "b": 3, "k": -1, "u": 255, "ok": true}]}`,
		`{"signature_name": "multi", "inputs": {"a": [[1.5, 2]], "b": [3], "k": [-1], "u": [255], "ok": [true]}}`,
		`{"signature_name": "classify", "examples": [{"x": 0.25}, {"x": [0.5]}]}`,
		`{"signature_name": "classify_names", "context": {"x": 0.25}, "examples": [{}]}`,
		`{"signature_name": "classify_index", "examples": [{"x": 1}]}`,
		`{"signature_name": "regress", "examples": [{"x": 1}]}`,
		`{"signature_name": "regress_flags", "context": {"u": true}, "examples": [{"flag": 1, "n": [true, 2], "f": false}]}`,
		`{"instances": [[NaN], [Infinity], [-Infinity], [1e400], [9007199254740993]]}`,
		`{"instances": [["a"], [null], [{"b64": "AA=="}], [[1]]]}`,
		`{"instances": [[1]], "instances": [[2]], "signature_name": "\u0073erving_default"}`,
		`[1]`, `{`, `{"instances": [[01]]}`, "",
		`{"signature_name": "bag", "instances": [{"x": [1], "bag": [3, 17, 17]}, {"x": [2], "bag": []}]}`,
		`{"signature_name": "bag", "inputs": {"x": [[1], [2]], "bag": [[3], [4, 5, 6]]}}`,
		`{"signature_name": "bag", "instances": [{"x": [1], "bag": [[3]]}, {"x": [2], "bag": [1.5, "a", null]}, {"x": [3], "bag": 4}]}`,
		`{"signature_name": "bag", "inputs": {"x": [[1]], "bag": [[1, 2, 3, 4]]}}`,
	}
	for _, s := range seeds {
		for route := range len(fuzzPaths) {
			f.Add(uint8(route), uint8(0), []byte(s))
		}
		f.Add(uint8(0), uint8(1), []byte(s))
	}
	srv, err := NewServer([]ModelConfig{{
		Name:        "m",
		Loader:      fixed(&checkingServable{withBag(newFake(1, 1).sigs)}),
		LoadVersion: func(int64) (Servable, error) { return nil, nil },
		Labels:      map[string]int64{"stable": 1},
	}}, Config{MaxBodyBytes: 1 << 16, MaxBatchSize: 64})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	f.Fuzz(func(t *testing.T, route, encoding uint8, body []byte) {
		path := fuzzPaths[int(route)%len(fuzzPaths)]
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		switch encoding % 3 {
		case 1: // the body gzipped
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			zw.Write(body)
			zw.Close()
			req = httptest.NewRequest("POST", path, &b)
			req.Header.Set("Content-Encoding", "gzip")
		case 2: // the body as it is, said to be gzipped
			req.Header.Set("Content-Encoding", "gzip")
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		answer := w.Body.Bytes()
		if w.Code >= 500 {
			t.Fatalf("POST %s %q: status %d: %s", path, body, w.Code, answer)
		}
		if !json.Valid(answer) {
			t.Fatalf("POST %s %q: status %d, not JSON: %s", path, body, w.Code, answer)
		}
		var doc map[string]any
		if err := json.Unmarshal(answer, &doc); err != nil {
			t.Fatalf("POST %s %q: status %d, not an object: %s", path, body, w.Code, answer)
		}
		want := []string{"error"}
		switch {
		case w.Code != http.StatusOK:
		case strings.HasSuffix(path, ":predict"):
			want = []string{"predictions", "outputs"}
		default:
			want = []string{"results"}
		}
		if len(doc) != 1 || !slices.ContainsFunc(want, func(k string) bool { _, ok := doc[k]; return ok }) {
			t.Fatalf("POST %s %q: status %d: answer %s, want one of the keys %q", path, body, w.Code, answer, want)
		}
	})
}
