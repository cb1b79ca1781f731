package serving

// The server's life: configuration, loading the first versions, reloading
// newer ones, closing, and listening.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/replicate"
)

// Servable is what a Server serves: one loaded version of a model.
// *export.Predictor is one; tests and other model sources may provide
// their own. Its methods must be safe for concurrent use.
type Servable interface {
	// Version is the version number, a positive integer.
	Version() int64
	// Signatures returns the signatures by key.
	Signatures() map[string]export.Signature
	// Run computes a signature on a batch of features (every input of the
	// signature, with its dtype, the batch along dimension 0) and returns
	// the signature's outputs by name, batch along dimension 0. Errors
	// about the features wrap export.ErrBadInput.
	Run(ctx context.Context, signature string, features map[string]*tensor.Dense) (map[string]*tensor.Dense, error)
	// Close releases the version; the server calls it once no request
	// uses the version any more.
	Close() error
}

var _ Servable = (*export.Predictor)(nil)

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
	// devices it is replicated over (see export.Load).
	Model *replicate.Model
	// Loader, when set, replaces loading from BaseDir: it is called with
	// the version being served (0 when there is none yet) and returns the
	// version to serve instead, or nil and no error to keep the current
	// one. A Loader replaces BaseDir and Model: giving both is an error.
	Loader func(current int64) (Servable, error)
}

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
// pairs, labels from the "classes" output or else "" (as TensorFlow
// Serving answers a classifier without classes); or one value from the
// "outputs" output.
//
// Errors are answered with {"error": message} and TensorFlow Serving's
// status: 400 for malformed JSON, wrong shapes or dtypes, missing inputs,
// an unknown signature or too many rows; 404 for an unknown model or
// version; 405 for a wrong method; 413 for a body over the limit; 415 for
// a Content-Encoding other than gzip; 429 when the bodies in flight would
// exceed Config.MaxInflightBytes; 503 once closed; 500 for the server's
// own failures and panics (logged).
//
// Requests are served concurrently, each version's Run called in parallel
// (see Config.BatchTimeout to merge small requests). Reload and Watch swap
// in new versions while serving.
type Server struct {
	cfg     Config // with its defaults
	names   []string
	models  map[string]*servedModel
	batcher *batcher // nil without request batching
	// inflight is the budget of the request bodies in flight.
	inflight *budget

	lifeMu   sync.Mutex // serializes Reload, Shutdown and Close
	stopping bool       // Shutdown or Close has begun; under lifeMu
	closed   atomic.Bool
	done     chan struct{}  // closed once requests are refused
	drains   sync.WaitGroup // retired versions waiting for their last request

	httpMu      sync.Mutex
	https       map[*http.Server]struct{} // those of Serve
	httpStopped bool
	// connState, when set (by tests), is the ConnState hook of Serve's
	// connections.
	connState func(net.Conn, http.ConnState)
}

// NewServer loads the newest version of every model and returns a server
// for them, configured by cfg. Call Reload (or Watch) to pick up new
// versions, and Close when done.
func NewServer(models []ModelConfig, cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("serving: new server: %w", err)
	}
	if len(models) == 0 {
		return nil, errors.New("serving: new server: no models")
	}
	s := &Server{
		cfg: cfg, models: map[string]*servedModel{}, inflight: &budget{max: cfg.MaxInflightBytes},
		done: make(chan struct{}), https: map[*http.Server]struct{}{},
	}
	if cfg.BatchTimeout > 0 {
		s.batcher = newBatcher(cfg.MaxBatchSize, cfg.BatchTimeout)
	}
	for _, c := range models {
		if err := s.addModel(c); err != nil {
			s.closeLoaded()
			return nil, fmt.Errorf("serving: new server: %w", err)
		}
	}
	slices.Sort(s.names)
	return s, nil
}

// addModel checks c and loads its first version.
func (s *Server) addModel(c ModelConfig) error {
	if c.Name == "" || strings.ContainsAny(c.Name, "/:") {
		return fmt.Errorf("model name %q: must be non-empty without '/' or ':'", c.Name)
	}
	if _, dup := s.models[c.Name]; dup {
		return fmt.Errorf("model %q is configured twice", c.Name)
	}
	m := &servedModel{name: c.Name, load: c.Loader}
	switch {
	case m.load != nil && (c.BaseDir != "" || c.Model != nil):
		return fmt.Errorf("model %q: has a Loader and a BaseDir or Model; a Loader replaces them, give one or the other", c.Name)
	case m.load == nil && (c.BaseDir == "" || c.Model == nil):
		return fmt.Errorf("model %q: needs a BaseDir and a Model, or a Loader", c.Name)
	case m.load == nil:
		m.load = dirLoader(c)
	}
	sv, err := m.load(0)
	if err == nil && sv == nil {
		err = export.ErrNoVersion
	}
	if err != nil {
		return fmt.Errorf("model %q: %w", c.Name, err)
	}
	v, err := newServedVersion(sv)
	if err != nil {
		sv.Close()
		return fmt.Errorf("model %q: %w", c.Name, err)
	}
	m.cur = v
	s.models[c.Name] = m
	s.names = append(s.names, c.Name)
	s.cfg.Logger.Info("serving model", "model", c.Name, "version", v.version)
	return nil
}

// closeLoaded closes the versions a failed NewServer loaded.
func (s *Server) closeLoaded() {
	for _, m := range s.models {
		if m.cur != nil {
			m.cur.s.Close()
		}
	}
}

// dirLoader loads c's versions from its base directory: the newest, when
// it is not the one served.
func dirLoader(c ModelConfig) func(int64) (Servable, error) {
	return func(current int64) (Servable, error) {
		if current == 0 {
			p, err := export.LoadLatest(c.BaseDir, c.Model)
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
		p, err := export.Load(filepath.Join(c.BaseDir, strconv.FormatInt(vs[len(vs)-1], 10)), c.Model)
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
		return errors.New("serving: reload: the server is closed")
	}
	var errs []error
	for _, name := range s.names {
		if err := s.reloadModel(s.models[name]); err != nil {
			errs = append(errs, fmt.Errorf("serving: reload model %q: %w", name, err))
		}
	}
	for _, err := range errs {
		s.cfg.Logger.Error("reload", "error", err)
	}
	return errors.Join(errs...)
}

// reloadModel swaps in m's new version, if it has one, and retires the
// version it replaces.
func (s *Server) reloadModel(m *servedModel) error {
	cur := m.currentVersion()
	sv, err := m.load(cur)
	if err != nil || sv == nil {
		return err
	}
	v, err := newServedVersion(sv)
	if err == nil && v.version == cur {
		err = fmt.Errorf("the loader returned version %d, the one served", cur)
	}
	if err != nil {
		sv.Close()
		return err
	}
	old := m.swap(v)
	s.cfg.Logger.Info("serving model", "model", m.name, "version", v.version, "previous", cur)
	s.retire(m.name, old)
	return nil
}

// retire closes a replaced version in the background once its last
// request is done.
func (s *Server) retire(name string, old *servedVersion) {
	s.drains.Add(1)
	go func() {
		defer s.drains.Done()
		old.refs.Wait()
		if err := old.s.Close(); err != nil {
			s.cfg.Logger.Error("closing a replaced model version", "model", name, "version", old.version, "error", err)
		}
	}()
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
