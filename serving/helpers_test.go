package serving

// The fakes and HTTP helpers of the package's tests.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/export"
)

// ---- fake servables ----

// fakeServable computes y = 2x + bias on signature "serving_default"
// (and regress), a few dtypes on "multi", and classes on "classify". The
// values -999, -1000 and -1001 of x make it panic, fail with a bad input
// and fail.
type fakeServable struct {
	version int64
	bias    float64
	sigs    map[string]export.Signature
	// batches, when set, receives the rows of every Run.
	batches chan int
	// entered and gate, when set, make Run signal entered and wait for
	// gate to close.
	entered chan struct{}
	gate    chan struct{}
	// closeErr is what Close returns.
	closeErr error

	closed atomic.Bool
}

func newFake(version int64, bias float64) *fakeServable {
	x := export.TensorInfo{Dtype: "float64", Shape: []int{-1, 1}}
	vec := func(dt string) export.TensorInfo { return export.TensorInfo{Dtype: dt, Shape: []int{-1}} }
	return &fakeServable{version: version, bias: bias, sigs: map[string]export.Signature{
		"serving_default": {Method: "predict", Inputs: map[string]export.TensorInfo{"x": x}, Outputs: map[string]export.TensorInfo{"y": x}},
		"multi": {Method: "predict",
			Inputs: map[string]export.TensorInfo{
				"a": {Dtype: "float32", Shape: []int{-1, 2}}, "b": vec("int64"), "k": vec("int32"), "u": vec("uint8"), "ok": vec("bool"),
			},
			Outputs: map[string]export.TensorInfo{"sum": vec("float32"), "b2": vec("int64"), "not": vec("bool")},
		},
		"classify": {Method: "classify", Inputs: map[string]export.TensorInfo{"x": x},
			Outputs: map[string]export.TensorInfo{"scores": {Dtype: "float32", Shape: []int{-1, 2}}, "classes": {Dtype: "int64", Shape: []int{-1, 2}}}},
		"classify_scores": {Method: "classify", Inputs: map[string]export.TensorInfo{"x": x},
			Outputs: map[string]export.TensorInfo{"scores": {Dtype: "float32", Shape: []int{-1, 2}}}},
		"classify_names": {Method: "classify", Inputs: map[string]export.TensorInfo{"x": x},
			Outputs:    map[string]export.TensorInfo{"scores": {Dtype: "float32", Shape: []int{-1, 2}}},
			ClassNames: []string{"cat", "dog"}},
		"classify_index": {Method: "classify", Inputs: map[string]export.TensorInfo{"x": x},
			Outputs:    map[string]export.TensorInfo{"scores": {Dtype: "float32", Shape: []int{-1, 2}}, "classes": {Dtype: "int64", Shape: []int{-1, 2}}},
			ClassNames: []string{"cat", "dog", "bird"}},
		"regress": {Method: "regress", Inputs: map[string]export.TensorInfo{"x": x}, Outputs: map[string]export.TensorInfo{"outputs": x}},
		"regress_flags": {Method: "regress",
			Inputs:  map[string]export.TensorInfo{"flag": vec("bool"), "n": {Dtype: "int32", Shape: []int{-1, 2}}, "u": vec("uint8"), "f": vec("float32")},
			Outputs: map[string]export.TensorInfo{"outputs": vec("float64")},
		},
	}}
}

func (f *fakeServable) Version() int64                          { return f.version }
func (f *fakeServable) Signatures() map[string]export.Signature { return f.sigs }

func (f *fakeServable) Close() error {
	f.closed.Store(true)
	return f.closeErr
}

