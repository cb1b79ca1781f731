package serving

// Routing: the URLs of the REST API, their methods, and the version a
// request is served by.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/sharding"
)

var (
	runPathRE    = regexp.MustCompile(`(?i)^/v1/models/([^/:]+)(?:/versions/(\d+)|/labels/([^/:]+))?:(classify|regress|predict)$`)
	statusPathRE = regexp.MustCompile(`(?i)^/v1/models(?:/([^/:]+))?(?:/versions/(\d+)|/labels/([^/:]+))?(/metadata)?$`)
)

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
		err := &panicError{value: p, stack: debug.Stack()}
		s.logFailure(r, http.StatusInternalServerError, err)
		if !sw.started {
			writeJSON(sw, http.StatusInternalServerError, errorBody(err.Error()))
		}
	}()
	if err := s.route(sw, r); err != nil {
		s.fail(sw, r, err)
	}
}

// fail answers a request with err, and logs it when it is the server's
// own failure.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := errorStatus(err)
	if code >= 500 {
		s.logFailure(r, code, err)
	}
	writeJSON(w, code, errorBody(err.Error()))
}

// logFailure logs a request answered with code, a panic with its stack.
func (s *Server) logFailure(r *http.Request, code int, err error) {
	attrs := []any{"method", r.Method, "path", r.URL.Path, "status", code, "error", err.Error()}
	var pe *panicError
	if errors.As(err, &pe) {
		attrs = append(attrs, "stack", string(pe.stack))
	}
	s.cfg.Logger.Error("serving a request failed", attrs...)
}

// route sends a request to its handler by path and method.
func (s *Server) route(w *statusWriter, r *http.Request) error {
	path := r.URL.Path
	if m := runPathRE.FindStringSubmatch(path); m != nil {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			return &httpError{http.StatusMethodNotAllowed, fmt.Sprintf("Method %s is not allowed for %s: use POST", echo(r.Method), echo(path))}
		}
		return s.serveRun(w, r, m[1], versionSpec{number: m[2], label: m[3]}, strings.ToLower(m[4]))
	}
	if m := statusPathRE.FindStringSubmatch(path); m != nil {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			return &httpError{http.StatusMethodNotAllowed, fmt.Sprintf("Method %s is not allowed for %s: use GET", echo(r.Method), echo(path))}
		}
		if m[1] == "" {
			return badRequestf("Missing model name in request.")
		}
		spec := versionSpec{number: m[2], label: m[3]}
		if m[4] != "" {
			return s.serveMetadata(w, m[1], spec)
		}
		return s.serveStatus(w, m[1], spec)
	}
	if len(path) >= 4 && strings.EqualFold(path[:4], "/v1/") {
		return badRequestf("Malformed request: %s %s", echo(r.Method), echo(path))
	}
	return &httpError{http.StatusNotFound, fmt.Sprintf("Not found: %s %s", echo(r.Method), echo(path))}
}

// versionSpec is the version a URL asks for: a version number, a label,
// or neither for the newest.
type versionSpec struct {
	number string // from /versions/{number}
	label  string // from /labels/{label}
}

// find returns model name and the version spec asks for (want, when
// specific; else the newest). forStatus picks the status API's error
// messages.
func (s *Server) find(name string, spec versionSpec, forStatus bool) (m *servedModel, want int64, specific bool, err error) {
	if spec.number != "" {
		if want, err = strconv.ParseInt(spec.number, 10, 64); err != nil {
			return nil, 0, false, badRequestf("Failed to convert version: %s to numeric.", echo(spec.number))
		}
		specific = true
	}
	if s.closed.Load() {
		return nil, 0, false, errClosed
	}
	m, ok := s.models[name]
	if !ok {
		return nil, 0, false, notFound(name, want, specific, forStatus)
	}
	if spec.label != "" {
		if want, ok = m.labels[spec.label]; !ok {
			return nil, 0, false, badRequestf("Unrecognized servable version label: %s", echo(spec.label))
		}
		specific = true
	}
	return m, want, specific, nil
}

// acquire finds a model and the served version spec asks for, and takes a
// reference on it. forStatus picks the status API's error messages.
func (s *Server) acquire(name string, spec versionSpec, forStatus bool) (*servedVersion, error) {
	m, want, specific, err := s.find(name, spec, forStatus)
	if err != nil {
		return nil, err
	}
	v, closed := m.acquire(want, specific)
	switch {
	case closed:
		return nil, errClosed
	case v == nil:
		return nil, notFound(name, want, specific, forStatus)
	}
	return v, nil
}

// notFound is the 404 for a model, or a version (want, when specific), the
// server does not serve, in the words of the status API or of the others.
func notFound(name string, want int64, specific, forStatus bool) error {
	var msg string
	name = echo(name)
	switch {
	case forStatus && !specific:
		msg = fmt.Sprintf("Could not find any versions of model %s", name)
	case forStatus:
		msg = fmt.Sprintf("Could not find version %d of model %s", want, name)
	case !specific:
		msg = fmt.Sprintf("Servable not found for request: Latest(%s)", name)
	default:
		msg = fmt.Sprintf("Servable not found for request: Specific(%s, %d)", name, want)
	}
	return &httpError{http.StatusNotFound, msg}
}

// serveRun answers predict, classify and regress: it reads the request,
// runs the signature on its version and writes the outputs.
func (s *Server) serveRun(w *statusWriter, r *http.Request, name string, spec versionSpec, method string) error {
	// The body first: a slow upload does not hold a version.
	body, taken, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	out, err := func() ([]byte, error) {
		defer s.inflight.give(taken)
		return s.answerRun(r.Context(), body, name, spec, method)
	}()
	if err != nil {
		return err
	}
	// The version is released before the answer is written: a client
	// that does not read it does not keep a replaced version loaded.
	writeJSON(w, http.StatusOK, out)
	return nil
}

// answerRun decodes a request body, runs it on its version and returns
// the answer's body.
func (s *Server) answerRun(ctx context.Context, body []byte, name string, spec versionSpec, method string) ([]byte, error) {
	v, err := s.acquire(name, spec, false)
	if err != nil {
		return nil, err
	}
	defer v.release()
	req, err := decodeRun(ctx, body, method, v, s.cfg.MaxBatchSize)
	if err != nil {
		return nil, err
	}
	outs, err := s.run(ctx, v, req.sig, req.features, req.sparse, req.rows)
	if err != nil {
		return nil, err
	}
	return encodeRun(method, req.columnar, outs, req.rows, v.sigs[req.sig].ClassNames)
}

// run computes a signature, through the batcher when batching is on.
// Without batching a panic of the servable goes up to ServeHTTP.
func (s *Server) run(ctx context.Context, v *servedVersion, sig string, features map[string]*tensor.Dense, sparse map[string]sharding.SparseCOO, rows int) (map[string]*tensor.Dense, error) {
	if s.batcher != nil && rows < s.cfg.MaxBatchSize {
		return s.batcher.submit(ctx, batchKey{v: v, sig: sig}, features, sparse, rows)
	}
	return runOn(ctx, v.s, sig, features, sparse)
}
