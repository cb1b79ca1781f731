package serving

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
)

// TestRequestErrors covers the answers to request bodies that cannot be
// decoded into a signature's inputs.
func TestRequestErrors(t *testing.T) {
	_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, Config{})
	multi := func(a, b, k, u, ok string) string {
		return fmt.Sprintf(`{"signature_name":"multi","instances":[{"a":%s,"b":%s,"k":%s,"u":%s,"ok":%s}]}`, a, b, k, u, ok)
	}
	const (
		predict  = "/v1/models/m:predict"
		classify = "/v1/models/m:classify"
		regress  = "/v1/models/m:regress"
	)
	checkErrors(t, hs, []errorCase{
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
	})
}

func TestServerBodyLimit(t *testing.T) {
	_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, Config{MaxBodyBytes: 64})
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

// TestServerDefaultMaxBatchSize: the zero Config limits requests to
// DefaultMaxBatchSize examples.
func TestServerDefaultMaxBatchSize(t *testing.T) {
	_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, Config{})
	for _, rows := range []int{DefaultMaxBatchSize, DefaultMaxBatchSize + 1} {
		xs := make([]float64, rows)
		res := do(t, hs, "POST", "/v1/models/m:predict", instances(xs...))
		want := http.StatusOK
		if rows > DefaultMaxBatchSize {
			want = http.StatusBadRequest
		}
		if res.code != want {
			t.Errorf("%d rows: status %d, want %d: %.200s", rows, res.code, want, res.body)
		}
	}
}

func TestServerMaxBatchSize(t *testing.T) {
	_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, Config{MaxBatchSize: 3})
	tests := []struct {
		name, path, body string
		code             int
	}{
		{"rows at the limit", "/v1/models/m:predict", `{"instances": [[1], [2], [3]]}`, 200},
		{"rows over the limit", "/v1/models/m:predict", `{"instances": [[1], [2], [3], [4]]}`, 400},
		{"columns over the limit", "/v1/models/m:predict", `{"inputs": [[1], [2], [3], [4]]}`, 400},
		{"examples over the limit", "/v1/models/m:regress", `{"signature_name": "regress", "examples": [{"x": 1}, {"x": 1}, {"x": 1}, {"x": 1}]}`, 400},
		// The rows are counted before any value is decoded.
		{"rows over the limit, a bad value among them", "/v1/models/m:predict", `{"instances": [[1], [2], [3], ["x"]]}`, 400},
		{"columns over the limit, a bad value among them", "/v1/models/m:predict", `{"inputs": [[1], [2], [3], ["x"]]}`, 400},
		{"examples over the limit, a bad value among them", "/v1/models/m:regress", `{"signature_name": "regress", "examples": [{"x": 1}, {"x": 1}, {"x": 1}, {"x": "x"}]}`, 400},
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

// TestColumnSize checks the room made for a column before its values are
// read: rows times the example's size, never more than the body can hold.
func TestColumnSize(t *testing.T) {
	tests := []struct {
		name       string
		rows       int
		shape      []int
		most, want int
	}{
		{"scalars", 10, nil, 100, 10},
		{"vectors", 10, []int{3}, 100, 30},
		{"matrices", 2, []int{3, 4}, 100, 24},
		{"more than the body holds", 10, []int{1000}, 100, 100},
		{"a huge example", 1, []int{1 << 40, 1 << 40}, 50, 50},
		{"a zero dimension", 3, []int{0}, 50, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := columnSize(tc.rows, tc.shape, tc.most); got != tc.want {
				t.Errorf("columnSize(%d, %v, %d) = %d, want %d", tc.rows, tc.shape, tc.most, got, tc.want)
			}
		})
	}
}

