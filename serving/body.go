package serving

// Request bodies: read up to the limit; and when a request is refused
// before its body was read, the rest of the body is read and dropped (up
// to a bound) so that a client that sends its whole body before reading
// gets the answer rather than a reset connection.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// readBody reads the request body, at most Config.MaxBodyBytes.
func (s *Server) readBody(r *http.Request) ([]byte, error) {
	limit := s.cfg.MaxBodyBytes
	tooLarge := &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than the limit of %d bytes", limit)}
	if r.ContentLength > limit {
		return nil, s.refuse(r, tooLarge, 0)
	}
	size := int64(bytes.MinRead)
	if r.ContentLength > 0 {
		size = r.ContentLength + 1 // +1: the read that sees the end
	}
	var buf bytes.Buffer
	buf.Grow(int(size))
	_, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1))
	switch {
	case int64(buf.Len()) > limit:
		return nil, s.refuse(r, tooLarge, int64(buf.Len()))
	case err != nil:
		return nil, s.refuse(r, badRequestf("reading the request body: %v", err), int64(buf.Len()))
	}
	return buf.Bytes(), nil
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
