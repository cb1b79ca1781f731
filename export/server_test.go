package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// ---- a fake servable ----

// fakeServable computes y = 2x + bias on signature "serving_default"
// (and regress), a few dtypes on "multi", and classes on "classify". The
// values -999, -1000 and -1001 of x make it panic, fail with a bad input
// and fail.
type fakeServable struct {
	version int64
	bias    float64
	sigs    map[string]Signature
	// batches, when set, receives the rows of every Run.
	batches chan int
	// entered and gate, when set, make Run signal entered and wait for
	// gate to close.
	entered chan struct{}
	gate    chan struct{}

	closed atomic.Bool
}

func newFake(version int64, bias float64) *fakeServable {
	x := TensorInfo{Dtype: "float64", Shape: []int{-1, 1}}
	vec := func(dt string) TensorInfo { return TensorInfo{Dtype: dt, Shape: []int{-1}} }
	return &fakeServable{version: version, bias: bias, sigs: map[string]Signature{
		"serving_default": {Method: "predict", Inputs: map[string]TensorInfo{"x": x}, Outputs: map[string]TensorInfo{"y": x}},
		"multi": {Method: "predict",
			Inputs: map[string]TensorInfo{
				"a": {Dtype: "float32", Shape: []int{-1, 2}}, "b": vec("int64"), "k": vec("int32"), "u": vec("uint8"), "ok": vec("bool"),
			},
			Outputs: map[string]TensorInfo{"sum": vec("float32"), "b2": vec("int64"), "not": vec("bool")},
		},
		"classify": {Method: "classify", Inputs: map[string]TensorInfo{"x": x},
			Outputs: map[string]TensorInfo{"scores": {Dtype: "float32", Shape: []int{-1, 2}}, "classes": {Dtype: "int64", Shape: []int{-1, 2}}}},
		"classify_scores": {Method: "classify", Inputs: map[string]TensorInfo{"x": x},
			Outputs: map[string]TensorInfo{"scores": {Dtype: "float32", Shape: []int{-1, 2}}}},
		"regress": {Method: "regress", Inputs: map[string]TensorInfo{"x": x}, Outputs: map[string]TensorInfo{"outputs": x}},
		"regress_flags": {Method: "regress",
			Inputs:  map[string]TensorInfo{"flag": vec("bool"), "n": {Dtype: "int32", Shape: []int{-1, 2}}, "u": vec("uint8"), "f": vec("float32")},
			Outputs: map[string]TensorInfo{"outputs": vec("float64")},
		},
	}}
}

func (f *fakeServable) Version() int64                   { return f.version }
func (f *fakeServable) Signatures() map[string]Signature { return f.sigs }

func (f *fakeServable) Close() error {
	f.closed.Store(true)
	return nil
}

func (f *fakeServable) Run(ctx context.Context, sig string, features map[string]*tensor.Dense) (map[string]*tensor.Dense, error) {
	if f.closed.Load() {
		return nil, fmt.Errorf("fake version %d: %w", f.version, ErrClosed)
	}
	if f.entered != nil {
		f.entered <- struct{}{}
		<-f.gate
	}
	s, ok := f.sigs[sig]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownSignature, sig)
	}
	rows := -1
	for name := range s.Inputs {
		t, ok := features[name]
		if !ok || (rows >= 0 && t.Shape()[0] != rows) {
			return nil, fmt.Errorf("%w: input %q", ErrBadInput, name)
		}
		rows = t.Shape()[0]
	}
	if f.batches != nil {
		f.batches <- rows
	}
	if sig == "multi" {
		a := features["a"].Data().([]float32)
		b := features["b"].Data().([]int64)
		k := features["k"].Data().([]int32)
		u := features["u"].Data().([]uint8)
		ok := features["ok"].Data().([]bool)
		sum, b2, not := make([]float32, rows), make([]int64, rows), make([]bool, rows)
		for i := range rows {
			sum[i] = a[2*i] + a[2*i+1] + float32(k[i]) + float32(u[i])
			b2[i], not[i] = 2*b[i], !ok[i]
		}
		return map[string]*tensor.Dense{
			"sum": tensor.New(tensor.WithShape(rows), tensor.WithBacking(sum)),
			"b2":  tensor.New(tensor.WithShape(rows), tensor.WithBacking(b2)),
			"not": tensor.New(tensor.WithShape(rows), tensor.WithBacking(not)),
		}, nil
	}
	if sig == "regress_flags" {
		flag := features["flag"].Data().([]bool)
		n := features["n"].Data().([]int32)
		u := features["u"].Data().([]uint8)
		fl := features["f"].Data().([]float32)
		out := make([]float64, rows)
		for i := range rows {
			out[i] = float64(n[2*i]) + 10*float64(n[2*i+1]) + 100*float64(u[i]) + 1000*float64(fl[i])
			if flag[i] {
				out[i] += 0.5
			}
		}
		return map[string]*tensor.Dense{"outputs": tensor.New(tensor.WithShape(rows), tensor.WithBacking(out))}, nil
	}
	x := features["x"].Data().([]float64)
	for _, v := range x {
		switch v {
		case -999:
			panic("boom")
		case -1000:
			return nil, fmt.Errorf("%w: x too small", ErrBadInput)
		case -1001:
			return nil, errors.New("device on fire")
		}
	}
	switch sig {
	case "classify", "classify_scores":
		scores, classes := make([]float32, 2*rows), make([]int64, 2*rows)
		for i, v := range x {
			scores[2*i], scores[2*i+1] = float32(1-v), float32(v)
			classes[2*i], classes[2*i+1] = 10, 20
		}
		out := map[string]*tensor.Dense{"scores": tensor.New(tensor.WithShape(rows, 2), tensor.WithBacking(scores))}
		if sig == "classify" {
			out["classes"] = tensor.New(tensor.WithShape(rows, 2), tensor.WithBacking(classes))
		}
		return out, nil
	}
	y := make([]float64, rows)
	for i, v := range x {
		y[i] = 2*v + f.bias
	}
	name := "y"
	if sig == "regress" {
		name = "outputs"
	}
	return map[string]*tensor.Dense{name: tensor.New(tensor.WithShape(rows, 1), tensor.WithBacking(y))}, nil
}

// ---- helpers ----

var quietLog = slog.New(slog.DiscardHandler)

// fixed is a loader that serves one version and never a new one.
func fixed(s Servable) func(int64) (Servable, error) {
	return func(current int64) (Servable, error) {
		if current == 0 {
			return s, nil
		}
		return nil, nil
	}
}

