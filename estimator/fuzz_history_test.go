package estimator

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// FuzzReadHistory: reading any bytes as a train or an eval history gives
// an error naming the file and a line, or records that the writer
// (appendJSONLine) writes and the reader reads back equal; only a last
// line without its newline is ever skipped, with a warning naming it. It
// never panics. Seeds are history files the Estimator writes.
//
//	go test -run '^$' -fuzz '^FuzzReadHistory$' -fuzztime 60s -fuzzminimizetime 1s ./estimator
func FuzzReadHistory(f *testing.F) {
	dir := f.TempDir()
	t0 := time.Date(2026, 11, 21, 23, 0, 0, 0, time.UTC)
	for _, r := range []TrainRecord{{Step: 10, Loss: 2.5, Time: t0}, {Step: 20, Loss: 1e-9, Time: t0.Add(time.Second)}, {Step: 30, Loss: 0}} {
		if err := appendJSONLine(dir, TrainHistoryFile, r); err != nil {
			f.Fatal(err)
		}
	}
	for _, r := range []EvalRecord{{Step: 20, Time: t0, Metrics: map[string]float64{"loss": 0.5, "accuracy": 0.75}}, {Step: 20, Name: "val", Metrics: map[string]float64{}}} {
		if err := appendJSONLine(dir, EvalHistoryFile, r); err != nil {
			f.Fatal(err)
		}
	}
	for i, name := range []string{TrainHistoryFile, EvalHistoryFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b)
		f.Add(uint8(i), b[:len(b)-7])                        // torn
		f.Add(uint8(i), append(b[:len(b)-7:len(b)-7], '\n')) // damaged
	}
	f.Add(uint8(0), []byte("{\"step\": 1, \"loss\": 1e400}\n"))
	f.Add(uint8(1), []byte("{\"step\": 1, \"metrics\": {\"a\": null}}\r\n\n"))
	f.Fuzz(func(t *testing.T, kind uint8, file []byte) {
		var warnings []error
		warn := func(err error) { warnings = append(warnings, err) }
		var got any
		var err error
		if kind%2 == 0 {
			got, err = ReadTrainHistory(bytes.NewReader(file), "f.jsonl", warn)
		} else {
			got, err = ReadEvalHistory(bytes.NewReader(file), "f.jsonl", warn)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.jsonl:") {
				t.Fatalf("error %q does not name the file and line", err)
			}
			return
		}
		if len(warnings) > 1 || (len(warnings) == 1 && bytes.HasSuffix(file, []byte("\n"))) {
			t.Fatalf("warnings %v for a file that ends in a newline, or more than one", warnings)
		}
		// Written again by the writer, the records read back equal, and
		// without warnings.
		dir := t.TempDir()
		var again any
		switch recs := got.(type) {
		case []TrainRecord:
			for _, r := range recs {
				if err := appendJSONLine(dir, TrainHistoryFile, r); err != nil {
					t.Fatalf("writing %+v read from %q: %v", r, file, err)
				}
			}
			again, err = readBack(t, dir, TrainHistoryFile, ReadTrainHistory)
		case []EvalRecord:
			for _, r := range recs {
				if err := appendJSONLine(dir, EvalHistoryFile, r); err != nil {
					t.Fatalf("writing %+v read from %q: %v", r, file, err)
				}
			}
			again, err = readBack(t, dir, EvalHistoryFile, ReadEvalHistory)
		}
		if err != nil {
			t.Fatalf("reading back what was read from %q: %v", file, err)
		}
		if diff := cmp.Diff(got, again); diff != "" {
			t.Fatalf("records of %q written and read again (-first +again):\n%s", file, diff)
		}
	})
}

// readBack reads dir/name with read, failing t on a warning; a missing
// file (no records) reads as none.
func readBack[T any](t *testing.T, dir, name string, read func(r io.Reader, name string, warn func(error)) ([]T, error)) (any, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return read(bytes.NewReader(b), name, func(err error) { t.Fatalf("warning reading back: %v", err) })
}
