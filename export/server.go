package export

// The HTTP server: TensorFlow Serving's REST API over the latest version of
// each configured model, with hot reloading and optional request batching.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/replicate"
)

// Servable is what a Server serves: one loaded version of a model.
// *Predictor is one; tests and other model sources may provide their own.
// Its methods must be safe for concurrent use.
type Servable interface {
	// Version is the version number, a positive integer.
	Version() int64
	// Signatures returns the signatures by key.
	Signatures() map[string]Signature
	// Run computes a signature on a batch of features (every input of the
	// signature, with its dtype, the batch along dimension 0) and returns
	// the signature's outputs by name, batch along dimension 0. Errors
	// about the features wrap ErrBadInput.
	Run(ctx context.Context, signature string, features map[string]*tensor.Dense) (map[string]*tensor.Dense, error)
	// Close releases the version; the server calls it once no request
	// uses the version any more.
	Close() error
}

var _ Servable = (*Predictor)(nil)

// ModelConfig names one model a Server serves and where its versions come
// from.
type ModelConfig struct {
	// Name is the model's name in URLs: /v1/models/{Name}. It must not
	// be empty nor contain '/' or ':'.
	Name string
	// BaseDir holds the model's export versions (<BaseDir>/<version>/, as
	// Estimator.Export writes them); the newest is served.
	BaseDir string
	// Model is the model function the versions are loaded into, with the
	// devices it is replicated over (see Load).
	Model *replicate.Model
	// Loader, when set, replaces loading from BaseDir: it is called with
	// the version being served (0 when there is none yet) and returns the
	// version to serve instead, or nil and no error to keep the current
	// one. With Loader set, BaseDir and Model are not used.
	Loader func(current int64) (Servable, error)
}

// DefaultMaxBodyBytes is the default limit on a request body.
const DefaultMaxBodyBytes = 16 << 20

// ServerOption adjusts NewServer.
type ServerOption func(*serverOptions)

type serverOptions struct {
	maxBodyBytes int64
	maxBatchSize int
	batchTimeout time.Duration
	log          *slog.Logger
}

// WithMaxBodyBytes limits request bodies to n bytes (default
// DefaultMaxBodyBytes, 16 MiB); a larger body is answered with 413
// Request Entity Too Large.
func WithMaxBodyBytes(n int64) ServerOption { return func(o *serverOptions) { o.maxBodyBytes = n } }

// WithMaxBatchSize limits the examples of one request to n: a request
// with more rows (instances, examples or columnar batch) is answered with
// 400 Bad Request. With WithBatchTimeout it is also the most rows one
// merged batch holds. 0, the default, sets no limit.
func WithMaxBatchSize(n int) ServerOption { return func(o *serverOptions) { o.maxBatchSize = n } }

// WithBatchTimeout turns on request batching (it needs WithMaxBatchSize):
// requests for the same model version and signature that arrive together
// are merged into one Run of the servable, and each gets its own rows of
// the outputs back. A batch is run as soon as it holds MaxBatchSize rows,
// or d after its first request arrived, whichever comes first; a request
// that does not fit in the open batch starts the next one, and a request
// of MaxBatchSize rows runs alone at once. d is the most latency batching
// adds to a request. 0, the default, runs every request on its own.
func WithBatchTimeout(d time.Duration) ServerOption {
	return func(o *serverOptions) { o.batchTimeout = d }
}

// WithServerLogger logs to l (default slog.Default()): new versions,
// reload failures, and every answer with a 5xx status, panics with their
// stack.
func WithServerLogger(l *slog.Logger) ServerOption { return func(o *serverOptions) { o.log = l } }

// Server is an http.Handler speaking TensorFlow Serving's REST API
// (https://www.tensorflow.org/tfx/serving/api_rest) for the newest version
// of each configured model:
//
//	GET  /v1/models/{name}[/versions/{v}]            model status
//	GET  /v1/models/{name}[/versions/{v}]/metadata   signatures (SignatureDefs)
//	POST /v1/models/{name}[/versions/{v}]:predict    {"signature_name", "instances" | "inputs"}
//	POST /v1/models/{name}[/versions/{v}]:classify   {"signature_name", "context", "examples"}
//	POST /v1/models/{name}[/versions/{v}]:regress    {"signature_name", "context", "examples"}
//
// A request without signature_name uses "serving_default". Predict takes
// the row format ("instances": one entry per example, a value or nested
// list for a single-input signature, or an object naming every input) or
// the columnar format ("inputs": a value for a single input, or an object
// of one batch per input) and answers in the same format ("predictions",
// one entry per example, an object when there are several outputs;
// "outputs"). Values take the input's dtype (integers refuse decimals,
// floats refuse integers they cannot hold exactly; NaN, Infinity and
// -Infinity are accepted and written, as TensorFlow Serving does); nested
// lists must be rectangular with the signature's per-example shape.
// Classify and regress take tf.Example-like objects, each feature a value
// or a flat list of one example's values in row-major order (booleans and
// 0/1 stand for each other), a "context" holding features shared by every
// example; they answer {"results": ...} (the key TensorFlow Serving
// writes; its documentation says "result"): per example, [label, score]
// pairs, labels from the "classes" output or else the class index; or one
// value from the "outputs" output.
//
// Errors are answered with {"error": message} and TensorFlow Serving's
// status: 400 for malformed JSON, wrong shapes or dtypes, missing inputs,
// an unknown signature or too many rows; 404 for an unknown model or
// version; 405 for a wrong method; 413 for a body over the limit; 503
// once closed; 500 for the server's own failures and panics (logged).
//
// Requests are served concurrently, each version's Run called in parallel
// (see WithBatchTimeout to merge small requests). Reload and Watch swap in
// new versions while serving.
type Server struct {
	opts    serverOptions
	log     *slog.Logger
	names   []string
	models  map[string]*servedModel
	batcher *batcher // nil without request batching

	lifeMu sync.Mutex // serializes Reload and Close
	closed atomic.Bool
	done   chan struct{}  // closed by Close
	drains sync.WaitGroup // retired versions waiting for their last request
}

