package serving

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

var quietLog = slog.New(slog.DiscardHandler)

// ---- reloading ----

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
	}, Config{})
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
	s, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: src.load}}, Config{})
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
// concurrently, with and without batching. Each version answers
// differently (y = 2x + 1000 v), so every answer tells the version that
// computed it: it must be one that was served while the request was in
// flight, and the answer must be that version's for the request's own x
// (a request on a closed version would get 503).
func TestServerReloadUnderLoad(t *testing.T) {
	for _, batching := range []bool{false, true} {
		t.Run(fmt.Sprintf("batching=%v", batching), func(t *testing.T) {
			const workers, requests, reloads = 8, 20, 10
			src := &versions{next: make(chan Servable, 1)}
			var all []*fakeServable
			add := func(v int64) {
				f := newFake(v, float64(1000*v))
				all = append(all, f)
				src.next <- f
			}
			add(1)
			var cfg Config
			if batching {
				cfg = Config{MaxBatchSize: 4, BatchTimeout: time.Millisecond}
			}
			s, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: src.load}}, cfg)
			// served is the newest version once its Reload returned; a
			// Reload in progress may already serve the next.
			var served atomic.Int64
			served.Store(1)
			answered := make(chan struct{}, workers*requests)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := range requests {
						x := float64(w*100 + i)
						oldest := served.Load()
						res, err := fetch(hs, "POST", "/v1/models/m:predict", instances(x))
						newest := served.Load() + 1
						answered <- struct{}{}
						ys, perr := predictionsOf(res)
						if err != nil || perr != nil || len(ys) != 1 {
							t.Errorf("x=%g: %v %v: status %d: %s", x, err, perr, res.code, res.body)
							continue
						}
						v := (ys[0] - 2*x) / 1000
						if v != math.Trunc(v) || ys[0] != 2*x+1000*v {
							t.Errorf("x=%g: y=%g is no version's answer for x", x, ys[0])
						} else if int64(v) < oldest || int64(v) > newest {
							t.Errorf("x=%g: answered by version %g, while versions %d to %d were served", x, v, oldest, newest)
						}
					}
				})
			}
			// A reload after every few answers: versions change while
			// requests are in flight.
			for v := int64(2); v <= reloads+1; v++ {
				for range workers * requests / (reloads + 1) {
					<-answered
				}
				add(v)
				if err := s.Reload(); err != nil {
					t.Fatal(err)
				}
				served.Store(v)
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
	}}}, Config{})
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
	badDtype.sigs = map[string]export.Signature{"s": {Method: "predict", Inputs: map[string]export.TensorInfo{"x": {Dtype: "string", Shape: []int{-1}}}}}
	badShape := newFake(1, 1)
	badShape.sigs = map[string]export.Signature{"s": {Method: "predict", Inputs: map[string]export.TensorInfo{"x": {Dtype: "float64", Shape: []int{-1, 0}}}}}
	one := func() []ModelConfig { return []ModelConfig{{Name: "a", Loader: fake()}} }
	x := map[string]export.TensorInfo{"x": {Dtype: "float64", Shape: []int{-1, 1}}}
	scores2 := export.Signature{Method: "classify", Inputs: x, Outputs: map[string]export.TensorInfo{"scores": {Dtype: "float32", Shape: []int{-1, 2}}}}
	floatClasses := export.Signature{Method: "classify", Inputs: x, Outputs: map[string]export.TensorInfo{"classes": {Dtype: "float32", Shape: []int{-1, 2}}}}
	predictNamed := export.Signature{Method: "predict", Inputs: x, Outputs: map[string]export.TensorInfo{"scores": {Dtype: "float32", Shape: []int{-1, 1}}}}
	withSig := func(sig export.Signature, names ...string) *fakeServable {
		f := newFake(1, 1)
		sig.ClassNames = names
		f.sigs = map[string]export.Signature{"s": sig}
		return f
	}
	tests := []struct {
		name   string
		models []ModelConfig
		cfg    Config
		want   string
		is     error
	}{
		{"no models", nil, Config{}, "no models", nil},
		{"empty name", []ModelConfig{{Name: "", Loader: fake()}}, Config{}, `model name ""`, nil},
		{"name with a colon", []ModelConfig{{Name: "a:b", Loader: fake()}}, Config{}, `model name "a:b"`, nil},
		{"name with a slash", []ModelConfig{{Name: "a/b", Loader: fake()}}, Config{}, `model name "a/b"`, nil},
		{"twice", []ModelConfig{{Name: "a", Loader: fake()}, {Name: "a", Loader: fake()}}, Config{}, `model "a" is configured twice`, nil},
		{"no source", []ModelConfig{{Name: "a"}}, Config{}, "needs a BaseDir and a Model, or a Loader", nil},
		{"base dir without a model", []ModelConfig{{Name: "a", BaseDir: t.TempDir()}}, Config{}, "set ModelConfig.Model to the *replicate.Model it was exported from", nil},
		{"loader and base dir", []ModelConfig{{Name: "a", BaseDir: t.TempDir(), Loader: fake()}}, Config{}, `model "a": has a Loader and a BaseDir or Model`, nil},
		{"loader and model", []ModelConfig{{Name: "a", Model: replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), Loader: fake()}}, Config{}, `model "a": has a Loader and a BaseDir or Model`, nil},
		{"loader error", []ModelConfig{{Name: "a", Loader: func(int64) (Servable, error) { return nil, errors.New("nope") }}}, Config{}, "nope", nil},
		{"loader without a version", []ModelConfig{{Name: "a", Loader: func(int64) (Servable, error) { return nil, nil }}}, Config{}, "no export version", export.ErrNoVersion},
		{"empty base dir", []ModelConfig{{Name: "a", BaseDir: t.TempDir(), Model: replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}})}}, Config{}, "no export version", export.ErrNoVersion},
		{"unservable dtype", []ModelConfig{{Name: "a", Loader: fixed(badDtype)}}, Config{}, `input "x" has dtype "string"`, nil},
		{"bad shape", []ModelConfig{{Name: "a", Loader: fixed(badShape)}}, Config{}, `input "x" has shape [-1 0]`, nil},
		{"class names for too few scores", []ModelConfig{{Name: "a", Loader: fixed(withSig(scores2, "cat"))}}, Config{}, `signature "s": 1 class names for 2 "scores" columns`, nil},
		{"class names of float classes", []ModelConfig{{Name: "a", Loader: fixed(withSig(floatClasses, "cat"))}}, Config{}, `"classes" output of dtype float32: want integer class indexes`, nil},
		{"class names on a predict signature", []ModelConfig{{Name: "a", Loader: fixed(withSig(predictNamed, "cat"))}}, Config{}, `class names on a predict signature`, nil},
		{"negative body limit", one(), Config{MaxBodyBytes: -1}, "max body bytes -1: must not be negative", nil},
		{"negative batch size", one(), Config{MaxBatchSize: -1}, "max batch size -1: must not be negative", nil},
		{"negative timeout", one(), Config{BatchTimeout: -1}, "batch timeout -1ns: must not be negative", nil},
		{"negative in-flight bytes", one(), Config{MaxInflightBytes: -1}, "max in-flight bytes -1: must not be negative", nil},
		{"in-flight bytes under the body limit", one(), Config{MaxBodyBytes: 100, MaxInflightBytes: 99}, "max in-flight bytes 99: must be at least the max body bytes, 100", nil},
		{"negative read header timeout", one(), Config{ReadHeaderTimeout: -1}, "read header timeout -1ns: must not be negative", nil},
		{"negative read timeout", one(), Config{ReadTimeout: -1}, "read timeout -1ns: must not be negative", nil},
		{"negative write timeout", one(), Config{WriteTimeout: -1}, "write timeout -1ns: must not be negative", nil},
		{"negative idle timeout", one(), Config{IdleTimeout: -1}, "idle timeout -1ns: must not be negative", nil},
		{"negative body read timeout", one(), Config{BodyReadTimeout: -1}, "body read timeout -1ns: must not be negative", nil},
		{"negative header bytes", one(), Config{MaxHeaderBytes: -1}, "max header bytes -1: must not be negative", nil},
		{"negative connections", one(), Config{MaxConnections: -1}, "max connections -1: must not be negative", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewServer(tc.models, tc.cfg)
			if err == nil {
				s.Close()
			}
			wanterr.Mentions(t, err, tc.want)
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v does not wrap %v", err, tc.is)
			}
		})
	}
	// A failed NewServer closes the versions it loaded.
	first := newFake(1, 1)
	_, err := NewServer([]ModelConfig{{Name: "a", Loader: fixed(first)}, {Name: "b"}}, Config{})
	if err == nil || !first.closed.Load() {
		t.Errorf("error %v, first version closed %v", err, first.closed.Load())
	}
}