// versions is a loader serving the versions sent on next: Reload takes
// one when there is one.
type versions struct {
	next chan Servable
}

func (v *versions) load(current int64) (Servable, error) {
	select {
	case s := <-v.next:
		return s, nil
	default:
		return nil, nil
	}
}

func newTestServer(t *testing.T, configs []ModelConfig, opts ...ServerOption) (*Server, *httptest.Server) {
	t.Helper()
	s, err := NewServer(configs, append([]ServerOption{WithServerLogger(quietLog)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, hs
}

type response struct {
	code   int
	body   string
	header http.Header
}

// fetch makes one request; safe on any goroutine.
func fetch(hs *httptest.Server, method, path, body string) (response, error) {
	req, err := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
	if err != nil {
		return response{}, err
	}
	res, err := hs.Client().Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	return response{res.StatusCode, string(b), res.Header}, nil
}

func do(t *testing.T, hs *httptest.Server, method, path, body string) response {
	t.Helper()
	res, err := fetch(hs, method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// errorOf returns the "error" of an error answer.
func errorOf(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error *string `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == nil {
		t.Fatalf("the answer %q is not {\"error\": message}: %v", body, err)
	}
	return *e.Error
}

// ---- endpoints ----

func TestServerEndpoints(t *testing.T) {
	_, hs := newTestServer(t, []ModelConfig{
		{Name: "m", Loader: fixed(newFake(3, 1))},
		{Name: "other", Loader: fixed(newFake(7, 0))},
	})
	status3 := `{"model_version_status":[{"version":"3","state":"AVAILABLE","status":{"error_code":"OK","error_message":""}}]}`
	multi := `{"signature_name":"multi","instances":[` +
		`{"a":[1.5,2],"b":3,"k":-1,"u":255,"ok":true},` +
		`{"a":[0.25,0],"b":-4,"k":2,"u":0,"ok":false}]}`
	multiColumns := `{"signature_name":"multi","inputs":{"a":[[1.5,2],[0.25,0]],"b":[3,-4],"k":[-1,2],"u":[255,0],"ok":[true,false]}}`
	tests := []struct {
		name, method, path, body, want string
	}{
		{"status", "GET", "/v1/models/m", "", status3},
		{"status of a version", "GET", "/v1/models/m/versions/3", "", status3},
		{"status of another model", "GET", "/v1/models/other", "",
			`{"model_version_status":[{"version":"7","state":"AVAILABLE","status":{"error_code":"OK","error_message":""}}]}`},
		{"predict rows", "POST", "/v1/models/m:predict", `{"instances": [[1.0], [2.5]]}`, `{"predictions":[[3.0],[6.0]]}`},
		{"predict rows, version", "POST", "/v1/models/m/versions/3:predict", `{"instances": [[1]]}`, `{"predictions":[[3.0]]}`},
		{"predict rows, other model", "POST", "/v1/models/other:predict", `{"instances": [[1]]}`, `{"predictions":[[2.0]]}`},
		{"predict rows, named", "POST", "/v1/models/m:predict", `{"instances": [{"x": [1]}, {"x": [-0.5]}]}`, `{"predictions":[[3.0],[0.0]]}`},
		{"predict, default signature by name", "POST", "/v1/models/m:predict",
			`{"signature_name": "serving_default", "instances": [[1]]}`, `{"predictions":[[3.0]]}`},
		{"predict, empty signature name", "POST", "/v1/models/m:predict", `{"signature_name": "", "instances": [[1]]}`, `{"predictions":[[3.0]]}`},
		{"predict columns", "POST", "/v1/models/m:predict", `{"inputs": [[1.0], [2.5]]}`, `{"outputs":[[3.0],[6.0]]}`},
		{"predict columns, named", "POST", "/v1/models/m:predict", `{"inputs": {"x": [[1.0]]}}`, `{"outputs":[[3.0]]}`},
		{"predict rows, several inputs and outputs", "POST", "/v1/models/m:predict", multi,
			`{"predictions":[{"b2":6,"not":false,"sum":257.5},{"b2":-8,"not":true,"sum":2.25}]}`},
		{"predict columns, several inputs and outputs", "POST", "/v1/models/m:predict", multiColumns,
			`{"outputs":{"b2":[6,-8],"not":[false,true],"sum":[257.5,2.25]}}`},
		{"predict on a regress signature", "POST", "/v1/models/m:predict", `{"signature_name": "regress", "instances": [[1]]}`,
			`{"predictions":[[3.0]]}`},
		{"predict NaN and infinities", "POST", "/v1/models/m:predict", `{"instances": [[NaN], [Infinity], [-Infinity]]}`,
			`{"predictions":[[NaN],[Infinity],[-Infinity]]}`},
		{"predict large and small numbers", "POST", "/v1/models/m:predict", `{"instances": [[1e20], [-5e-1], [1.25E2]]}`,
			`{"predictions":[[2e+20],[0.0],[251.0]]}`},
		{"predict, path case-insensitive", "POST", "/V1/MODELS/m/Versions/3:PREDICT", `{"instances": [[1]]}`, `{"predictions":[[3.0]]}`},
		{"predict, unknown keys ignored", "POST", "/v1/models/m:predict", `{"instances": [[1]], "comment": {"any": [1, "thing"]}}`,
			`{"predictions":[[3.0]]}`},
		{"classify with classes", "POST", "/v1/models/m:classify",
			`{"signature_name": "classify", "examples": [{"x": 0.25}, {"x": [0.5]}]}`,
			`{"results":[[["10",0.75],["20",0.25]],[["10",0.5],["20",0.5]]]}`},
		{"classify with scores only, context", "POST", "/v1/models/m/versions/3:classify",
			`{"signature_name": "classify_scores", "context": {"x": 0.25}, "examples": [{}, {"extra": "ignored"}]}`,
			`{"results":[[["0",0.75],["1",0.25]],[["0",0.75],["1",0.25]]]}`},
		{"regress", "POST", "/v1/models/m:regress", `{"signature_name": "regress", "examples": [{"x": 1}, {"x": [2.5]}]}`,
			`{"results":[3.0,6.0]}`},
		{"regress, booleans as 0/1 and back", "POST", "/v1/models/m:regress",
			`{"signature_name": "regress_flags", "context": {"u": true}, "examples": [{"flag": 1, "n": [true, 2], "f": false}, {"flag": false, "n": [0, false], "f": true}]}`,
			`{"results":[121.5,1100.0]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, hs, tc.method, tc.path, tc.body)
			if res.code != http.StatusOK {
				t.Fatalf("status %d, body %s", res.code, res.body)
			}
			if diff := cmp.Diff(tc.want, res.body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			if ct := res.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

func TestServerMetadata(t *testing.T) {
	f := newFake(3, 1)
	f.sigs = map[string]Signature{
		"serving_default": f.sigs["serving_default"],
		"classify":        f.sigs["classify"],
	}
	_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(f)}})
	want := `{
	  "model_spec": {"name": "m", "signature_name": "", "version": "3"},
	  "metadata": {"signature_def": {"signature_def": {
	    "classify": {
	      "inputs": {"x": {"dtype": "DT_DOUBLE", "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "1", "name": ""}], "unknown_rank": false}, "name": "x"}},
	      "outputs": {
	        "classes": {"dtype": "DT_INT64", "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "2", "name": ""}], "unknown_rank": false}, "name": "classes"},
	        "scores": {"dtype": "DT_FLOAT", "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "2", "name": ""}], "unknown_rank": false}, "name": "scores"}
	      },
	      "method_name": "tensorflow/serving/classify",
	      "defaults": {}
	    },
	    "serving_default": {
	      "inputs": {"x": {"dtype": "DT_DOUBLE", "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "1", "name": ""}], "unknown_rank": false}, "name": "x"}},
	      "outputs": {"y": {"dtype": "DT_DOUBLE", "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "1", "name": ""}], "unknown_rank": false}, "name": "y"}},
	      "method_name": "tensorflow/serving/predict",
	      "defaults": {}
	    }
	  }}}
	}`
	for _, path := range []string{"/v1/models/m/metadata", "/v1/models/m/versions/3/metadata"} {
		t.Run(path, func(t *testing.T) {
			res := do(t, hs, "GET", path, "")
			if res.code != http.StatusOK {
				t.Fatalf("status %d, body %s", res.code, res.body)
			}
			var got, wantv any
			if err := json.Unmarshal([]byte(res.body), &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(want), &wantv); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantv, got); diff != "" {
				t.Errorf("metadata (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServerErrors(t *testing.T) {
	_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}})
	multi := func(a, b, k, u, ok string) string {
		return fmt.Sprintf(`{"signature_name":"multi","instances":[{"a":%s,"b":%s,"k":%s,"u":%s,"ok":%s}]}`, a, b, k, u, ok)
	}
	const (
		predict  = "/v1/models/m:predict"
		classify = "/v1/models/m:classify"
		regress  = "/v1/models/m:regress"
	)
	tests := []struct {
		name, method, path, body string
		code                     int
		want                     string
	}{
		// Paths, models, versions, methods.
		{"unknown model status", "GET", "/v1/models/nope", "", 404, "Could not find any versions of model nope"},
		{"unknown version status", "GET", "/v1/models/m/versions/7", "", 404, "Could not find version 7 of model m"},
		{"version 0 status", "GET", "/v1/models/m/versions/0", "", 404, "Could not find version 0 of model m"},
		{"version 0 predict", "POST", "/v1/models/m/versions/0:predict", `{"instances":[[1]]}`, 404, "Specific(m, 0)"},
		{"unknown model metadata", "GET", "/v1/models/nope/metadata", "", 404, "Servable not found for request: Latest(nope)"},
		{"unknown version metadata", "GET", "/v1/models/m/versions/2/metadata", "", 404, "Servable not found for request: Specific(m, 2)"},
		{"unknown model predict", "POST", "/v1/models/nope:predict", `{"instances":[[1]]}`, 404, "Servable not found for request: Latest(nope)"},
		{"unknown version predict", "POST", "/v1/models/m/versions/7:predict", `{"instances":[[1]]}`, 404, "Specific(m, 7)"},
		{"unknown version classify", "POST", "/v1/models/m/versions/7:classify", `{}`, 404, "Specific(m, 7)"},
		{"version overflow", "POST", "/v1/models/m/versions/99999999999999999999:predict", `{}`, 400, "Failed to convert version"},
		{"no model name", "GET", "/v1/models", "", 400, "Missing model name in request."},
		{"malformed path", "GET", "/v1/foo", "", 400, "Malformed request: GET /v1/foo"},
		{"version not a number", "POST", "/v1/models/m/versions/x:predict", `{}`, 400, "Malformed request"},
		{"unknown verb", "POST", "/v1/models/m:explain", `{}`, 400, "Malformed request"},
		{"outside the API", "GET", "/healthz", "", 404, "Not found"},
		{"GET predict", "GET", predict, "", 405, "use POST"},
		{"POST status", "POST", "/v1/models/m", "", 405, "use GET"},
		{"DELETE metadata", "DELETE", "/v1/models/m/metadata", "", 405, "use GET"},
		// Documents.
		{"empty body", "POST", predict, "", 400, "JSON Parse error: The document is empty"},
		{"blank body", "POST", predict, " \n", 400, "JSON Parse error: The document is empty"},
		{"not JSON", "POST", predict, "instances = [1, 2]", 400, "JSON Parse error: Invalid value"},
		{"unclosed", "POST", predict, `{"instances": [[1]]`, 400, "JSON Parse error: Missing a comma or '}'"},
		{"trailing data", "POST", predict, `{"instances": [[1]]}}`, 400, "must not be followed by other values"},
		{"bad number", "POST", predict, `{"instances": [[01]]}`, 400, "leading zero"},
		{"bad string", "POST", predict, `{"instances": ["\x"]}`, 400, "JSON Parse error: Invalid string"},
		{"not an object", "POST", predict, `[1]`, 400, "Is not object"},
		{"signature name not a string", "POST", predict, `{"signature_name": 5, "instances": [[1]]}`, 400, "'signature_name' key must be a string value"},
		{"unknown signature", "POST", predict, `{"signature_name": "nope", "instances": [[1]]}`, 400, `Serving signature name: "nope" not found in signature def`},
		{"unknown signature classify", "POST", classify, `{"signature_name": "nope", "examples": [{}]}`, 400, `"nope" not found`},
		// Predict, row format.
		{"instances and inputs", "POST", predict, `{"instances": [[1]], "inputs": [[1]]}`, 400, "only one of 'inputs' or 'instances'"},
		{"neither instances nor inputs", "POST", predict, `{}`, 400, "Missing 'inputs' or 'instances' key"},
		{"instances not a list", "POST", predict, `{"instances": 5}`, 400, "Expecting 'instances' to be a list"},
		{"no instances", "POST", predict, `{"instances": []}`, 400, "No values in 'instances' array"},
		{"instance a scalar", "POST", predict, `{"instances": [1.0]}`, 400, `instance 0: input "x" (float64, shape [-1 1]): found 1.0 at depth 0, want a list of 1`},
		{"instance too long", "POST", predict, `{"instances": [[1], [1, 2]]}`, 400, "instance 1: input \"x\" (float64, shape [-1 1]): found a list of 2 at depth 0, want 1"},
		{"instance too deep", "POST", predict, `{"instances": [[[1]]]}`, 400, "found a list at depth 1, want a single value"},
		{"instance a string", "POST", predict, `{"instances": [["a"]]}`, 400, `JSON Value: "a" Type: String is not of expected type: float64`},
		{"instance a bool", "POST", predict, `{"instances": [[true]]}`, 400, "Type: True is not of expected type: float64"},
		{"instance null", "POST", predict, `{"instances": [[null]]}`, 400, "Type: Null is not of expected type: float64"},
		{"instance an object inside", "POST", predict, `{"instances": [[{"b64": "AA=="}]]}`, 400, "found an object at depth 1"},
		{"objects then a list", "POST", predict, `{"instances": [{"x": [1]}, [2]]}`, 400, "Expecting object but got Array at item 1"},
		{"a list then objects", "POST", predict, `{"instances": [[1], {"x": [2]}]}`, 400, "Expecting value/list but got object at item 1"},
		{"instance misses an input", "POST", predict, `{"instances": [{"y": [1]}]}`, 400, `instance 0: missing input "x"`},
		{"instance with an unknown input", "POST", predict, `{"instances": [{"x": [1], "z": [1]}]}`, 400, `instance 0: unknown input "z"`},
		{"plain list for several inputs", "POST", predict, `{"signature_name": "multi", "instances": [[1, 2]]}`, 400, "'instances' is a plain list, but the signature takes several inputs"},
		{"int64 given a decimal", "POST", predict, multi("[1,2]", "1.5", "1", "1", "true"), 400, "JSON Value: 1.5 Type: Number is not of expected type: int64"},
		{"int64 given an exponent", "POST", predict, multi("[1,2]", "1e2", "1", "1", "true"), 400, "is not of expected type: int64"},
		{"int64 overflow", "POST", predict, multi("[1,2]", "9223372036854775808", "1", "1", "true"), 400, "does not fit in int64"},
		{"int32 overflow", "POST", predict, multi("[1,2]", "1", "3000000000", "1", "true"), 400, "does not fit in int32"},
		{"uint8 overflow", "POST", predict, multi("[1,2]", "1", "1", "256", "true"), 400, "does not fit in uint8"},
		{"uint8 negative", "POST", predict, multi("[1,2]", "1", "1", "-1", "true"), 400, "does not fit in uint8"},
		{"bool given a number", "POST", predict, multi("[1,2]", "1", "1", "1", "1"), 400, "is not of expected type: bool"},
		{"float32 inexact integer", "POST", predict, multi("[16777217,2]", "1", "1", "1", "true"), 400, "Cannot convert JSON value: 16777217 to float32 without loss of precision."},
		{"float32 out of range", "POST", predict, multi("[1e39,2]", "1", "1", "1", "true"), 400, "to float32 without loss of precision"},
		{"float64 out of range", "POST", predict, `{"instances": [[1e400]]}`, 400, "to float64 without loss of precision"},
		{"float64 inexact integer", "POST", predict, `{"instances": [[9007199254740993]]}`, 400, "to float64 without loss of precision"},
		{"ragged instance", "POST", predict, multi("[1]", "1", "1", "1", "true"), 400, `input "a" (float32, shape [-1 2]): found a list of 1 at depth 0, want 2`},
		// Predict, columnar format.
		{"inputs a scalar", "POST", predict, `{"inputs": 5}`, 400, `input "x" (float64, shape [-1 1]): want a list with one entry per example, got 5`},
		{"inputs empty", "POST", predict, `{"inputs": []}`, 400, "the batch is empty"},
		{"inputs ragged", "POST", predict, `{"inputs": [[1], [2, 3]]}`, 400, "found a list of 2 at depth 1, want 1 (the shape is [2 1]"},
		{"inputs too shallow", "POST", predict, `{"inputs": [1, 2]}`, 400, "found 1 at depth 1, want a list of 1"},
		{"inputs missing a name", "POST", predict, `{"inputs": {"y": [[1]]}}`, 400, `'inputs': missing input "x"`},
		{"inputs with an unknown name", "POST", predict, `{"inputs": {"x": [[1]], "y": [[1]]}}`, 400, `'inputs': unknown input "y"`},
		{"inputs plain for several inputs", "POST", predict, `{"signature_name": "multi", "inputs": [[1, 2]]}`, 400, "'inputs' is a plain value/list, but the signature takes several inputs"},
		{"inputs of different batches", "POST", predict,
			`{"signature_name":"multi","inputs":{"a":[[1,2]],"b":[1,2],"k":[1],"u":[1],"ok":[true]}}`, 400, `input "b" has 2 examples, input "a" has 1: every input needs the same batch`},
		// Errors from Run.
		{"run: bad input", "POST", predict, `{"instances": [[-1000]]}`, 400, "x too small"},
		{"run: failure", "POST", predict, `{"instances": [[-1001]]}`, 500, "device on fire"},
		{"run: panic", "POST", predict, `{"instances": [[-999]]}`, 500, "internal error: panic: boom"},
		// Classify and regress.
		{"classify a predict signature", "POST", classify, `{"examples": [{"x": 1}]}`, 400,
			"Expected classify signature method_name to be tensorflow/serving/classify. Was: tensorflow/serving/predict"},
		{"regress a classify signature", "POST", regress, `{"signature_name": "classify", "examples": [{"x": 1}]}`, 400,
			"Expected regress signature method_name to be tensorflow/serving/regress. Was: tensorflow/serving/classify"},
		{"no examples", "POST", classify, `{"signature_name": "classify"}`, 400, "When method is classify, key 'examples' is expected and was not found"},
		{"examples not a list", "POST", regress, `{"signature_name": "regress", "examples": {"x": 1}}`, 400, "Expecting 'examples' value to be an list/array"},
		{"examples empty", "POST", regress, `{"signature_name": "regress", "examples": []}`, 400, "'examples' value is an empty array"},
		{"example not an object", "POST", regress, `{"signature_name": "regress", "examples": [[1]]}`, 400, "example 0: Example must be JSON object but got JSON Array"},
		{"context not an object", "POST", regress, `{"signature_name": "regress", "context": [1], "examples": [{}]}`, 400, "'context': Example must be JSON object but got JSON Array"},
		{"feature missing", "POST", regress, `{"signature_name": "regress", "examples": [{"x": 1}, {"y": 1}]}`, 400,
			"example 1: Feature: x (data type: float64) is required but could not be found."},
		{"feature in context and example", "POST", regress, `{"signature_name": "regress", "context": {"x": 1}, "examples": [{"x": 1}]}`, 400,
			`example 0: feature "x" is in the context too`},
		{"feature with too many values", "POST", regress, `{"signature_name": "regress", "examples": [{"x": [1, 2]}]}`, 400,
			`example 0: feature "x" has 2 values, want 1`},
		{"feature nested", "POST", regress, `{"signature_name": "regress", "examples": [{"x": [[1]]}]}`, 400,
			"example 0: Feature: x has element with unexpected JSON type: Array"},
		{"feature a string", "POST", classify, `{"signature_name": "classify", "examples": [{"x": "1"}]}`, 400,
			`example 0: feature "x": JSON Value: "1" Type: String is not of expected type: float64`},
		{"classify run failure", "POST", classify, `{"signature_name": "classify", "examples": [{"x": -1001}]}`, 500, "device on fire"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, hs, tc.method, tc.path, tc.body)
			if res.code != tc.code {
				t.Errorf("status %d, want %d; body %s", res.code, tc.code, res.body)
			}
			if msg := errorOf(t, res.body); !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not contain %q", msg, tc.want)
			}
			if ct := res.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if tc.code == 405 && res.header.Get("Allow") == "" {
				t.Errorf("405 without an Allow header")
			}
		})
	}
}

// stubServable answers every signature with the outputs out makes.
type stubServable struct {
	method string
	out    func(rows int) map[string]*tensor.Dense
}

func (f *stubServable) Version() int64 { return 1 }
func (f *stubServable) Close() error   { return nil }

func (f *stubServable) Signatures() map[string]Signature {
	x := TensorInfo{Dtype: "float64", Shape: []int{-1, 1}}
	return map[string]Signature{"serving_default": {Method: f.method, Inputs: map[string]TensorInfo{"x": x}, Outputs: map[string]TensorInfo{"y": x}}}
}

func (f *stubServable) Run(_ context.Context, _ string, features map[string]*tensor.Dense) (map[string]*tensor.Dense, error) {
	return f.out(features["x"].Shape()[0]), nil
}

func dense[T any](shape []int, vals ...T) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(vals))
}

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
			outs("scores", dense(two, 0.25, 0.5)), 200, `{"results":[[["0",0.25]],[["0",0.5]]]}`},
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
			_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(&stubServable{method: tc.method, out: tc.out})}})
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

