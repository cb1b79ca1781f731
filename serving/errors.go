package serving

// The errors of the API and the HTTP status each is answered with.

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/towerflow/towerflow/export"
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

// errClosed answers the requests that come once the server is closed.
var errClosed = &httpError{http.StatusServiceUnavailable, "the server is closed"}

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
	case errors.Is(err, export.ErrBadInput), errors.Is(err, export.ErrUnknownSignature):
		return http.StatusBadRequest
	case errors.Is(err, export.ErrClosed):
		return http.StatusServiceUnavailable
	case errors.Is(err, context.Canceled):
		return statusClientClosedRequest
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}
