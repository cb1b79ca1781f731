//go:build unix

// Package fifotest makes named pipes for tests of code that must not open
// them: a reader that opens a named pipe waits until a writer opens it, so
// a test of such code would otherwise hang when the code regresses.
package fifotest

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
)

// Garbage is what the pipe Make creates gives a reader that opens it.
const Garbage = "this is a named pipe, not a file\n"

// Make creates a named pipe at path with a writer waiting on it: every
// reader that opens the pipe reads Garbage and then end of file instead of
// waiting forever, so code that wrongly opens it fails on its content
// rather than hanging the test. The test's cleanup stops the writer.
func Make(t testing.TB, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatalf("mkfifo %s: %v", path, err)
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			w, err := os.OpenFile(path, os.O_WRONLY, 0) // waits for a reader
			if err != nil {
				return
			}
			w.WriteString(Garbage) // fails harmlessly when the reader has gone
			w.Close()
		}
	}()
	t.Cleanup(func() {
		stop.Store(true)
		// Stay a reader until the writer ends, so that its open, if it
		// waits or is about to, goes through.
		r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				t.Errorf("release the writer of %s: %v", path, err)
			}
			return // a writer that still waits cannot be reached
		}
		<-done
		r.Close()
	})
}
