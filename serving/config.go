package serving

// The server's configuration, its defaults and their checks.

import (
	"fmt"
	"log/slog"
	"math"
	"time"
)

// The defaults of a zero Config field.
const (
	// DefaultMaxBodyBytes is the limit on a request body when
	// Config.MaxBodyBytes is 0.
	DefaultMaxBodyBytes = 16 << 20
	// DefaultMaxBatchSize is the limit on a request's examples when
	// Config.MaxBatchSize is 0.
	DefaultMaxBatchSize = 8192
	// DefaultInflightBodies is how many bodies of the largest size the
	// requests in flight may hold together when Config.MaxInflightBytes
	// is 0: MaxInflightBytes is then DefaultInflightBodies times
	// MaxBodyBytes (64 MiB with the default body limit).
	DefaultInflightBodies = 4
	// DefaultMaxHeaderBytes is Config.MaxHeaderBytes when 0.
	DefaultMaxHeaderBytes = 32 << 10
	// DefaultMaxConnections is Config.MaxConnections when 0.
	DefaultMaxConnections = 2048
	// DefaultReadHeaderTimeout is Config.ReadHeaderTimeout when 0.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout is Config.ReadTimeout when 0: a 16 MiB body
	// needs about 0.6 MB/s to arrive in time.
	DefaultReadTimeout = 30 * time.Second
	// DefaultBodyReadTimeout is Config.BodyReadTimeout when 0.
	DefaultBodyReadTimeout = 5 * time.Second
	// DefaultWriteTimeout is Config.WriteTimeout when 0.
	DefaultWriteTimeout = time.Minute
	// DefaultIdleTimeout is Config.IdleTimeout when 0.
	DefaultIdleTimeout = 30 * time.Second
)

// Config configures a Server. Its zero value works: bodies up to
// DefaultMaxBodyBytes, requests of up to DefaultMaxBatchSize examples, 64
// MiB of bodies in flight, no batching, the default timeouts, no logging.
//
// The memory a server takes is bounded by its limits: serving a request
// takes up to about 20 times its body while it is decoded (the parsed
// JSON, then the input tensors), plus what the model needs for
// MaxBatchSize rows; MaxInflightBytes bounds the bodies of all the
// requests in flight. (A preprocessor can make more inputs than a body
// holds: docs/serving.md says how much package columns' crosses take.)
type Config struct {
	// MaxBodyBytes limits request bodies (0: DefaultMaxBodyBytes, 16 MiB),
	// after decompression for gzip bodies; a larger body is answered with
	// 413 Request Entity Too Large.
	MaxBodyBytes int64
	// MaxBatchSize limits the examples of one request (0:
	// DefaultMaxBatchSize, 8192), and so the rows the model runs at once:
	// a request with more rows (instances, examples or columnar batch) is
	// answered with 400 Bad Request. It also bounds the memory of
	// decoding a request: its JSON is parsed only as far as the values
	// MaxBatchSize examples of the largest signature hold (and 64Ki more,
	// for the rest of the request), and a request with more is answered
	// with 400 then. With BatchTimeout it is also the most rows one merged
	// batch holds. There is no setting without a limit: give a large one.
	MaxBatchSize int
	// MaxInflightBytes limits the bodies of the requests being read,
	// decoded and run at once, summed (0: DefaultInflightBodies times
	// MaxBodyBytes, 64 MiB by default; it must be at least MaxBodyBytes):
	// a request whose body would take the sum over the limit is answered
	// with 429 Too Many Requests, as TensorFlow Serving answers
	// RESOURCE_EXHAUSTED, and can be retried later. A body's bytes count
	// as they arrive (not as its Content-Length announces them), until its
	// answer is ready to be written: a slow upload holds only what it has
	// sent. A body whose Content-Length is over what is left is refused
	// before any of it is read.
	MaxInflightBytes int64
	// BatchTimeout turns on request batching:
	// requests for the same model version and signature that arrive
	// together are merged into one Run of the servable, and each gets its
	// own rows of the outputs back. A batch is run as soon as it holds
	// MaxBatchSize rows, or BatchTimeout after its first request arrived,
	// whichever comes first; a request that does not fit in the open
	// batch starts the next one, and a request of MaxBatchSize rows runs
	// alone at once. BatchTimeout is the most latency batching adds to a
	// request. 0 runs every request on its own.
	BatchTimeout time.Duration

	// The limits and timeouts of the connections Server.Serve and
	// Server.ListenAndServe accept (MaxHeaderBytes and the timeouts are
	// those of net/http.Server of the same names); 0 takes the default. A
	// handler mounted in another http.Server has that server's.
	//
	// A connection whose headers are being read takes up to about 3
	// times MaxHeaderBytes (the bytes read, their parsed copy, the
	// garbage collector's headroom; about 110 KiB with the default), so
	// the connections take at most about MaxConnections times that
	// (about 230 MiB with the defaults) besides the requests' bodies
	// (MaxInflightBytes).
	//
	// MaxHeaderBytes limits a request's line and headers (0:
	// DefaultMaxHeaderBytes, 32 KiB; net/http reads up to 4 KiB more): a
	// request with more is answered with 431 Request Header Fields Too
	// Large and its connection closed.
	MaxHeaderBytes int
	// MaxConnections limits the connections open at once (0:
	// DefaultMaxConnections, 2048). Beyond it, new connections are not
	// accepted: they wait in the kernel's listen backlog, unread, until
	// an open one closes (and a client finding the backlog full retries
	// or fails to connect). A connection is closed once it has waited
	// ReadHeaderTimeout for its request's headers, ReadTimeout for its
	// request, or IdleTimeout for its next request, so with the cap
	// reached new clients are served within about ReadHeaderTimeout.
	MaxConnections int
	//
	// ReadHeaderTimeout bounds reading a request's headers
	// (0: DefaultReadHeaderTimeout, 10 s).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, its body included
	// (0: DefaultReadTimeout, 30 s): a client that sends its body too
	// slowly is answered with 408 Request Timeout and disconnected.
	ReadTimeout time.Duration
	// BodyReadTimeout bounds each wait for the next bytes of a request
	// body (0: DefaultBodyReadTimeout, 5 s): a body that stalls longer is
	// answered with 408 Request Timeout and its connection closed. It
	// applies in Serve's connections and in any http.Server whose
	// connections take read deadlines (see http.ResponseController),
	// never past ReadTimeout from the start of the handler.
	BodyReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of a request's headers to
	// the end of its answer, the model's run included
	// (0: DefaultWriteTimeout, 1 min): a client that does not read its
	// answer is disconnected.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a kept-alive connection waits for its
	// next request (0: DefaultIdleTimeout, 30 s).
	IdleTimeout time.Duration

	// Logger receives new versions, reload failures, and every answer
	// with a 5xx status, panics with their stack. Nil logs nothing.
	Logger *slog.Logger
}

