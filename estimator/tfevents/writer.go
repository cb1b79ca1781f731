package tfevents

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Writer appends events to a new event file. Events are buffered until
// Flush or Close. A Writer is not safe for concurrent use.
type Writer struct {
	f    *os.File
	buf  *bufio.Writer
	path string
	rec  []byte // scratch for one event and its record
	err  error  // the first error; every later call returns it
}

// ErrClosed is wrapped by the errors of using a closed Writer.
var ErrClosed = errors.New("writer is closed")

// Create makes dir (and its parents) if needed and starts a new event file
// in it, named events.out.tfevents.<unix seconds>.<hostname> as TensorFlow
// names them; should a file of that name exist (another writer started in
// the same second), a suffix .1, .2, ... is added, never overwriting a
// file. The first event, the file version, is written and flushed at once,
// so the file is whole from the start.
func Create(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tfevents: %w", err)
	}
	now := time.Now()
	base := fmt.Sprintf("%s%010d.%s", FilePrefix, now.Unix(), hostname())
	var f *os.File
	for i := 0; f == nil; i++ {
		name := base
		if i > 0 {
			name += "." + strconv.Itoa(i)
		}
		var err error
		f, err = os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil && (!errors.Is(err, fs.ErrExist) || i >= 1000) {
			return nil, fmt.Errorf("tfevents: create event file: %w", err)
		}
	}
	w := &Writer{f: f, buf: bufio.NewWriter(f), path: f.Name()}
	if err := w.Write(Event{WallTime: unixSeconds(now), FileVersion: FileVersion}); err != nil {
		f.Close()
		return nil, err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// hostname is the machine's name made safe for a file name.
func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == os.PathSeparator || r < ' ' {
			return '_'
		}
		return r
	}, h)
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Path returns the event file's path.
func (w *Writer) Path() string { return w.path }

// Write appends one event.
func (w *Writer) Write(e Event) error {
	if w.err != nil {
		return w.err
	}
	w.rec = appendEvent(w.rec[:0], e)
	n := len(w.rec)
	w.rec = appendRecord(w.rec, w.rec[:n])
	if _, err := w.buf.Write(w.rec[n:]); err != nil {
		w.err = fmt.Errorf("tfevents: write %s: %w", w.path, err)
	}
	return w.err
}

// WriteScalars appends an event with the given scalars at step, timed now.
func (w *Writer) WriteScalars(step int64, scalars ...Scalar) error {
	return w.Write(Event{WallTime: unixSeconds(time.Now()), Step: step, Scalars: scalars})
}

// WriteSession appends a session log of status at step, timed now.
func (w *Writer) WriteSession(step int64, status SessionStatus) error {
	return w.Write(Event{WallTime: unixSeconds(time.Now()), Step: step, Session: status})
}

// Flush writes the buffered events to the file.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if err := w.buf.Flush(); err != nil {
		w.err = fmt.Errorf("tfevents: write %s: %w", w.path, err)
	}
	return w.err
}

// Close flushes and closes the file. It returns the first error the
// Writer met, if any.
func (w *Writer) Close() error {
	err := w.Flush()
	if cerr := w.f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("tfevents: close %s: %w", w.path, cerr)
	}
	if w.err == nil {
		w.err = fmt.Errorf("tfevents: %s: %w", w.path, ErrClosed)
	}
	return err
}

// Err returns the error every later call will return: the first error the
// Writer met, ErrClosed (wrapped) once it is closed, or nil.
func (w *Writer) Err() error { return w.err }