// servedModel is one configured model and the version it serves.
type servedModel struct {
	name string
	load func(current int64) (Servable, error)
	mu   sync.RWMutex
	cur  *servedVersion // nil once the server is closed
}

// servedVersion is one loaded version. refs counts the requests and
// batches using it: it is closed when it has been replaced and refs drops
// to zero. refs.Add happens under the model's read lock while the version
// is current, so it happens before the Wait that follows its replacement.
type servedVersion struct {
	s       Servable
	version int64
	sigs    map[string]Signature
	inputs  map[string]map[string]inputSpec // by signature, then input
	refs    sync.WaitGroup
}

// inputSpec is one input of a signature: its dtype name and the shape of
// one example.
type inputSpec struct {
	dtype string
	shape []int
}

func newServedVersion(s Servable) (*servedVersion, error) {
	v := &servedVersion{s: s, version: s.Version(), sigs: s.Signatures(), inputs: map[string]map[string]inputSpec{}}
	if v.version <= 0 {
		return nil, fmt.Errorf("version %d is not a positive integer", v.version)
	}
	for _, key := range slices.Sorted(maps.Keys(v.sigs)) {
		sig := v.sigs[key]
		if len(sig.Inputs) == 0 {
			return nil, fmt.Errorf("signature %q has no inputs", key)
		}
		v.inputs[key] = map[string]inputSpec{}
		for name, ti := range sig.Inputs {
			if _, ok := servedDtypes[ti.Dtype]; !ok {
				return nil, fmt.Errorf("signature %q: input %q has dtype %q, which cannot be served", key, name, ti.Dtype)
			}
			if len(ti.Shape) == 0 || slices.ContainsFunc(ti.Shape[1:], func(d int) bool { return d < 1 }) {
				return nil, fmt.Errorf("signature %q: input %q has shape %v: want the batch dimension first, then positive dimensions", key, name, ti.Shape)
			}
			v.inputs[key][name] = inputSpec{dtype: ti.Dtype, shape: slices.Clone(ti.Shape[1:])}
		}
	}
	return v, nil
}

func (v *servedVersion) release() { v.refs.Done() }

// acquire returns the current version with a reference taken, or nil once
// the server is closed.
func (m *servedModel) acquire() *servedVersion {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.cur != nil {
		m.cur.refs.Add(1)
	}
	return m.cur
}

func (m *servedModel) currentVersion() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.cur == nil {
		return 0
	}
	return m.cur.version
}

// NewServer loads the newest version of every model and returns a server
// for them. Call Reload (or Watch) to pick up new versions, and Close when
// done.
func NewServer(configs []ModelConfig, opts ...ServerOption) (*Server, error) {
	o := serverOptions{maxBodyBytes: DefaultMaxBodyBytes, log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case o.maxBodyBytes <= 0:
		return nil, fmt.Errorf("export: new server: max body bytes %d: must be positive", o.maxBodyBytes)
	case o.maxBatchSize < 0:
		return nil, fmt.Errorf("export: new server: max batch size %d: must not be negative", o.maxBatchSize)
	case o.batchTimeout < 0:
		return nil, fmt.Errorf("export: new server: batch timeout %v: must not be negative", o.batchTimeout)
	case o.batchTimeout > 0 && o.maxBatchSize == 0:
		return nil, fmt.Errorf("export: new server: request batching (batch timeout %v) needs a max batch size", o.batchTimeout)
	case o.log == nil:
		return nil, errors.New("export: new server: nil logger")
	case len(configs) == 0:
		return nil, errors.New("export: new server: no models")
	}
	s := &Server{opts: o, log: o.log, models: map[string]*servedModel{}, done: make(chan struct{})}
	if o.batchTimeout > 0 {
		s.batcher = newBatcher(o.maxBatchSize, o.batchTimeout)
	}
	fail := func(err error) (*Server, error) {
		for _, m := range s.models {
			if m.cur != nil {
				m.cur.s.Close()
			}
		}
		return nil, fmt.Errorf("export: new server: %w", err)
	}
	for _, c := range configs {
		if c.Name == "" || strings.ContainsAny(c.Name, "/:") {
			return fail(fmt.Errorf("model name %q: must be non-empty without '/' or ':'", c.Name))
		}
		if _, dup := s.models[c.Name]; dup {
			return fail(fmt.Errorf("model %q is configured twice", c.Name))
		}
		m := &servedModel{name: c.Name, load: c.Loader}
		if m.load == nil {
			if c.BaseDir == "" || c.Model == nil {
				return fail(fmt.Errorf("model %q: needs a BaseDir and a Model, or a Loader", c.Name))
			}
			m.load = dirLoader(c)
		}
		sv, err := m.load(0)
		if err == nil && sv == nil {
			err = ErrNoVersion
		}
		if err != nil {
			return fail(fmt.Errorf("model %q: %w", c.Name, err))
		}
		v, err := newServedVersion(sv)
		if err != nil {
			sv.Close()
			return fail(fmt.Errorf("model %q: %w", c.Name, err))
		}
		m.cur = v
		s.models[c.Name] = m
		s.names = append(s.names, c.Name)
		s.log.Info("serving model", "model", c.Name, "version", v.version)
	}
	slices.Sort(s.names)
	return s, nil
}

