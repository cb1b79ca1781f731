// Package pyevents reads TensorBoard event files for tests with a reader
// that shares no code with the writer (package estimator/tfevents): a
// Python script, testdata/read_events.py, that checks the TFRecord framing
// and masked CRC32Cs itself and parses each Event with Python's protobuf
// runtime from descriptors built from the field numbers of TensorFlow's
// event.proto and summary.proto.
//
// It needs a python3 that can import google.protobuf (Debian:
// python3-protobuf), found as package testpython finds one: without one
// the test is skipped, saying so, except under CI=true, where it fails: CI
// installs the package and must not pass by skipping.
package pyevents

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"testing"

	"github.com/towerflow/towerflow/internal/testpython"
)

//go:embed testdata/read_events.py
var script string

// File is one event file as the Python reader read it.
type File struct {
	File   string  `json:"file"`
	Events []Event `json:"events"`
}

// Event is one record of a file. What names the member of Event's oneof
// that is set ("file_version", "summary", ...; empty for none).
type Event struct {
	WallTime    float64 `json:"wall_time"`
	Step        int64   `json:"step"`
	What        string  `json:"what"`
	FileVersion string  `json:"file_version"`
	Summary     []Value `json:"summary"`
	// SessionStatus is a session_log's status (1: START).
	SessionStatus int `json:"session_status"`
}

// Value is a Summary.Value; Kind names the member of its oneof that is
// set ("simple_value" for a scalar).
type Value struct {
	Tag         string `json:"tag"`
	Kind        string `json:"kind"`
	SimpleValue Number `json:"simple_value"`
}

// Number is a float the reader prints as a JSON number, or as "nan",
// "inf" or "-inf".
type Number float64

// UnmarshalJSON reads a number or one of the non-finite names.
func (n *Number) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var f float64
		if err := json.Unmarshal(b, &f); err != nil {
			return err
		}
		*n = Number(f)
		return nil
	}
	switch s {
	case "nan":
		*n = Number(math.NaN())
	case "inf":
		*n = Number(math.Inf(1))
	case "-inf":
		*n = Number(math.Inf(-1))
	default:
		return fmt.Errorf("simple_value %q", s)
	}
	return nil
}

// Python returns the interpreter to run the reader with: one that can
// import google.protobuf (see testpython.Find: without one t skips, or
// fails under CI=true).
func Python(t testing.TB) string {
	t.Helper()
	return testpython.Find(t, "python3-protobuf", "google.protobuf")
}

// Read reads the event files at paths with the Python reader. An error
// holds the reader's message: a checksum that does not match, a record
// cut short, a field under a number the protos do not define.
func Read(python string, paths ...string) ([]File, error) {
	cmd := exec.Command(python, append([]string{"-c", testpython.WithTFRecord(script)}, paths...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("python event reader: %v: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	var files []File
	if err := json.Unmarshal(out, &files); err != nil {
		return nil, fmt.Errorf("python event reader output %q: %w", out, err)
	}
	return files, nil
}
