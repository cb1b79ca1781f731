package tfevents

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ReadFile reads every event of an event file, checking each record's
// checksums. A file cut short inside its last record (a writer still
// writing, or killed mid-record) gives the events before the cut and an
// error wrapping io.ErrUnexpectedEOF; a checksum that does not match gives
// the events before it and an error wrapping ErrCorrupt.
func ReadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tfevents: %w", err)
	}
	defer f.Close()
	return readEvents(bufio.NewReader(f), path)
}

// readEvents reads the events of r, an event file named name, as ReadFile
// does.
func readEvents(r io.Reader, name string) ([]Event, error) {
	var events []Event
	for {
		data, err := readRecord(r)
		if errors.Is(err, io.EOF) {
			return events, nil
		}
		if err != nil {
			return events, fmt.Errorf("tfevents: %s: event %d: %w", name, len(events), err)
		}
		e, err := parseEvent(data)
		if err != nil {
			return events, fmt.Errorf("tfevents: %s: event %d: %w", name, len(events), err)
		}
		events = append(events, e)
	}
}

// Files returns the paths of dir's event files (names beginning
// FilePrefix) in name order, which is the order they were started in when
// written by one host.
func Files(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("tfevents: %w", err)
	}
	var out []string
	for _, de := range entries {
		if de.Type().IsRegular() && strings.HasPrefix(de.Name(), FilePrefix) {
			out = append(out, filepath.Join(dir, de.Name()))
		}
	}
	slices.Sort(out)
	return out, nil
}