// syncBuffer is a bytes.Buffer for a logger written from several
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestServerLogsFailures(t *testing.T) {
	for _, batching := range []bool{false, true} {
		t.Run(fmt.Sprintf("batching=%v", batching), func(t *testing.T) {
			var logs syncBuffer
			opts := []ServerOption{WithServerLogger(slog.New(slog.NewTextHandler(&logs, nil)))}
			if batching {
				opts = append(opts, WithMaxBatchSize(1000), WithBatchTimeout(time.Nanosecond))
			}
			s, err := NewServer([]ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(s)
			defer hs.Close()
			for _, tc := range []struct {
				x    string
				code int
				want string
			}{{"-999", 500, "panic: boom"}, {"-1001", 500, "device on fire"}, {"-1000", 400, ""}} {
				res := do(t, hs, "POST", "/v1/models/m:predict", `{"instances": [[`+tc.x+`]]}`)
				if res.code != tc.code {
					t.Errorf("x=%s: status %d, want %d: %s", tc.x, res.code, tc.code, res.body)
				}
				if tc.want != "" && !strings.Contains(logs.String(), tc.want) {
					t.Errorf("x=%s: the log does not mention %q:\n%s", tc.x, tc.want, logs.String())
				}
			}
			if !strings.Contains(logs.String(), "goroutine") {
				t.Errorf("the panic is logged without its stack:\n%s", logs.String())
			}
			if strings.Contains(logs.String(), "x too small") {
				t.Errorf("a 400 is logged:\n%s", logs.String())
			}
			// The panicking requests released the version: Close does not hang.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// ---- limits ----

func TestServerBodyLimit(t *testing.T) {
	_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, WithMaxBodyBytes(64))
	atLimit := `{"instances": [[1]]}`
	atLimit += strings.Repeat(" ", 64-len(atLimit))
	tests := []struct {
		name    string
		body    io.Reader
		chunked bool
		code    int
	}{
		{"at the limit", strings.NewReader(atLimit), false, 200},
		{"over the limit", strings.NewReader(atLimit + " "), false, 413},
		{"at the limit, chunked", strings.NewReader(atLimit), true, 200},
		{"over the limit, chunked", strings.NewReader(atLimit + " "), true, 413},
		{"far over the limit, chunked", strings.NewReader(strings.Repeat(" ", 1<<20)), true, 413},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if tc.chunked {
				body = io.MultiReader(body) // hides the length: sent chunked
			}
			req, err := http.NewRequest("POST", hs.URL+"/v1/models/m:predict", body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.chunked != (req.ContentLength == 0) {
				t.Fatalf("content length %d", req.ContentLength)
			}
			res, err := hs.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.code {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.code, b)
			}
			if tc.code == 413 && !strings.Contains(errorOf(t, string(b)), "larger than the limit of 64 bytes") {
				t.Errorf("error %s", b)
			}
		})
	}
}

func TestServerMaxBatchSize(t *testing.T) {
	_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, WithMaxBatchSize(3))
	tests := []struct {
		name, path, body string
		code             int
	}{
		{"rows at the limit", "/v1/models/m:predict", `{"instances": [[1], [2], [3]]}`, 200},
		{"rows over the limit", "/v1/models/m:predict", `{"instances": [[1], [2], [3], [4]]}`, 400},
		{"columns over the limit", "/v1/models/m:predict", `{"inputs": [[1], [2], [3], [4]]}`, 400},
		{"examples over the limit", "/v1/models/m:regress", `{"signature_name": "regress", "examples": [{"x": 1}, {"x": 1}, {"x": 1}, {"x": 1}]}`, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, hs, "POST", tc.path, tc.body)
			if res.code != tc.code {
				t.Fatalf("status %d, want %d: %s", res.code, tc.code, res.body)
			}
			if tc.code == 400 && !strings.Contains(errorOf(t, res.body), "the request has 4 examples, more than the maximum batch size 3") {
				t.Errorf("error %s", res.body)
			}
		})
	}
}