// dirLoader loads c's versions from its base directory: the newest, when
// it is not the one served.
func dirLoader(c ModelConfig) func(int64) (Servable, error) {
	return func(current int64) (Servable, error) {
		if current == 0 {
			p, err := LoadLatest(c.BaseDir, c.Model)
			if err != nil {
				return nil, err
			}
			return p, nil
		}
		vs, err := estimator.Versions(c.BaseDir)
		if err != nil {
			return nil, err
		}
		if len(vs) == 0 || vs[len(vs)-1] == current {
			return nil, nil // nothing newer; a base dir emptied by mistake keeps the current version
		}
		p, err := Load(filepath.Join(c.BaseDir, strconv.FormatInt(vs[len(vs)-1], 10)), c.Model)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

// Reload looks for a new version of every model (the newest in its base
// directory, or what its Loader returns) and swaps it in atomically:
// requests that started before finish on the old version, which is closed
// once the last of them is done (in the background; Close waits for it).
// A version that fails to load leaves the model on its current version;
// the errors are joined.
func (s *Server) Reload() error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.closed.Load() {
		return errors.New("export: reload: the server is closed")
	}
	var errs []error
	for _, name := range s.names {
		m := s.models[name]
		cur := m.currentVersion()
		sv, err := m.load(cur)
		if err != nil {
			errs = append(errs, fmt.Errorf("export: reload model %q: %w", name, err))
			continue
		}
		if sv == nil {
			continue
		}
		v, err := newServedVersion(sv)
		if err == nil && v.version == cur {
			err = fmt.Errorf("the loader returned version %d, the one served", cur)
		}
		if err != nil {
			sv.Close()
			errs = append(errs, fmt.Errorf("export: reload model %q: %w", name, err))
			continue
		}
		m.mu.Lock()
		old := m.cur
		m.cur = v
		m.mu.Unlock()
		s.log.Info("serving model", "model", name, "version", v.version, "previous", cur)
		s.drains.Add(1)
		go func() {
			defer s.drains.Done()
			old.refs.Wait()
			if err := old.s.Close(); err != nil {
				s.log.Error("closing a replaced model version", "model", name, "version", old.version, "error", err)
			}
		}()
	}
	for _, err := range errs {
		s.log.Error("reload", "error", err)
	}
	return errors.Join(errs...)
}

// Watch calls Reload every interval until ctx is done or the server is
// closed; it logs reload errors and keeps serving the current versions.
func (s *Server) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-t.C:
			_ = s.Reload() // logged
		}
	}
}

// Close stops serving (requests then get 503 Service Unavailable), runs
// the batches waiting, waits for the requests in flight and closes every
// version. It returns the versions' Close errors.
func (s *Server) Close() error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	close(s.done)
	if s.batcher != nil {
		s.batcher.close()
	}
	var errs []error
	for _, name := range s.names {
		m := s.models[name]
		m.mu.Lock()
		v := m.cur
		m.cur = nil
		m.mu.Unlock()
		if v == nil {
			continue
		}
		v.refs.Wait()
		if err := v.s.Close(); err != nil {
			errs = append(errs, fmt.Errorf("export: close model %q version %d: %w", name, v.version, err))
		}
	}
	s.drains.Wait()
	return errors.Join(errs...)
}

// ---- HTTP ----

var (
	runPathRE    = regexp.MustCompile(`(?i)^/v1/models/([^/:]+)(?:/versions/(\d+))?:(classify|regress|predict)$`)
	statusPathRE = regexp.MustCompile(`(?i)^/v1/models(?:/([^/:]+))?(?:/versions/(\d+))?(/metadata)?$`)
)

// httpError is an error with the HTTP status it is answered with.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func badRequestf(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// within prefixes a 400 error's message with where it happened.
func within(err error, format string, args ...any) error {
	var he *httpError
	if errors.As(err, &he) {
		return &httpError{he.code, fmt.Sprintf(format, args...) + he.msg}
	}
	return err
}

// panicError is a panic recovered from a servable's Run.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("internal error: panic: %v", e.value) }

// statusClientClosedRequest is what TensorFlow Serving answers a cancelled
// request with.
const statusClientClosedRequest = 499

