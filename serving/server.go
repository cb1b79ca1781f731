package serving

// The Servable interface, the Server and its making. Its configuration is
// in config.go, its models and their first versions in models.go,
// reloading in reload.go, listening and stopping in listen.go, routing in
// routes.go.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/export"
)

// Servable is what a Server serves: one loaded version of a model.
// *export.Predictor is one; tests and other model sources may provide
// their own. Its methods must be safe for concurrent use. A version whose
// signatures take sparse inputs must be a SparseServable.
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

// Server is an http.Handler speaking TensorFlow Serving's REST API
// (https://www.tensorflow.org/tfx/serving/api_rest) for the newest version
// of each configured model, and the versions its labels name:
//
//	GET  /v1/models/{name}[/versions/{v}|/labels/{l}]            model status
//	GET  /v1/models/{name}[/versions/{v}|/labels/{l}]/metadata   signatures (SignatureDefs)
//	POST /v1/models/{name}[/versions/{v}|/labels/{l}]:predict    {"signature_name", "instances" | "inputs"}
//	POST /v1/models/{name}[/versions/{v}|/labels/{l}]:classify   {"signature_name", "context", "examples"}
//	POST /v1/models/{name}[/versions/{v}|/labels/{l}]:regress    {"signature_name", "context", "examples"}
//
// The model status lists every version served (AVAILABLE), those
// replaced by a reload (UNLOADING until their last request is done, then
// END) and those that failed to load (END, with their error), the newest
// first.
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
// lists must be rectangular with the signature's per-example shape. A
// sparse input (export.TensorInfo.Sparse; served by a SparseServable) takes
// a flat list of up to its most values per example, possibly empty, in
// both formats and in classify and regress (where one value may stand
// alone), and reaches the model as a sharding.SparseCOO; an id a lookup
// finds out of its table's range is answered with 400 naming the input,
// the row and the id.
// Classify and regress take tf.Example-like objects, each feature a value
// or a flat list of one example's values in row-major order (booleans and
// 0/1 stand for each other in integer and bool features; a float feature
// refuses booleans, as predict and TensorFlow Serving do), a "context"
// holding features shared by every example; they answer {"results": ...}
// (the key TensorFlow Serving writes; its documentation says "result"):
// per example, [label, score] pairs, labels from the "classes" output
// (named by the signature's class names when it has them), or else the
// class names of the "scores" columns, or "" (as TensorFlow Serving
// answers a classifier without classes); or one value from the "outputs"
// output. Bodies may be gzipped (Content-Encoding: gzip).
//
// Errors are answered with {"error": message} and TensorFlow Serving's
// status: 400 for malformed JSON, wrong shapes or dtypes, missing inputs,
// an unknown signature or label, or too many rows; 404 for an unknown
// model or version; 405 for a wrong method; 408 for a body that stopped
// arriving (Config.BodyReadTimeout); 413 for a body over the
// limit; 415 for a Content-Encoding other than gzip; 429 when the bodies
// in flight would exceed Config.MaxInflightBytes; 503 once closed; 500
// for the server's own failures and panics (logged).
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
	// readingBody, when set (by tests), is called when a request's body
	// is about to be read.
	readingBody func()
}

// NewServer loads the newest version of every model, and the versions its
// labels name, and returns a server for them, configured by cfg. Call
// Reload (or Watch) to pick up new versions, and Shutdown or Close when
// done.
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