// ---- request batching ----

// predictionsOf decodes {"predictions": [[y], ...]}.
func predictionsOf(res response) ([]float64, error) {
	if res.code != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", res.code, res.body)
	}
	var p struct{ Predictions [][]float64 }
	if err := json.Unmarshal([]byte(res.body), &p); err != nil {
		return nil, err
	}
	var ys []float64
	for _, row := range p.Predictions {
		ys = append(ys, row...)
	}
	return ys, nil
}

func predictions(t *testing.T, res response) []float64 {
	t.Helper()
	ys, err := predictionsOf(res)
	if err != nil {
		t.Fatal(err)
	}
	return ys
}

// outcome is the predictions of a request, or what went wrong.
type outcome struct {
	ys  []float64
	err error
}

// predictAsync posts a predict request from another goroutine.
func predictAsync(hs *httptest.Server, path, body string) <-chan outcome {
	out := make(chan outcome, 1)
	go func() {
		res, err := fetch(hs, "POST", path, body)
		if err != nil {
			out <- outcome{err: err}
			return
		}
		ys, err := predictionsOf(res)
		out <- outcome{ys, err}
	}()
	return out
}

// wantPredictions checks an outcome.
func wantPredictions(t *testing.T, what string, want []float64, got outcome) {
	t.Helper()
	if got.err != nil {
		t.Errorf("%s: %v", what, got.err)
		return
	}
	if diff := cmp.Diff(want, got.ys); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

func instances(xs ...float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("[%g]", x)
	}
	return `{"instances": [` + strings.Join(parts, ",") + `]}`
}