// errorStatus returns the HTTP status err is answered with.
func errorStatus(err error) int {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he.code
	case errors.Is(err, ErrBadInput), errors.Is(err, ErrUnknownSignature):
		return http.StatusBadRequest
	case errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable
	case errors.Is(err, context.Canceled):
		return statusClientClosedRequest
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// statusWriter notes whether the response was started.
type statusWriter struct {
	http.ResponseWriter
	started bool
}

func (w *statusWriter) WriteHeader(code int) {
	w.started = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ServeHTTP answers one request of the REST API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if p == http.ErrAbortHandler {
			panic(p)
		}
		msg := fmt.Sprintf("internal error: panic: %v", p)
		s.log.Error("serving a request failed", "method", r.Method, "path", r.URL.Path, "status", http.StatusInternalServerError, "error", msg, "stack", string(debug.Stack()))
		if !sw.started {
			writeJSON(sw, http.StatusInternalServerError, errorBody(msg))
		}
	}()
	if err := s.route(sw, r); err != nil {
		s.fail(sw, r, err)
	}
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := errorStatus(err)
	if code >= 500 {
		attrs := []any{"method", r.Method, "path", r.URL.Path, "status", code, "error", err.Error()}
		var pe *panicError
		if errors.As(err, &pe) {
			attrs = append(attrs, "stack", string(pe.stack))
		}
		s.log.Error("serving a request failed", attrs...)
	}
	writeJSON(w, code, errorBody(err.Error()))
}

func errorBody(msg string) []byte {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return b
}

func writeJSON(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	w.Write(body)
}

func (s *Server) route(w *statusWriter, r *http.Request) error {
	path := r.URL.Path
	if m := runPathRE.FindStringSubmatch(path); m != nil {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			return &httpError{http.StatusMethodNotAllowed, fmt.Sprintf("Method %s is not allowed for %s: use POST", r.Method, path)}
		}
		return s.serveRun(w, r, m[1], m[2], strings.ToLower(m[3]))
	}
	if m := statusPathRE.FindStringSubmatch(path); m != nil {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			return &httpError{http.StatusMethodNotAllowed, fmt.Sprintf("Method %s is not allowed for %s: use GET", r.Method, path)}
		}
		if m[1] == "" {
			return badRequestf("Missing model name in request.")
		}
		if m[3] != "" {
			return s.serveMetadata(w, m[1], m[2])
		}
		return s.serveStatus(w, m[1], m[2])
	}
	if len(path) >= 4 && strings.EqualFold(path[:4], "/v1/") {
		return badRequestf("Malformed request: %s %s", r.Method, path)
	}
	return &httpError{http.StatusNotFound, fmt.Sprintf("Not found: %s %s", r.Method, path)}
}

// acquire finds a model and its served version and takes a reference on
// it; versionStr is the version the URL asks for, "" for the latest.
// forStatus picks the status API's error messages.
func (s *Server) acquire(name, versionStr string, forStatus bool) (*servedVersion, error) {
	var want int64
	specific := versionStr != ""
	if specific {
		v, err := strconv.ParseInt(versionStr, 10, 64)
		if err != nil {
			return nil, badRequestf("Failed to convert version: %s to numeric.", versionStr)
		}
		want = v
	}
	if s.closed.Load() {
		return nil, &httpError{http.StatusServiceUnavailable, "the server is closed"}
	}
	notFound := func() error {
		switch {
		case forStatus && !specific:
			return &httpError{http.StatusNotFound, fmt.Sprintf("Could not find any versions of model %s", name)}
		case forStatus:
			return &httpError{http.StatusNotFound, fmt.Sprintf("Could not find version %d of model %s", want, name)}
		case !specific:
			return &httpError{http.StatusNotFound, fmt.Sprintf("Servable not found for request: Latest(%s)", name)}
		}
		return &httpError{http.StatusNotFound, fmt.Sprintf("Servable not found for request: Specific(%s, %d)", name, want)}
	}
	m, ok := s.models[name]
	if !ok {
		return nil, notFound()
	}
	v := m.acquire()
	if v == nil {
		return nil, &httpError{http.StatusServiceUnavailable, "the server is closed"}
	}
	if specific && v.version != want {
		v.release()
		return nil, notFound()
	}
	return v, nil
}

// ---- model status and metadata ----

type tfStatus struct {
	ErrorCode    string `json:"error_code"`
	ErrorMessage string `json:"error_message"`
}

type tfVersionStatus struct {
	Version string   `json:"version"`
	State   string   `json:"state"`
	Status  tfStatus `json:"status"`
}

type tfModelStatus struct {
	ModelVersionStatus []tfVersionStatus `json:"model_version_status"`
}

func (s *Server) serveStatus(w http.ResponseWriter, name, versionStr string) error {
	v, err := s.acquire(name, versionStr, true)
	if err != nil {
		return err
	}
	defer v.release()
	body, _ := json.Marshal(tfModelStatus{ModelVersionStatus: []tfVersionStatus{{
		Version: strconv.FormatInt(v.version, 10),
		State:   "AVAILABLE",
		Status:  tfStatus{ErrorCode: "OK", ErrorMessage: ""},
	}}})
	writeJSON(w, http.StatusOK, body)
	return nil
}