// TestRequestValueBound: a request is parsed only as far as the JSON
// values MaxBatchSize examples of the model hold, so a body of many small
// rows is refused before its parse takes memory; requests of MaxBatchSize
// examples, in every format, are within the bound.
func TestRequestValueBound(t *testing.T) {
	const rows = 4
	_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, Config{MaxBatchSize: rows})
	repeat := func(format, sep string) string {
		return strings.TrimSuffix(strings.Repeat(format+sep, rows), sep)
	}
	multiRow := `{"a":[1.5,2],"b":3,"k":-1,"u":255,"ok":true}`
	tests := []struct {
		name, path, body string
		code             int
	}{
		{"rows", "/v1/models/m:predict", `{"instances": [` + repeat("[1]", ",") + `]}`, 200},
		{"named rows", "/v1/models/m:predict", `{"instances": [` + repeat(`{"x": [1]}`, ",") + `]}`, 200},
		{"columns", "/v1/models/m:predict", `{"inputs": {"x": [` + repeat("[1]", ",") + `]}}`, 200},
		{"several inputs, rows", "/v1/models/m:predict", `{"signature_name": "multi", "instances": [` + repeat(multiRow, ",") + `]}`, 200},
		{"several inputs, columns", "/v1/models/m:predict", `{"signature_name": "multi", "inputs": {"a": [` + repeat("[1.5, 2]", ",") +
			`], "b": [` + repeat("3", ",") + `], "k": [` + repeat("1", ",") + `], "u": [` + repeat("1", ",") + `], "ok": [` + repeat("true", ",") + `]}}`, 200},
		{"examples", "/v1/models/m:regress", `{"signature_name": "regress_flags", "context": {"u": 1}, "examples": [` +
			repeat(`{"flag": true, "n": [1, 2], "f": 0.5}`, ",") + `]}`, 200},
		{"far more values than rows hold", "/v1/models/m:predict", `{"instances": [` + strings.Repeat("[1],", 70_000) + `[1]]}`, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, hs, "POST", tc.path, tc.body)
			if res.code != tc.code {
				t.Fatalf("status %d, want %d: %.300s", res.code, tc.code, res.body)
			}
			if tc.code == 400 {
				want := fmt.Sprintf("the request has more than %d JSON values, more than 4 examples (the maximum batch size) of this model hold", 4*13+requestSlack)
				if msg := errorOf(t, res.body); msg != want {
					t.Errorf("error %q, want %q", msg, want)
				}
			}
		})
	}
}

// TestJSONValues checks the count of JSON values of one example, by shape.
func TestJSONValues(t *testing.T) {
	tests := []struct {
		shape []int
		want  int
	}{
		{nil, 1},                               // 1
		{[]int{1}, 2},                          // [1]
		{[]int{3}, 4},                          // [1,2,3]
		{[]int{2, 3}, 9},                       // [[1,2,3],[4,5,6]]
		{[]int{1 << 40, 1 << 40}, math.MaxInt}, // saturates
	}
	for _, tc := range tests {
		if got := jsonValues(tc.shape); got != tc.want {
			t.Errorf("jsonValues(%v) = %d, want %d", tc.shape, got, tc.want)
		}
	}
}

// TestBoolForFloat: a JSON boolean for a float input is refused alike by
// predict, classify and regress, as TensorFlow Serving refuses it for a
// float input; tf.Example's integer and bool features still take
// booleans and 0/1 for each other.
func TestBoolForFloat(t *testing.T) {
	_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, Config{})
	const (
		predict  = "/v1/models/m:predict"
		classify = "/v1/models/m:classify"
		regress  = "/v1/models/m:regress"
	)
	flags := func(flag, n, u, f string) string {
		return fmt.Sprintf(`{"signature_name": "regress_flags", "examples": [{"flag": %s, "n": %s, "u": %s, "f": %s}]}`, flag, n, u, f)
	}
	tests := []struct {
		name, path, body string
		code             int
		want             string // in the error
	}{
		{"predict, row", predict, `{"instances": [[true]]}`, 400, "JSON Value: true Type: True is not of expected type: float64"},
		{"predict, columnar", predict, `{"inputs": [[false]]}`, 400, "JSON Value: false Type: False is not of expected type: float64"},
		{"classify", classify, `{"signature_name": "classify", "examples": [{"x": true}]}`, 400, `example 0: feature "x": JSON Value: true Type: True is not of expected type: float64`},
		{"classify, context", classify, `{"signature_name": "classify", "context": {"x": [false]}, "examples": [{}]}`, 400, "JSON Value: false Type: False is not of expected type: float64"},
		{"regress", regress, `{"signature_name": "regress", "examples": [{"x": true}]}`, 400, "JSON Value: true Type: True is not of expected type: float64"},
		{"regress, float32", regress, flags("true", "[1, 2]", "1", "true"), 400, `feature "f": JSON Value: true Type: True is not of expected type: float32`},
		{"regress, integers and bools lenient", regress, flags("1", "[true, false]", "true", "0.5"), 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, hs, "POST", tc.path, tc.body)
			if res.code != tc.code {
				t.Fatalf("status %d, want %d: %.300s", res.code, tc.code, res.body)
			}
			if tc.code != 200 {
				if msg := errorOf(t, res.body); !strings.Contains(msg, tc.want) {
					t.Errorf("error %q does not contain %q", msg, tc.want)
				}
			}
		})
	}
}