func twoXPlusOne(xs ...float64) []float64 {
	ys := make([]float64, len(xs))
	for i, x := range xs {
		ys[i] = 2*x + 1
	}
	return ys
}

func TestServerBatchesMerge(t *testing.T) {
	type req struct {
		sig string
		xs  []float64
		// wait: wait until this request joined a batch before sending the
		// next one.
		wait bool
	}
	tests := []struct {
		name    string
		max     int
		reqs    []req
		batches []int // the rows of each Run, sorted
	}{
		{"flush when full", 4, []req{{"", []float64{1}, false}, {"", []float64{2}, false}, {"", []float64{3, 4}, false}}, []int{4}},
		{"a request that does not fit starts the next batch", 4,
			[]req{{"", []float64{1, 2, 3}, true}, {"", []float64{4, 5}, true}, {"", []float64{6, 7}, false}}, []int{3, 4}},
		{"a full request runs alone", 2, []req{{"", []float64{1, 2}, false}}, []int{2}},
		{"signatures are batched apart", 2,
			[]req{{"", []float64{1}, true}, {"regress", []float64{2}, true}, {"", []float64{3}, false}, {"regress", []float64{4}, false}}, []int{2, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(3, 1)
			f.batches = make(chan int, 100)
			// An hour: only full batches run, whatever the timing.
			s, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(f)}}, WithMaxBatchSize(tc.max), WithBatchTimeout(time.Hour))
			joined := make(chan int, 100)
			s.batcher.enqueued = func(key batchKey, rows int) { joined <- rows }
			var pending []<-chan outcome
			for _, r := range tc.reqs {
				body := instances(r.xs...)
				if r.sig != "" {
					body = strings.Replace(body, "{", `{"signature_name": "`+r.sig+`", `, 1)
				}
				pending = append(pending, predictAsync(hs, "/v1/models/m:predict", body))
				if r.wait {
					if rows := <-joined; tc.name == "signatures are batched apart" && rows != 1 {
						t.Errorf("a request joined a batch of another signature: %d rows", rows)
					}
				}
			}
			for i, r := range tc.reqs {
				wantPredictions(t, fmt.Sprintf("request %v", r.xs), twoXPlusOne(r.xs...), <-pending[i])
			}
			close(f.batches)
			var got []int
			for n := range f.batches {
				got = append(got, n)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.batches, got); diff != "" {
				t.Errorf("batch sizes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServerBatchTimeout(t *testing.T) {
	f := newFake(3, 1)
	f.batches = make(chan int, 100)
	_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(f)}}, WithMaxBatchSize(8), WithBatchTimeout(time.Millisecond))
	// A lone request is run when the timeout passes.
	if diff := cmp.Diff(twoXPlusOne(5, 6), predictions(t, do(t, hs, "POST", "/v1/models/m:predict", instances(5, 6)))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if n := <-f.batches; n != 2 {
		t.Errorf("batch of %d rows, want 2", n)
	}
}