type tfDim struct {
	Size string `json:"size"`
	Name string `json:"name"`
}

type tfTensorShape struct {
	Dim         []tfDim `json:"dim"`
	UnknownRank bool    `json:"unknown_rank"`
}

type tfTensorInfo struct {
	Dtype       string        `json:"dtype"`
	TensorShape tfTensorShape `json:"tensor_shape"`
	Name        string        `json:"name"`
}

type tfSignatureDef struct {
	Inputs     map[string]tfTensorInfo `json:"inputs"`
	Outputs    map[string]tfTensorInfo `json:"outputs"`
	MethodName string                  `json:"method_name"`
	Defaults   map[string]any          `json:"defaults"`
}

type tfModelSpec struct {
	Name          string `json:"name"`
	SignatureName string `json:"signature_name"`
	Version       string `json:"version"`
}

type tfSignatureDefMap struct {
	SignatureDef map[string]tfSignatureDef `json:"signature_def"`
}

type tfModelMetadata struct {
	ModelSpec tfModelSpec `json:"model_spec"`
	Metadata  struct {
		SignatureDef tfSignatureDefMap `json:"signature_def"`
	} `json:"metadata"`
}

func tensorInfos(m map[string]TensorInfo) map[string]tfTensorInfo {
	out := make(map[string]tfTensorInfo, len(m))
	for name, ti := range m {
		dt := "DT_INVALID"
		if d, ok := servedDtypes[ti.Dtype]; ok {
			dt = d.tf
		}
		dims := make([]tfDim, len(ti.Shape))
		for i, d := range ti.Shape {
			dims[i] = tfDim{Size: strconv.Itoa(d)}
		}
		out[name] = tfTensorInfo{Dtype: dt, TensorShape: tfTensorShape{Dim: dims}, Name: name}
	}
	return out
}

func (s *Server) serveMetadata(w http.ResponseWriter, name, versionStr string) error {
	v, err := s.acquire(name, versionStr, false)
	if err != nil {
		return err
	}
	defer v.release()
	var md tfModelMetadata
	md.ModelSpec = tfModelSpec{Name: name, Version: strconv.FormatInt(v.version, 10)}
	md.Metadata.SignatureDef.SignatureDef = map[string]tfSignatureDef{}
	for key, sig := range v.sigs {
		md.Metadata.SignatureDef.SignatureDef[key] = tfSignatureDef{
			Inputs:     tensorInfos(sig.Inputs),
			Outputs:    tensorInfos(sig.Outputs),
			MethodName: "tensorflow/serving/" + sig.Method,
			Defaults:   map[string]any{},
		}
	}
	body, err := json.Marshal(md)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// ---- predict, classify, regress ----

// readBody reads the request body up to the limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := s.opts.maxBodyBytes
	tooLarge := &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than the limit of %d bytes", limit)}
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge
	case err != nil:
		return nil, badRequestf("reading the request body: %v", err)
	}
	return body, nil
}

func (s *Server) serveRun(w *statusWriter, r *http.Request, name, versionStr, method string) error {
	// The body first: a slow upload does not hold a version.
	body, err := s.readBody(w.ResponseWriter, r)
	if err != nil {
		return err
	}
	v, err := s.acquire(name, versionStr, false)
	if err != nil {
		return err
	}
	defer v.release()
	doc, err := parseJSON(body)
	if err != nil {
		return err
	}
	req, ok := doc.(map[string]any)
	if !ok {
		return badRequestf("JSON Value: %s Is not object", jsonText(doc))
	}
	sigName := model.DefaultServingSignature
	if sn, ok := req["signature_name"]; ok {
		str, ok := sn.(string)
		if !ok {
			return badRequestf("JSON Value: %s not formatted correctly. 'signature_name' key must be a string value.", jsonText(sn))
		}
		if str != "" {
			sigName = str
		}
	}
	sig, ok := v.sigs[sigName]
	if !ok {
		return badRequestf("Serving signature name: %q not found in signature def (the model has %q)", sigName, slices.Sorted(maps.Keys(v.sigs)))
	}
	var (
		features map[string]*tensor.Dense
		rows     int
		columnar bool
	)
	switch method {
	case "predict":
		features, rows, columnar, err = predictFeatures(req, v.inputs[sigName])
	default:
		if sig.Method != method {
			return badRequestf("Expected %s signature method_name to be tensorflow/serving/%s. Was: tensorflow/serving/%s (signature %q)", method, method, sig.Method, sigName)
		}
		features, rows, err = exampleFeatures(req, method, v.inputs[sigName])
	}
	if err != nil {
		return err
	}
	if max := s.opts.maxBatchSize; max > 0 && rows > max {
		return badRequestf("the request has %d examples, more than the maximum batch size %d", rows, max)
	}
	outs, err := s.run(r.Context(), v, sigName, features, rows)
	if err != nil {
		return err
	}
	if err := checkOutputs(outs, rows); err != nil {
		return err
	}
	var out jsonOut
	switch {
	case method == "classify":
		err = writeClassify(&out, outs, rows)
	case method == "regress":
		err = writeRegress(&out, outs, rows)
	case columnar:
		writeColumns(&out, outs)
	default:
		writeRows(&out, outs, rows)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out.Bytes())
	return nil
}

