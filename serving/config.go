package serving

// The server's configuration, its defaults and their checks.

import (
	"fmt"
	"log/slog"
	"time"
)

// The defaults of a zero Config field.
const (
	// DefaultMaxBodyBytes is the limit on a request body when
	// Config.MaxBodyBytes is 0.
	DefaultMaxBodyBytes = 16 << 20
	// DefaultReadHeaderTimeout is Config.ReadHeaderTimeout when 0.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout is Config.ReadTimeout when 0: a 16 MiB body
	// needs about 0.6 MB/s to arrive in time.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout is Config.WriteTimeout when 0.
	DefaultWriteTimeout = time.Minute
	// DefaultIdleTimeout is Config.IdleTimeout when 0.
	DefaultIdleTimeout = 30 * time.Second
)

// Config configures a Server. Its zero value works: bodies up to
// DefaultMaxBodyBytes, no limit on a request's examples, no batching, the
// default timeouts, no logging.
type Config struct {
	// MaxBodyBytes limits request bodies (0: DefaultMaxBodyBytes, 16 MiB);
	// a larger body is answered with 413 Request Entity Too Large.
	MaxBodyBytes int64
	// MaxBatchSize limits the examples of one request: a request with
	// more rows (instances, examples or columnar batch) is answered with
	// 400 Bad Request. With BatchTimeout it is also the most rows one
	// merged batch holds. 0 sets no limit.
	MaxBatchSize int
	// BatchTimeout turns on request batching (it needs MaxBatchSize):
	// requests for the same model version and signature that arrive
	// together are merged into one Run of the servable, and each gets its
	// own rows of the outputs back. A batch is run as soon as it holds
	// MaxBatchSize rows, or BatchTimeout after its first request arrived,
	// whichever comes first; a request that does not fit in the open
	// batch starts the next one, and a request of MaxBatchSize rows runs
	// alone at once. BatchTimeout is the most latency batching adds to a
	// request. 0 runs every request on its own.
	BatchTimeout time.Duration

	// The timeouts of the connections Server.Serve and
	// Server.ListenAndServe accept (those of net/http.Server of the same
	// names); 0 takes the default. A handler mounted in another
	// http.Server has that server's timeouts.
	//
	// ReadHeaderTimeout bounds reading a request's headers
	// (0: DefaultReadHeaderTimeout, 10 s).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, its body included
	// (0: DefaultReadTimeout, 30 s): a client that sends its body too
	// slowly is disconnected.
	ReadTimeout time.Duration
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
	case c.BatchTimeout < 0:
		return c, fmt.Errorf("batch timeout %v: must not be negative", c.BatchTimeout)
	case c.BatchTimeout > 0 && c.MaxBatchSize == 0:
		return c, fmt.Errorf("request batching (batch timeout %v) needs a max batch size", c.BatchTimeout)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"read header timeout", &c.ReadHeaderTimeout, DefaultReadHeaderTimeout},
		{"read timeout", &c.ReadTimeout, DefaultReadTimeout},
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
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