func TestServerCloseRunsOpenBatches(t *testing.T) {
	f := newFake(3, 1)
	s, err := NewServer([]ModelConfig{{Name: "m", Loader: fixed(f)}}, WithServerLogger(quietLog), WithMaxBatchSize(8), WithBatchTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	joined := make(chan int, 1)
	s.batcher.enqueued = func(batchKey, int) { joined <- 1 }
	done := predictAsync(hs, "/v1/models/m:predict", instances(1))
	<-joined
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wantPredictions(t, "the request in the open batch", twoXPlusOne(1), <-done)
	if !f.closed.Load() {
		t.Error("Close did not close the version")
	}
	if res := do(t, hs, "POST", "/v1/models/m:predict", instances(1)); res.code != http.StatusServiceUnavailable {
		t.Errorf("after Close: status %d: %s", res.code, res.body)
	}
}

// ---- reloading ----

func status(t *testing.T, hs *httptest.Server, model string) string {
	t.Helper()
	res := do(t, hs, "GET", "/v1/models/"+model, "")
	var st tfModelStatus
	if err := json.Unmarshal([]byte(res.body), &st); err != nil || len(st.ModelVersionStatus) != 1 {
		t.Fatalf("status %d: %s", res.code, res.body)
	}
	return st.ModelVersionStatus[0].Version
}

func TestServerReload(t *testing.T) {
	v3, v4 := newFake(3, 1), newFake(4, 100)
	src := &versions{next: make(chan Servable, 1)}
	src.next <- v3
	failing := atomic.Bool{}
	s, hs := newTestServer(t, []ModelConfig{
		{Name: "m", Loader: src.load},
		{Name: "flaky", Loader: func(current int64) (Servable, error) {
			if current == 0 {
				return newFake(1, 0), nil
			}
			if failing.Load() {
				return nil, errors.New("disk on fire")
			}
			return nil, nil
		}},
	})
	predict := func(path string) response { return do(t, hs, "POST", path, instances(1)) }

	if err := s.Reload(); err != nil { // nothing new
		t.Fatal(err)
	}
	if got := status(t, hs, "m"); got != "3" {
		t.Fatalf("version %s, want 3", got)
	}
	src.next <- v4
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := status(t, hs, "m"); got != "4" {
		t.Errorf("after Reload: version %s, want 4", got)
	}
	if diff := cmp.Diff([]float64{102}, predictions(t, predict("/v1/models/m:predict"))); diff != "" {
		t.Errorf("after Reload (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]float64{102}, predictions(t, predict("/v1/models/m/versions/4:predict"))); diff != "" {
		t.Errorf("after Reload (-want +got):\n%s", diff)
	}
	if res := predict("/v1/models/m/versions/3:predict"); res.code != http.StatusNotFound {
		t.Errorf("the old version: status %d: %s", res.code, res.body)
	}

	// A failing reload keeps the versions served and reports the error.
	failing.Store(true)
	err := s.Reload()
	if err == nil || !strings.Contains(err.Error(), `model "flaky": disk on fire`) {
		t.Errorf("Reload: %v", err)
	}
	if got := status(t, hs, "flaky"); got != "1" {
		t.Errorf("after a failed reload: version %s, want 1", got)
	}
	// A loader handing the version served again is an error.
	src.next <- newFake(4, 0)
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "the loader returned version 4, the one served") {
		t.Errorf("Reload: %v", err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !v3.closed.Load() || !v4.closed.Load() {
		t.Errorf("closed: version 3 %v, version 4 %v", v3.closed.Load(), v4.closed.Load())
	}
	if err := s.Reload(); err == nil {
		t.Error("Reload after Close succeeded")
	}
}

// TestServerReloadInFlight holds requests inside Run while a new version
// is swapped in: they finish on the old version, which is closed only
// after them.
func TestServerReloadInFlight(t *testing.T) {
	const n = 8
	old := newFake(1, 1)
	old.entered, old.gate = make(chan struct{}, n), make(chan struct{})
	src := &versions{next: make(chan Servable, 1)}
	src.next <- old
	s, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: src.load}})
	results := make([]<-chan outcome, n)
	for i := range n {
		results[i] = predictAsync(hs, "/v1/models/m:predict", instances(float64(i)))
	}
	for range n {
		<-old.entered
	}
	next := newFake(2, 100)
	src.next <- next
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if old.closed.Load() {
		t.Fatal("the old version was closed with requests in flight")
	}
	if diff := cmp.Diff([]float64{102}, predictions(t, do(t, hs, "POST", "/v1/models/m:predict", instances(1)))); diff != "" {
		t.Errorf("new requests (-want +got):\n%s", diff)
	}
	close(old.gate)
	for i, res := range results {
		wantPredictions(t, fmt.Sprintf("request %d", i), twoXPlusOne(float64(i)), <-res)
	}
	s.drains.Wait() // the old version is closed in the background
	if !old.closed.Load() {
		t.Error("the old version was not closed after its requests")
	}
	if next.closed.Load() {
		t.Error("the new version was closed")
	}
}