// run computes a signature, through the batcher when batching is on.
// Without batching a panic of the servable goes up to ServeHTTP.
func (s *Server) run(ctx context.Context, v *servedVersion, sig string, features map[string]*tensor.Dense, rows int) (map[string]*tensor.Dense, error) {
	if s.batcher != nil && rows < s.opts.maxBatchSize {
		return s.batcher.submit(ctx, batchKey{v: v, sig: sig}, features, rows)
	}
	return v.s.Run(ctx, sig, features)
}

// predictFeatures reads a predict request's features, in row
// ("instances") or columnar ("inputs") format.
func predictFeatures(req map[string]any, inputs map[string]inputSpec) (features map[string]*tensor.Dense, rows int, columnar bool, err error) {
	instances, hasInstances := req["instances"]
	columns, hasInputs := req["inputs"]
	switch {
	case hasInstances && hasInputs:
		return nil, 0, false, badRequestf("Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist")
	case hasInstances:
		features, rows, err = rowFeatures(instances, inputs)
		return features, rows, false, err
	case hasInputs:
		features, rows, err = columnFeatures(columns, inputs)
		return features, rows, true, err
	}
	return nil, 0, false, badRequestf("Missing 'inputs' or 'instances' key")
}

func isObject(v any) bool {
	_, ok := v.(map[string]any)
	return ok
}

// checkNames checks that an object names exactly the inputs.
func checkNames(obj map[string]any, inputs map[string]inputSpec, where string) error {
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		if _, ok := obj[name]; !ok {
			return badRequestf("%smissing input %q (the signature takes %q)", where, name, slices.Sorted(maps.Keys(inputs)))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(obj)) {
		if _, ok := inputs[name]; !ok {
			return badRequestf("%sunknown input %q (the signature takes %q)", where, name, slices.Sorted(maps.Keys(inputs)))
		}
	}
	return nil
}

// newColumns makes an empty column for every input.
func newColumns(inputs map[string]inputSpec) (map[string]column, error) {
	cols := map[string]column{}
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		col, err := newColumn(inputs[name].dtype)
		if err != nil {
			return nil, err
		}
		cols[name] = col
	}
	return cols, nil
}

func describe(name string, in inputSpec) string {
	return fmt.Sprintf("input %q (%s, shape %v): ", name, in.dtype, append([]int{-1}, in.shape...))
}

// rowFeatures reads the "instances" of a predict request.
func rowFeatures(instances any, inputs map[string]inputSpec) (map[string]*tensor.Dense, int, error) {
	list, ok := instances.([]any)
	if !ok {
		return nil, 0, badRequestf("Expecting 'instances' to be a list, got %s", jsonText(instances))
	}
	if len(list) == 0 {
		return nil, 0, badRequestf("No values in 'instances' array")
	}
	names := slices.Sorted(maps.Keys(inputs))
	objects := isObject(list[0])
	if !objects && len(names) > 1 {
		return nil, 0, badRequestf("'instances' is a plain list, but the signature takes several inputs %q: each instance must be an object with one entry per input", names)
	}
	cols, err := newColumns(inputs)
	if err != nil {
		return nil, 0, err
	}
	for i, inst := range list {
		if objects {
			obj, ok := inst.(map[string]any)
			if !ok {
				return nil, 0, badRequestf("Expecting object but got %s at item %d of 'instances'", jsonTypeName(inst), i)
			}
			if err := checkNames(obj, inputs, fmt.Sprintf("instance %d: ", i)); err != nil {
				return nil, 0, err
			}
			for _, name := range names {
				if err := appendNested(cols[name], obj[name], inputs[name].shape, 0); err != nil {
					return nil, 0, within(err, "instance %d: %s", i, describe(name, inputs[name]))
				}
			}
			continue
		}
		if isObject(inst) {
			return nil, 0, badRequestf("Expecting value/list but got object at item %d of 'instances'", i)
		}
		if err := appendNested(cols[names[0]], inst, inputs[names[0]].shape, 0); err != nil {
			return nil, 0, within(err, "instance %d: %s", i, describe(names[0], inputs[names[0]]))
		}
	}
	features := map[string]*tensor.Dense{}
	for _, name := range names {
		features[name] = cols[name].dense(append([]int{len(list)}, inputs[name].shape...))
	}
	return features, len(list), nil
}