// withDefaults checks c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.MaxBodyBytes < 0:
		return c, fmt.Errorf("max body bytes %d: must not be negative (0 means the default, %d)", c.MaxBodyBytes, DefaultMaxBodyBytes)
	case c.MaxBatchSize < 0:
		return c, fmt.Errorf("max batch size %d: must not be negative", c.MaxBatchSize)
	case c.MaxInflightBytes < 0:
		return c, fmt.Errorf("max in-flight bytes %d: must not be negative (0 means the default, %d times the max body bytes)", c.MaxInflightBytes, DefaultInflightBodies)
	case c.BatchTimeout < 0:
		return c, fmt.Errorf("batch timeout %v: must not be negative", c.BatchTimeout)
	case c.MaxHeaderBytes < 0:
		return c, fmt.Errorf("max header bytes %d: must not be negative (0 means the default, %d)", c.MaxHeaderBytes, DefaultMaxHeaderBytes)
	case c.MaxConnections < 0:
		return c, fmt.Errorf("max connections %d: must not be negative (0 means the default, %d)", c.MaxConnections, DefaultMaxConnections)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"read header timeout", &c.ReadHeaderTimeout, DefaultReadHeaderTimeout},
		{"read timeout", &c.ReadTimeout, DefaultReadTimeout},
		{"body read timeout", &c.BodyReadTimeout, DefaultBodyReadTimeout},
		{"write timeout", &c.WriteTimeout, DefaultWriteTimeout},
		{"idle timeout", &c.IdleTimeout, DefaultIdleTimeout},
	} {
		if *d.v < 0 {
			return c, fmt.Errorf("%s %v: must not be negative (0 means the default, %v)", d.name, *d.v, d.def)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxBatchSize == 0 {
		c.MaxBatchSize = DefaultMaxBatchSize
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxInflightBytes == 0 {
		c.MaxInflightBytes = math.MaxInt64
		if c.MaxBodyBytes <= math.MaxInt64/DefaultInflightBodies {
			c.MaxInflightBytes = DefaultInflightBodies * c.MaxBodyBytes
		}
	}
	if c.MaxInflightBytes < c.MaxBodyBytes {
		return c, fmt.Errorf("max in-flight bytes %d: must be at least the max body bytes, %d", c.MaxInflightBytes, c.MaxBodyBytes)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