// TestServerReloadUnderLoad reloads again and again while requests run
// concurrently, with and without batching: every request succeeds (a
// request on a closed version would get 503).
func TestServerReloadUnderLoad(t *testing.T) {
	for _, batching := range []bool{false, true} {
		t.Run(fmt.Sprintf("batching=%v", batching), func(t *testing.T) {
			const workers, requests, reloads = 8, 20, 10
			src := &versions{next: make(chan Servable, 1)}
			var all []*fakeServable
			add := func(v int64) {
				f := newFake(v, 1)
				all = append(all, f)
				src.next <- f
			}
			add(1)
			var opts []ServerOption
			if batching {
				opts = []ServerOption{WithMaxBatchSize(4), WithBatchTimeout(time.Millisecond)}
			}
			s, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: src.load}}, opts...)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := range requests {
						x := float64(w*1000 + i)
						res, err := fetch(hs, "POST", "/v1/models/m:predict", instances(x))
						if err != nil || res.code != http.StatusOK || res.body != fmt.Sprintf(`{"predictions":[[%.1f]]}`, 2*x+1) {
							t.Errorf("x=%g: %v: status %d: %s", x, err, res.code, res.body)
						}
					}
				})
			}
			for v := int64(2); v <= reloads+1; v++ {
				add(v)
				if err := s.Reload(); err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			if got := status(t, hs, "m"); got != fmt.Sprint(reloads+1) {
				t.Errorf("version %s, want %d", got, reloads+1)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			for _, f := range all {
				if !f.closed.Load() {
					t.Errorf("version %d was not closed", f.version)
				}
			}
		})
	}
}