// columnFeatures reads the "inputs" of a predict request.
func columnFeatures(columns any, inputs map[string]inputSpec) (map[string]*tensor.Dense, int, error) {
	names := slices.Sorted(maps.Keys(inputs))
	values := map[string]any{}
	if obj, ok := columns.(map[string]any); ok {
		if err := checkNames(obj, inputs, "'inputs': "); err != nil {
			return nil, 0, err
		}
		values = obj
	} else {
		if len(names) > 1 {
			return nil, 0, badRequestf("'inputs' is a plain value/list, but the signature takes several inputs %q: 'inputs' must be an object with one entry per input", names)
		}
		values[names[0]] = columns
	}
	rows, first := -1, ""
	features := map[string]*tensor.Dense{}
	for _, name := range names {
		in := inputs[name]
		list, ok := values[name].([]any)
		if !ok {
			return nil, 0, badRequestf("%swant a list with one entry per example, got %s", describe(name, in), jsonText(values[name]))
		}
		if len(list) == 0 {
			return nil, 0, badRequestf("%sthe batch is empty", describe(name, in))
		}
		if rows >= 0 && len(list) != rows {
			return nil, 0, badRequestf("input %q has %d examples, input %q has %d: every input needs the same batch", name, len(list), first, rows)
		}
		rows, first = len(list), name
		col, err := newColumn(in.dtype)
		if err != nil {
			return nil, 0, err
		}
		shape := append([]int{rows}, in.shape...)
		if err := appendNested(col, list, shape, 0); err != nil {
			return nil, 0, within(err, "%s", describe(name, in))
		}
		features[name] = col.dense(shape)
	}
	return features, rows, nil
}

// exampleFeatures reads the "context" and "examples" of a classify or
// regress request: each feature a value or flat list holding one
// example's values in row-major order.
func exampleFeatures(req map[string]any, method string, inputs map[string]inputSpec) (map[string]*tensor.Dense, int, error) {
	var shared map[string]any // the context
	if c, ok := req["context"]; ok {
		obj, ok := c.(map[string]any)
		if !ok {
			return nil, 0, badRequestf("'context': Example must be JSON object but got JSON %s", jsonTypeName(c))
		}
		shared = obj
	}
	ex, ok := req["examples"]
	if !ok {
		return nil, 0, badRequestf("When method is %s, key 'examples' is expected and was not found", method)
	}
	examples, ok := ex.([]any)
	if !ok {
		return nil, 0, badRequestf("Expecting 'examples' value to be an list/array, got %s", jsonText(ex))
	}
	if len(examples) == 0 {
		return nil, 0, badRequestf("'examples' value is an empty array")
	}
	names := slices.Sorted(maps.Keys(inputs))
	cols, err := newColumns(inputs)
	if err != nil {
		return nil, 0, err
	}
	for i, e := range examples {
		obj, ok := e.(map[string]any)
		if !ok {
			return nil, 0, badRequestf("example %d: Example must be JSON object but got JSON %s", i, jsonTypeName(e))
		}
		for _, name := range names {
			in := inputs[name]
			val, inExample := obj[name]
			cval, inContext := shared[name]
			switch {
			case inExample && inContext:
				return nil, 0, badRequestf("example %d: feature %q is in the context too: a feature of the context must not appear in examples", i, name)
			case inContext:
				val = cval
			case !inExample:
				return nil, 0, badRequestf("example %d: Feature: %s (data type: %s) is required but could not be found.", i, name, in.dtype)
			}
			vals, ok := val.([]any)
			if !ok {
				vals = []any{val}
			}
			if want := numElements(in.shape); len(vals) != want {
				return nil, 0, badRequestf("example %d: feature %q has %d values, want %d (shape %v, row-major)", i, name, len(vals), want, in.shape)
			}
			for _, x := range vals {
				if _, isList := x.([]any); isList || isObject(x) || x == nil {
					return nil, 0, badRequestf("example %d: Feature: %s has element with unexpected JSON type: %s", i, name, jsonTypeName(x))
				}
				if err := cols[name].add(x, true); err != nil {
					return nil, 0, within(err, "example %d: feature %q: ", i, name)
				}
			}
		}
	}
	features := map[string]*tensor.Dense{}
	for _, name := range names {
		features[name] = cols[name].dense(append([]int{len(examples)}, inputs[name].shape...))
	}
	return features, len(examples), nil
}

// checkOutputs checks that every output has the batch's rows along
// dimension 0.
func checkOutputs(outs map[string]*tensor.Dense, rows int) error {
	if len(outs) == 0 {
		return errors.New("the servable returned no outputs")
	}
	for _, name := range slices.Sorted(maps.Keys(outs)) {
		t := outs[name]
		if t == nil {
			return fmt.Errorf("output %q is nil", name)
		}
		if shape := t.Shape(); len(shape) == 0 || shape[0] != rows {
			return fmt.Errorf("output %q has shape %v, want %d rows along dimension 0", name, []int(shape), rows)
		}
	}
	return nil
}

// writeRows writes {"predictions": [...]}: per example, the one output's
// value, or an object of every output's value.
func writeRows(w *jsonOut, outs map[string]*tensor.Dense, rows int) {
	names := slices.Sorted(maps.Keys(outs))
	type col struct {
		data  any
		shape []int
		size  int
	}
	cols := make([]col, len(names))
	for i, name := range names {
		data, shape := tensorData(outs[name])
		cols[i] = col{data, shape[1:], numElements(shape[1:])}
	}
	w.WriteString(`{"predictions":[`)
	for r := range rows {
		if r > 0 {
			w.WriteByte(',')
		}
		if len(names) == 1 {
			w.nested(cols[0].data, cols[0].shape, r*cols[0].size)
			continue
		}
		w.WriteByte('{')
		for i, name := range names {
			if i > 0 {
				w.WriteByte(',')
			}
			w.key(name)
			w.nested(cols[i].data, cols[i].shape, r*cols[i].size)
		}
		w.WriteByte('}')
	}
	w.WriteString("]}")
}

