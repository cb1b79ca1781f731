package serving

// Request bodies: read up to the limit, decompressed when gzipped; and
// when a request is refused before its body was read, the rest of the body
// is read and dropped (up to a bound) so that a client that sends its
// whole body before reading gets the answer rather than a reset
// connection.

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// readBody reads the request body, at most Config.MaxBodyBytes, and
// decompresses it when its Content-Encoding is gzip: then the compressed
// and the decompressed body must each be within the limit. The body's
// bytes are taken from the in-flight budget as they arrive, never before:
// a slow upload holds only what it has sent. Each read of the body waits
// at most Config.BodyReadTimeout for its next bytes. The caller gives back
// taken once done with the body.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (body []byte, taken int64, err error) {
	limit := s.cfg.MaxBodyBytes
	tooLarge := &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than the limit of %d bytes", limit)}
	gzipped, err := gzipEncoded(r.Header)
	if err != nil {
		return nil, 0, s.refuse(r, err, 0)
	}
	if r.ContentLength > limit {
		return nil, 0, s.refuse(r, tooLarge, 0)
	}
	if !gzipped && r.ContentLength > 0 && !s.inflight.fits(r.ContentLength) {
		// Refused before any of it is read: a client waiting for "100
		// Continue" gets the answer.
		return nil, 0, s.refuse(r, s.inflight.errBusy(), 0)
	}
	if s.readingBody != nil {
		s.readingBody()
	}
	dl := newDeadlineReader(w, r.Body, s.cfg.BodyReadTimeout, s.cfg.ReadTimeout)
	defer dl.done()
	r.Body = readCloser{dl, r.Body} // refuse's reads too
	raw := &countingReader{r: io.LimitReader(dl, limit+1)}
	var src io.Reader = raw
	if gzipped {
		zr, err := gzip.NewReader(raw)
		if err != nil {
			switch {
			case raw.n > limit:
				err = tooLarge
			case errors.Is(err, os.ErrDeadlineExceeded):
				return nil, 0, dl.stalled(w)
			default:
				err = badRequestf("decompressing the gzip request body: %v", err)
			}
			return nil, 0, s.refuse(r, err, raw.n)
		}
		defer zr.Close()
		src = zr
	}
	charged := &chargedReader{r: io.LimitReader(src, limit+1), b: s.inflight}
	var buf bytes.Buffer
	_, err = buf.ReadFrom(charged)
	fail := func(err error) ([]byte, int64, error) {
		s.inflight.give(charged.taken)
		return nil, 0, s.refuse(r, err, raw.n)
	}
	switch {
	case raw.n > limit || int64(buf.Len()) > limit:
		return fail(tooLarge)
	case charged.err != nil:
		return fail(charged.err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.inflight.give(charged.taken)
		return nil, 0, dl.stalled(w)
	case err != nil && gzipped:
		return fail(badRequestf("decompressing the gzip request body: %v", err))
	case err != nil:
		return fail(badRequestf("reading the request body: %v", err))
	}
	return buf.Bytes(), charged.taken, nil
}

// deadlineReader reads a request body with a read deadline of timeout
// from each read, but not past the end of the request's ReadTimeout
// (counted from the handler's start); done puts that end back once the
// body is read. Where the connection takes no deadlines (a handler
// mounted elsewhere that does not support them) it only reads.
type deadlineReader struct {
	r       io.Reader
	rc      *http.ResponseController
	timeout time.Duration
	end     time.Time // the request's own read deadline
	ok      bool      // the connection takes deadlines
}

func newDeadlineReader(w http.ResponseWriter, r io.Reader, timeout, readTimeout time.Duration) *deadlineReader {
	d := &deadlineReader{r: r, rc: http.NewResponseController(w), timeout: timeout, end: time.Now().Add(readTimeout)}
	d.ok = d.rc.SetReadDeadline(d.end) == nil
	return d
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	if d.ok {
		if t := time.Now().Add(d.timeout); t.Before(d.end) {
			d.rc.SetReadDeadline(t)
		} else {
			d.rc.SetReadDeadline(d.end)
		}
	}
	return d.r.Read(p)
}

// done puts back the request's own read deadline: the model's run that
// follows is not cut short by the body's.
func (d *deadlineReader) done() {
	if d.ok {
		d.rc.SetReadDeadline(d.end)
	}
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

// stalled is the answer to a body that did not come in time; its
// connection is closed after the answer, without waiting for the rest.
func (d *deadlineReader) stalled(w http.ResponseWriter) error {
	w.Header().Set("Connection", "close")
	return &httpError{http.StatusRequestTimeout, fmt.Sprintf("the request body stopped arriving: no bytes for %v (the body read timeout), or the whole request took longer than the read timeout", d.timeout)}
}

// gzipEncoded tells whether a request's Content-Encoding is gzip; an
// encoding other than gzip and identity is answered with 415 Unsupported
// Media Type.
func gzipEncoded(h http.Header) (bool, error) {
	enc := strings.TrimSpace(strings.Join(h.Values("Content-Encoding"), ","))
	switch strings.ToLower(enc) {
	case "", "identity":
		return false, nil
	case "gzip", "x-gzip":
		return true, nil
	}
	return false, &httpError{http.StatusUnsupportedMediaType, fmt.Sprintf("unsupported Content-Encoding %q: send the body as is (identity) or gzip", echo(enc))}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// refuse returns err, the answer to a request refused before its body was
// read to the end (read bytes of it were), after reading and dropping the
// rest of the body, up to twice MaxBodyBytes in all: a client that sends
// its whole body before it reads the answer then gets it, and the
// connection can serve the next request. A longer body is left unread
// (the connection is closed after the answer), and so is the body of a
// client that waits for "100 Continue" when none of it was read: it sends
// nothing.
func (s *Server) refuse(r *http.Request, err error, read int64) error {
	budget := 2 * s.cfg.MaxBodyBytes
	switch {
	case read == 0 && strings.EqualFold(r.Header.Get("Expect"), "100-continue"):
	case r.ContentLength > budget:
	default:
		io.CopyN(io.Discard, r.Body, budget-read+1) // +1: the read that sees the end
	}
	return err
}