// ---- configuration ----

// TestConfigDefaults checks the configuration a server runs with: a zero
// field takes its default, a set one is kept.
func TestConfigDefaults(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name string
		cfg  Config
		want Config
	}{
		{"zero value", Config{}, withTimeouts(Config{MaxBodyBytes: DefaultMaxBodyBytes, MaxBatchSize: DefaultMaxBatchSize, MaxInflightBytes: 64 << 20})},
		{"every field",
			Config{MaxBodyBytes: 64, MaxBatchSize: 8, MaxInflightBytes: 100, BatchTimeout: time.Second, MaxHeaderBytes: 6, MaxConnections: 7, ReadHeaderTimeout: 1, ReadTimeout: 2, BodyReadTimeout: 5, WriteTimeout: 3, IdleTimeout: 4, Logger: logger},
			Config{MaxBodyBytes: 64, MaxBatchSize: 8, MaxInflightBytes: 100, BatchTimeout: time.Second, MaxHeaderBytes: 6, MaxConnections: 7, ReadHeaderTimeout: 1, ReadTimeout: 2, BodyReadTimeout: 5, WriteTimeout: 3, IdleTimeout: 4, Logger: logger}},
		{"a limit without batching", Config{MaxBatchSize: 3}, withTimeouts(Config{MaxBodyBytes: DefaultMaxBodyBytes, MaxBatchSize: 3, MaxInflightBytes: 64 << 20})},
		{"in-flight bytes follow the body limit", Config{MaxBodyBytes: 100}, withTimeouts(Config{MaxBodyBytes: 100, MaxBatchSize: DefaultMaxBatchSize, MaxInflightBytes: 400})},
		{"in-flight bytes for a huge body limit", Config{MaxBodyBytes: math.MaxInt64 / 2}, withTimeouts(Config{MaxBodyBytes: math.MaxInt64 / 2, MaxBatchSize: DefaultMaxBatchSize, MaxInflightBytes: math.MaxInt64})},
		{"batching with the default batch size", Config{BatchTimeout: time.Millisecond}, withTimeouts(Config{MaxBodyBytes: DefaultMaxBodyBytes, MaxBatchSize: DefaultMaxBatchSize, MaxInflightBytes: 64 << 20, BatchTimeout: time.Millisecond})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(newFake(1, 1))}}, tc.cfg)
			got := s.cfg
			if got.Logger == nil {
				t.Fatal("no logger")
			}
			if tc.cfg.Logger == nil {
				got.Logger = nil // a logger that discards: checked by TestNilLoggerLogsNothing
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b *slog.Logger) bool { return a == b })); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if batching := s.batcher != nil; batching != (tc.want.BatchTimeout > 0) {
				t.Errorf("batching %v, want %v", batching, tc.want.BatchTimeout > 0)
			}
		})
	}
}

