package serving

// The budget of the request bodies in flight (Config.MaxInflightBytes):
// a body takes its bytes from it as they are read, and gives them back
// once its answer is ready; a request that finds the budget spent is
// answered with 429 at once rather than queued.

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
)

// budget is a count of bytes that can be taken up to a maximum.
type budget struct {
	max  int64
	used atomic.Int64
}

// take takes n bytes, or none and returns false when fewer are left.
func (b *budget) take(n int64) bool {
	for {
		used := b.used.Load()
		if used > b.max-n {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// give gives back n bytes taken.
func (b *budget) give(n int64) { b.used.Add(-n) }

// errBusy is the answer to a request whose body does not fit in the
// budget.
func (b *budget) errBusy() error {
	return &httpError{http.StatusTooManyRequests, fmt.Sprintf("the server is busy: the request bodies in flight would exceed the limit of %d bytes; retry later", b.max)}
}

// fits tells whether n bytes are left now, without taking them.
func (b *budget) fits(n int64) bool { return b.used.Load() <= b.max-n }

// chargedReader takes the bytes read through it from a budget as they
// arrive; once the budget is spent, its Read fails with the budget's
// errBusy.
type chargedReader struct {
	r     io.Reader
	b     *budget
	taken int64 // to give back
	err   error // errBusy, once it has failed
}

func (c *chargedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	if n > 0 {
		if !c.b.take(int64(n)) {
			c.err = c.b.errBusy()
			return 0, c.err
		}
		c.taken += int64(n)
	}
	return n, err
}