func TestServerWatch(t *testing.T) {
	called := make(chan int64, 1)
	s, _ := newTestServer(t, []ModelConfig{{Name: "m", Loader: func(current int64) (Servable, error) {
		if current == 0 {
			return newFake(1, 1), nil
		}
		select {
		case called <- current:
		default:
		}
		return nil, nil
	}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		s.Watch(ctx, time.Millisecond)
		close(done)
	}()
	if got := <-called; got != 1 {
		t.Errorf("the loader was called with version %d, want 1", got)
	}
	cancel()
	<-done

	// Watch also returns once the server is closed.
	closed := make(chan struct{})
	go func() {
		s.Watch(context.Background(), time.Hour)
		close(closed)
	}()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	<-closed
}

func TestNewServerErrors(t *testing.T) {
	fake := func() func(int64) (Servable, error) { return fixed(newFake(1, 1)) }
	badDtype := newFake(1, 1)
	badDtype.sigs = map[string]Signature{"s": {Method: "predict", Inputs: map[string]TensorInfo{"x": {Dtype: "string", Shape: []int{-1}}}}}
	badShape := newFake(1, 1)
	badShape.sigs = map[string]Signature{"s": {Method: "predict", Inputs: map[string]TensorInfo{"x": {Dtype: "float64", Shape: []int{-1, 0}}}}}
	tests := []struct {
		name    string
		configs []ModelConfig
		opts    []ServerOption
		want    string
		is      error
	}{
		{"no models", nil, nil, "no models", nil},
		{"empty name", []ModelConfig{{Name: "", Loader: fake()}}, nil, `model name ""`, nil},
		{"name with a colon", []ModelConfig{{Name: "a:b", Loader: fake()}}, nil, `model name "a:b"`, nil},
		{"name with a slash", []ModelConfig{{Name: "a/b", Loader: fake()}}, nil, `model name "a/b"`, nil},
		{"twice", []ModelConfig{{Name: "a", Loader: fake()}, {Name: "a", Loader: fake()}}, nil, `model "a" is configured twice`, nil},
		{"no source", []ModelConfig{{Name: "a"}}, nil, "needs a BaseDir and a Model, or a Loader", nil},
		{"loader error", []ModelConfig{{Name: "a", Loader: func(int64) (Servable, error) { return nil, errors.New("nope") }}}, nil, "nope", nil},
		{"loader without a version", []ModelConfig{{Name: "a", Loader: func(int64) (Servable, error) { return nil, nil }}}, nil, "no export version", ErrNoVersion},
		{"empty base dir", []ModelConfig{{Name: "a", BaseDir: t.TempDir(), Model: replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}})}}, nil, "no export version", ErrNoVersion},
		{"unservable dtype", []ModelConfig{{Name: "a", Loader: fixed(badDtype)}}, nil, `input "x" has dtype "string"`, nil},
		{"bad shape", []ModelConfig{{Name: "a", Loader: fixed(badShape)}}, nil, `input "x" has shape [-1 0]`, nil},
		{"body limit", []ModelConfig{{Name: "a", Loader: fake()}}, []ServerOption{WithMaxBodyBytes(0)}, "max body bytes 0", nil},
		{"negative batch size", []ModelConfig{{Name: "a", Loader: fake()}}, []ServerOption{WithMaxBatchSize(-1)}, "max batch size -1", nil},
		{"negative timeout", []ModelConfig{{Name: "a", Loader: fake()}}, []ServerOption{WithBatchTimeout(-1)}, "batch timeout -1ns", nil},
		{"timeout without batch size", []ModelConfig{{Name: "a", Loader: fake()}}, []ServerOption{WithBatchTimeout(time.Second)}, "needs a max batch size", nil},
		{"nil logger", []ModelConfig{{Name: "a", Loader: fake()}}, []ServerOption{WithServerLogger(nil)}, "nil logger", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewServer(tc.configs, append([]ServerOption{WithServerLogger(quietLog)}, tc.opts...)...)
			if err == nil {
				s.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v does not wrap %v", err, tc.is)
			}
		})
	}
	// A failed NewServer closes the versions it loaded.
	first := newFake(1, 1)
	_, err := NewServer([]ModelConfig{{Name: "a", Loader: fixed(first)}, {Name: "b"}}, WithServerLogger(quietLog))
	if err == nil || !first.closed.Load() {
		t.Errorf("error %v, first version closed %v", err, first.closed.Load())
	}
}

// ---- listening ----

func TestServe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		io.WriteString(w, "done")
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, l, h) }()
	got := make(chan string, 1)
	go func() {
		res, err := http.Get("http://" + l.Addr().String() + "/")
		if err != nil {
			got <- err.Error()
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		got <- fmt.Sprint(res.StatusCode, " ", string(b))
	}()
	<-entered
	cancel() // shuts down gracefully: the request in flight completes
	close(release)
	if g := <-got; g != "200 done" {
		t.Errorf("the request in flight got %q", g)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestListenAndServe(t *testing.T) {
	if err := ListenAndServe(context.Background(), "256.0.0.1:http", http.NotFoundHandler()); err == nil {
		t.Error("no error for a bad address")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ListenAndServe(ctx, "127.0.0.1:0", http.NotFoundHandler()); err != nil {
		t.Errorf("ListenAndServe: %v", err)
	}
}

// ---- end to end ----

// TestServerEndToEnd trains the linear-regression example briefly, exports
// it, serves it over HTTP, exports a second version and reloads.
func TestServerEndToEnd(t *testing.T) {
	ctx := context.Background()
	model := replicate.ModelFn(linreg.Model,
		replicate.Config{Devices: []towers.Device{towers.CPU(0)}, Optimizer: optimizers.SGD(0.5), Reduction: replicate.BatchMean})
	est, err := estimator.New(model, estimator.RunConfig{Seed: 1, LogEvery: -1, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	features, labels := linreg.Data(200, 1)
	input, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 50, Epochs: estimator.Forever, Shuffle: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := est.Train(ctx, input, estimator.Steps(300)); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	serving := estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1}}}
	if _, err := est.Export(ctx, base, serving); err != nil {
		t.Fatal(err)
	}
	s, hs := newTestServer(t, []ModelConfig{{Name: "linreg", BaseDir: base, Model: model}})

	approx := cmpopts.EquateApprox(0, 1e-3)
	line := func(xs ...float64) []float64 {
		ys := make([]float64, len(xs))
		for i, x := range xs {
			ys[i] = linreg.TrueW*x + linreg.TrueB
		}
		return ys
	}
	check := func(version string) {
		t.Helper()
		if got := status(t, hs, "linreg"); got != version {
			t.Errorf("version %s, want %s", got, version)
		}
		if diff := cmp.Diff(line(0.5, 1, 2), predictions(t, do(t, hs, "POST", "/v1/models/linreg:predict", instances(0.5, 1, 2))), approx); diff != "" {
			t.Errorf("predict (-want +got):\n%s", diff)
		}
		res := do(t, hs, "POST", "/v1/models/linreg/versions/"+version+":regress", `{"examples": [{"x": 0.5}, {"x": [3]}]}`)
		var reg struct{ Results []float64 }
		if err := json.Unmarshal([]byte(res.body), &reg); err != nil || res.code != 200 {
			t.Fatalf("regress: status %d: %s", res.code, res.body)
		}
		if diff := cmp.Diff(line(0.5, 3), reg.Results, approx); diff != "" {
			t.Errorf("regress (-want +got):\n%s", diff)
		}
		res = do(t, hs, "GET", "/v1/models/linreg/metadata", "")
		if res.code != 200 || !strings.Contains(res.body, `"method_name":"tensorflow/serving/regress"`) {
			t.Errorf("metadata: status %d: %s", res.code, res.body)
		}
	}
	check("1")

	if err := est.Train(ctx, input, estimator.Steps(10)); err != nil {
		t.Fatal(err)
	}
	if _, err := est.Export(ctx, base, serving); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	check("2")
	if res := do(t, hs, "POST", "/v1/models/linreg/versions/1:predict", instances(1)); res.code != http.StatusNotFound {
		t.Errorf("version 1 after reload: status %d: %s", res.code, res.body)
	}
	if err := s.Reload(); err != nil { // nothing new
		t.Fatal(err)
	}
	check("2")
}