// withTimeouts sets c's connection limits and timeouts to their defaults.
func withTimeouts(c Config) Config {
	c.MaxHeaderBytes, c.MaxConnections = DefaultMaxHeaderBytes, DefaultMaxConnections
	c.ReadHeaderTimeout, c.ReadTimeout, c.BodyReadTimeout, c.WriteTimeout, c.IdleTimeout = DefaultReadHeaderTimeout, DefaultReadTimeout, DefaultBodyReadTimeout, DefaultWriteTimeout, DefaultIdleTimeout
	return c
}

// TestNilLogger checks that a server without a Logger serves and fails as
// one with: a failing request, a panic, a failing reload. (That the
// package never writes to slog's default logger is internal/lint's
// TestLibraryUsesNoGlobalLogger, which swaps no global state.)
func TestNilLogger(t *testing.T) {
	for _, cfg := range []Config{{}, {MaxBatchSize: 8, BatchTimeout: time.Nanosecond}} {
		s, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: func(current int64) (Servable, error) {
			if current == 0 {
				return newFake(1, 1), nil
			}
			return nil, errors.New("disk on fire")
		}}}, cfg)
		var codes []int
		for _, x := range []string{"-999", "-1001"} {
			codes = append(codes, do(t, hs, "POST", "/v1/models/m:predict", `{"instances": [[`+x+`]]}`).code)
		}
		if diff := cmp.Diff([]int{500, 500}, codes); diff != "" {
			t.Errorf("%+v: statuses (-want +got):\n%s", cfg, diff)
		}
		if err := s.Reload(); err == nil {
			t.Errorf("%+v: Reload: no error", cfg)
		}
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
	s, hs := newTestServer(t, []ModelConfig{{Name: "linreg", BaseDir: base, Model: model}}, Config{})

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

	// A label names version 1 of the base directory: it is loaded from
	// there and served beside the newest.
	_, hs2 := newTestServer(t, []ModelConfig{{Name: "linreg", BaseDir: base, Model: model, Labels: map[string]int64{"stable": 1}}}, Config{})
	res := do(t, hs2, "GET", "/v1/models/linreg", "")
	if diff := cmp.Diff([]string{"2 AVAILABLE", "1 AVAILABLE"}, statusOf(t, res)); diff != "" {
		t.Errorf("status with a label (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(line(1), predictions(t, do(t, hs2, "POST", "/v1/models/linreg/labels/stable:predict", instances(1))), approx); diff != "" {
		t.Errorf("predict on the label (-want +got):\n%s", diff)
	}
}

