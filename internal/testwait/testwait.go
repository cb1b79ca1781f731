// Package testwait gives tests of code that waits for other goroutines
// (towers meeting in a group) a way out of a wait that a bug would make
// endless, so that such a test fails on what it checks instead of hanging
// until go test's timeout.
package testwait

import (
	"testing"
	"time"
)

// Guard returns a channel closed a little before the test's deadline (or
// a minute from now when it has none). A test that waits for an event a
// bug could keep from happening selects on it too, then goes on and
// fails on what it checks.
func Guard(t testing.TB) <-chan struct{} {
	t.Helper()
	d := time.Minute
	if dl, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if at, ok := dl.Deadline(); ok {
			d = time.Until(at) * 9 / 10
		}
	}
	c := make(chan struct{})
	timer := time.AfterFunc(d, func() { close(c) })
	t.Cleanup(func() { timer.Stop() })
	return c
}