func (f *fakeServable) Run(ctx context.Context, sig string, features map[string]*tensor.Dense) (map[string]*tensor.Dense, error) {
	if f.closed.Load() {
		return nil, fmt.Errorf("fake version %d: %w", f.version, export.ErrClosed)
	}
	if f.entered != nil {
		f.entered <- struct{}{}
		<-f.gate
	}
	s, ok := f.sigs[sig]
	if !ok {
		return nil, fmt.Errorf("%w %q", export.ErrUnknownSignature, sig)
	}
	rows := -1
	for name := range s.Inputs {
		t, ok := features[name]
		if !ok || (rows >= 0 && t.Shape()[0] != rows) {
			return nil, fmt.Errorf("%w: input %q", export.ErrBadInput, name)
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
			return nil, fmt.Errorf("%w: x too small", export.ErrBadInput)
		case -1001:
			return nil, errors.New("device on fire")
		}
	}
	switch sig {
	case "classify", "classify_scores", "classify_names", "classify_index":
		// classify_index: the classes, best first, are indexes 2 then 0,
		// or (for x = 7) 3, outside the class names.
		scores, classes := make([]float32, 2*rows), make([]int64, 2*rows)
		for i, v := range x {
			scores[2*i], scores[2*i+1] = float32(1-v), float32(v)
			switch {
			case sig == "classify":
				classes[2*i], classes[2*i+1] = 10, 20
			case v == 7:
				classes[2*i], classes[2*i+1] = 3, 0
			default:
				classes[2*i], classes[2*i+1] = 2, 0
			}
		}
		out := map[string]*tensor.Dense{"scores": tensor.New(tensor.WithShape(rows, 2), tensor.WithBacking(scores))}
		if sig == "classify" || sig == "classify_index" {
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

// stubServable answers every signature with the outputs out makes. Its
// one signature takes input "x" of shape inShape and dtype inDtype
// (default [-1, 1] float64).
type stubServable struct {
	method  string
	inShape []int
	inDtype string
	out     func(rows int) map[string]*tensor.Dense
}

func (f *stubServable) Version() int64 { return 1 }
func (f *stubServable) Close() error   { return nil }

func (f *stubServable) Signatures() map[string]export.Signature {
	x := export.TensorInfo{Dtype: "float64", Shape: []int{-1, 1}}
	in := x
	if f.inShape != nil {
		in = export.TensorInfo{Dtype: f.inDtype, Shape: f.inShape}
	}
	return map[string]export.Signature{"serving_default": {Method: f.method, Inputs: map[string]export.TensorInfo{"x": in}, Outputs: map[string]export.TensorInfo{"y": x}}}
}

func (f *stubServable) Run(_ context.Context, _ string, features map[string]*tensor.Dense) (map[string]*tensor.Dense, error) {
	return f.out(features["x"].Shape()[0]), nil
}

func dense[T any](shape []int, vals ...T) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(vals))
}

// ---- helpers ----

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

// newTestServer starts a server and an HTTP server for it, both closed
// when the test ends.
func newTestServer(t *testing.T, models []ModelConfig, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	s, err := NewServer(models, cfg)
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

// status returns the newest AVAILABLE version of a model's status.
func status(t *testing.T, hs *httptest.Server, model string) string {
	t.Helper()
	res := do(t, hs, "GET", "/v1/models/"+model, "")
	var st tfModelStatus
	if err := json.Unmarshal([]byte(res.body), &st); err != nil {
		t.Fatalf("status %d: %s", res.code, res.body)
	}
	for _, vs := range st.ModelVersionStatus {
		if vs.State == "AVAILABLE" {
			return vs.Version
		}
	}
	t.Fatalf("no version available: %s", res.body)
	return ""
}

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

// errorCase is a request and the error it is answered with: its status
// and a part of its message.
type errorCase struct {
	name, method, path, body string
	code                     int
	want                     string
}

// checkErrors makes each request and checks its error answer: status,
// {"error": message} as JSON, and an Allow header with a 405.
func checkErrors(t *testing.T, hs *httptest.Server, tests []errorCase) {
	t.Helper()
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

// bigServable answers "serving_default" with n zeros per example in
// output "y" (about 4n bytes of JSON), and signals each Run on entered
// and its Close by closing closed.
type bigServable struct {
	version int64
	n       int
	entered chan struct{}
	closed  chan struct{}
}

func newBig(version int64, n int) *bigServable {
	return &bigServable{version: version, n: n, entered: make(chan struct{}, 16), closed: make(chan struct{})}
}

func (b *bigServable) Version() int64 { return b.version }
func (b *bigServable) Close() error   { close(b.closed); return nil }

func (b *bigServable) Signatures() map[string]export.Signature {
	return map[string]export.Signature{"serving_default": {Method: "predict",
		Inputs:  map[string]export.TensorInfo{"x": {Dtype: "float64", Shape: []int{-1, 1}}},
		Outputs: map[string]export.TensorInfo{"y": {Dtype: "float64", Shape: []int{-1, b.n}}}}}
}

func (b *bigServable) Run(_ context.Context, _ string, features map[string]*tensor.Dense) (map[string]*tensor.Dense, error) {
	b.entered <- struct{}{}
	rows := features["x"].Shape()[0]
	return map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(rows, b.n), tensor.WithBacking(make([]float64, rows*b.n)))}, nil
}

// await waits for c, failing the test after 30 s: a guard against a
// hang, never a measure of time.
func await[T any](t *testing.T, what string, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still waiting after 30 s", what)
		panic("unreachable")
	}
}

