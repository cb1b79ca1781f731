package runner

import (
	"os"
	"testing"
)

// Run is run: Main without the flags' check and the exit.
var Run = run

// Notified is one call of notify: the channel signals go to, and which.
type Notified struct {
	C       chan<- os.Signal
	Signals []os.Signal
}

// CaptureNotify makes SignalContext send its channel and signals to the
// channel returned instead of registering them with the runtime, until
// the test ends: the test delivers a signal by sending it on C.
func CaptureNotify(t *testing.T) <-chan Notified {
	got := make(chan Notified, 1)
	old := notify
	notify = func(c chan<- os.Signal, sigs ...os.Signal) { got <- Notified{c, sigs} }
	t.Cleanup(func() { notify = old })
	return got
}