// writeColumns writes {"outputs": ...}: the one output's batch, or an
// object of every output's batch.
func writeColumns(w *jsonOut, outs map[string]*tensor.Dense) {
	names := slices.Sorted(maps.Keys(outs))
	w.WriteString(`{"outputs":`)
	if len(names) == 1 {
		data, shape := tensorData(outs[names[0]])
		w.nested(data, shape, 0)
	} else {
		w.WriteByte('{')
		for i, name := range names {
			if i > 0 {
				w.WriteByte(',')
			}
			w.key(name)
			data, shape := tensorData(outs[name])
			w.nested(data, shape, 0)
		}
		w.WriteByte('}')
	}
	w.WriteByte('}')
}

// classColumns returns how many classes a scores or classes output of
// shape [rows] or [rows, k] has.
func classColumns(name string, shape []int) (int, error) {
	switch len(shape) {
	case 1:
		return 1, nil
	case 2:
		return shape[1], nil
	}
	return 0, fmt.Errorf("classify output %q has shape %v, want [batch] or [batch, classes]", name, shape)
}

// writeClassify writes {"results": [[[label, score], ...], ...]}.
func writeClassify(w *jsonOut, outs map[string]*tensor.Dense, rows int) error {
	scores, hasScores := outs["scores"]
	classes, hasClasses := outs["classes"]
	if !hasScores && !hasClasses {
		return fmt.Errorf("the classify signature has neither a \"scores\" nor a \"classes\" output (it has %q)", slices.Sorted(maps.Keys(outs)))
	}
	var (
		sdata, cdata any
		sbits        = 64
		k            = -1
	)
	if hasScores {
		var shape []int
		sdata, shape = tensorData(scores)
		n, err := classColumns("scores", shape)
		if err != nil {
			return err
		}
		if _, ok := floatAt(sdata, 0); !ok && numElements(shape) > 0 {
			return fmt.Errorf("classify output \"scores\" has dtype %v, want a number", scores.Dtype())
		}
		if scores.Dtype() == tensor.Float32 {
			sbits = 32
		}
		k = n
	}
	if hasClasses {
		var shape []int
		cdata, shape = tensorData(classes)
		n, err := classColumns("classes", shape)
		if err != nil {
			return err
		}
		if k >= 0 && n != k {
			return fmt.Errorf("classify outputs \"scores\" and \"classes\" have %d and %d classes", k, n)
		}
		k = n
	}
	w.WriteString(`{"results":[`)
	for r := range rows {
		if r > 0 {
			w.WriteByte(',')
		}
		w.WriteByte('[')
		for j := range k {
			if j > 0 {
				w.WriteByte(',')
			}
			lbl := strconv.Itoa(j)
			if hasClasses {
				lbl = label(cdata, r*k+j)
			}
			q, _ := json.Marshal(lbl)
			w.WriteByte('[')
			w.Write(q)
			w.WriteByte(',')
			score := 0.0
			if hasScores {
				score, _ = floatAt(sdata, r*k+j)
			}
			w.float(score, sbits)
			w.WriteByte(']')
		}
		w.WriteByte(']')
	}
	w.WriteString("]}")
	return nil
}

// writeRegress writes {"results": [value, ...]} from the "outputs" output
// (or the only output), of shape [rows] or [rows, 1].
func writeRegress(w *jsonOut, outs map[string]*tensor.Dense, rows int) error {
	t, ok := outs["outputs"]
	if !ok && len(outs) == 1 {
		for _, only := range outs {
			t = only
		}
	}
	if t == nil {
		return fmt.Errorf("the regress signature has no \"outputs\" output (it has %q)", slices.Sorted(maps.Keys(outs)))
	}
	data, shape := tensorData(t)
	if len(shape) > 2 || (len(shape) == 2 && shape[1] != 1) {
		return fmt.Errorf("regress output has shape %v, want [batch] or [batch, 1]", shape)
	}
	bits := 64
	if t.Dtype() == tensor.Float32 {
		bits = 32
	}
	w.WriteString(`{"results":[`)
	for r := range rows {
		if r > 0 {
			w.WriteByte(',')
		}
		f, ok := floatAt(data, r)
		if !ok {
			return fmt.Errorf("regress output has dtype %v, want a number", t.Dtype())
		}
		w.float(f, bits)
	}
	w.WriteString("]}")
	return nil
}

// ---- listening ----

// ShutdownTimeout is how long ListenAndServe and Serve wait for requests
// in flight once their context is done.
const ShutdownTimeout = 30 * time.Second

// ListenAndServe serves h on the TCP address addr until ctx is done, then
// shuts down gracefully: it stops accepting connections and waits up to
// ShutdownTimeout for the requests in flight. It returns nil after a
// graceful shutdown.
func ListenAndServe(ctx context.Context, addr string, h http.Handler) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("export: listen: %w", err)
	}
	return Serve(ctx, l, h)
}

// Serve is ListenAndServe on a listener; it closes l.
func Serve(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("export: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-errc // http.ErrServerClosed, at once
	if err != nil {
		srv.Close()
		return fmt.Errorf("export: shutdown: %w", err)
	}
	return nil
}