// classifierModel scores two classes of x: [1 - w*x, w*x] with w = 1,
// and names them with names.
func classifierModel(names []string) model.Fn {
	return func(t *towers.Scope, mode model.Mode, f model.Features, _ model.Labels, _ model.Params) (*model.Spec, error) {
		x, ok := f["x"]
		if !ok {
			return nil, errors.New("no feature x")
		}
		w := t.MustVariable("w", tensor.Float64, nil, towers.Constant(1))
		p := G.Must(G.Mul(x, w))
		scores := G.Must(G.Concat(1, G.Must(G.Sub(G.NewConstant(1.0), p)), p))
		return &model.Spec{
			Predictions:   map[string]*G.Node{"scores": scores},
			ExportOutputs: map[string]model.ExportOutput{model.DefaultServingSignature: model.ClassificationOutput{Scores: scores, ClassNames: names}},
		}, nil
	}
}

// TestServerClassNamesEndToEnd exports a classifier whose classes have
// names, serves the export, and classifies: the answer's labels are the
// names.
func TestServerClassNamesEndToEnd(t *testing.T) {
	mdl := replicate.ModelFn(classifierModel([]string{"cat", "dog"}), replicate.Config{Devices: []towers.Device{towers.CPU(0)}})
	est, err := estimator.New(mdl, estimator.RunConfig{LogEvery: -1, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	base := t.TempDir()
	if _, err := est.Export(context.Background(), base, estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1}}}, estimator.AllowUntrained()); err != nil {
		t.Fatal(err)
	}
	_, hs := newTestServer(t, []ModelConfig{{Name: "pets", BaseDir: base, Model: mdl}}, Config{})
	res := do(t, hs, "POST", "/v1/models/pets:classify", `{"examples": [{"x": 0.25}, {"x": 1}]}`)
	if diff := cmp.Diff(`{"results":[[["cat",0.75],["dog",0.25]],[["cat",0.0],["dog",1.0]]]}`, res.body); diff != "" {
		t.Errorf("status %d, answer (-want +got):\n%s", res.code, diff)
	}
}