// rawPost opens a connection to addr and writes a whole POST request of
// body to path on it, leaving the answer unread; the connection is
// closed when the test ends.
func rawPost(t *testing.T, addr, path, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	return c
}

// postOK posts body to model's method (predict, regress, classify) on hs
// and decodes the answer into into; an answer other than 200 OK fails the
// test.
func postOK(t *testing.T, hs *httptest.Server, model, method, body string, into any) {
	t.Helper()
	res := do(t, hs, "POST", "/v1/models/"+model+":"+method, body)
	if res.code != http.StatusOK {
		t.Fatalf("%s: status %d: %s", method, res.code, res.body)
	}
	if err := json.Unmarshal([]byte(res.body), into); err != nil {
		t.Fatalf("%s: %v: %s", method, err, res.body)
	}
}

// checkServedAsPredict asks model on hs predict with the rows of
// instances and the columns of columnar, and regress and classify (the
// signatures "regress" and "classify") with examples, a JSON list of
// tf.Examples: every answer must be want, Estimator.Predict's answer on
// the same rows (classify's: the scores 1-p and p of two unnamed
// classes).
func checkServedAsPredict(t *testing.T, hs *httptest.Server, model, instances, columnar, examples string, want []float64) {
	t.Helper()
	flat := func(rows [][]float64) []float64 {
		var out []float64
		for _, r := range rows {
			out = append(out, r...)
		}
		return out
	}
	var rows struct{ Predictions [][]float64 }
	postOK(t, hs, model, "predict", instances, &rows)
	if diff := cmp.Diff(want, flat(rows.Predictions)); diff != "" {
		t.Errorf("predict, instances (-Estimator.Predict +served):\n%s", diff)
	}
	var cols struct{ Outputs [][]float64 }
	postOK(t, hs, model, "predict", columnar, &cols)
	if diff := cmp.Diff(want, flat(cols.Outputs)); diff != "" {
		t.Errorf("predict, inputs (-Estimator.Predict +served):\n%s", diff)
	}
	var reg struct{ Results []float64 }
	postOK(t, hs, model, "regress", `{"signature_name": "regress", "examples": `+examples+`}`, &reg)
	if diff := cmp.Diff(want, reg.Results); diff != "" {
		t.Errorf("regress (-Estimator.Predict +served):\n%s", diff)
	}
	var wantScores [][][]any
	for _, p := range want {
		wantScores = append(wantScores, [][]any{{"", 1 - p}, {"", p}})
	}
	var cls struct{ Results [][][]any }
	postOK(t, hs, model, "classify", `{"signature_name": "classify", "examples": `+examples+`}`, &cls)
	if diff := cmp.Diff(wantScores, cls.Results); diff != "" {
		t.Errorf("classify (-Estimator.Predict +served):\n%s", diff)
	}
}
