package estimator

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// MaxHistoryLine is the longest line, in bytes, that ReadTrainHistory and
// ReadEvalHistory read: far more than any record the Estimator writes.
const MaxHistoryLine = 1 << 20

// ReadTrainHistory reads the records of a TrainHistoryFile from r, in the
// file's order; name names the file in errors. Every non-blank line must
// be one JSON object with "step" and "loss" ("time" optional): an error
// names the file and the line otherwise, or where a line is longer than
// MaxHistoryLine. A last line without its newline that does not parse, as
// a run stopped while writing it leaves, is skipped and reported to warn
// (when not nil).
func ReadTrainHistory(r io.Reader, name string, warn func(error)) ([]TrainRecord, error) {
	var out []TrainRecord
	err := readHistoryLines(r, name, warn, func(line []byte) error {
		var r struct {
			Step *int64    `json:"step"`
			Loss *float64  `json:"loss"`
			Time time.Time `json:"time"`
		}
		if err := decodeLine(line, &r); err != nil {
			return err
		}
		if r.Step == nil {
			return errors.New(`no "step"`)
		}
		if r.Loss == nil {
			return errors.New(`no "loss"`)
		}
		out = append(out, TrainRecord{Step: *r.Step, Loss: *r.Loss, Time: r.Time})
		return nil
	})
	return out, err
}

// ReadEvalHistory reads the records of an EvalHistoryFile from r, in the
// file's order, as ReadTrainHistory does: every line one JSON object with
// "step" and "metrics" (an object of numbers), "name" and "time"
// optional.
func ReadEvalHistory(r io.Reader, name string, warn func(error)) ([]EvalRecord, error) {
	var out []EvalRecord
	err := readHistoryLines(r, name, warn, func(line []byte) error {
		var r struct {
			Step    *int64                     `json:"step"`
			Time    time.Time                  `json:"time"`
			Name    string                     `json:"name"`
			Metrics map[string]json.RawMessage `json:"metrics"`
		}
		if err := decodeLine(line, &r); err != nil {
			return err
		}
		if r.Step == nil {
			return errors.New(`no "step"`)
		}
		if r.Metrics == nil {
			return errors.New(`no "metrics"`)
		}
		metrics := make(map[string]float64, len(r.Metrics))
		for k, raw := range r.Metrics {
			var v float64
			if err := json.Unmarshal(raw, &v); err != nil {
				return fmt.Errorf("metric %q is %s, not a number", k, raw)
			}
			metrics[k] = v
		}
		out = append(out, EvalRecord{Step: *r.Step, Time: r.Time, Name: r.Name, Metrics: metrics})
		return nil
	})
	return out, err
}

// decodeLine decodes one JSON object that must fill the line.
func decodeLine(line []byte, v any) error {
	if len(line) == 0 || line[0] != '{' {
		return errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}

// readHistoryLines calls fn with every non-blank line of r, trimmed. Errors
// name the file and the line. A last line without a newline that fn
// refuses is a torn write: reported to warn, not an error.
func readHistoryLines(r io.Reader, name string, warn func(error), fn func(line []byte) error) error {
	br := bufio.NewReader(r)
	var line []byte
	for n := 1; ; n++ {
		line = line[:0]
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			line = append(line, chunk...)
			if len(line) > MaxHistoryLine {
				return fmt.Errorf("%s:%d: a line longer than %d bytes, more than any history record", name, n, MaxHistoryLine)
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			if ferr := fn(t); ferr != nil {
				if err == io.EOF { // no newline: the last line, torn
					if warn != nil {
						warn(fmt.Errorf("%s:%d: skipped the last line, cut short (no newline) and unreadable (%v): a run stopped while writing it", name, n, ferr))
					}
					return nil
				}
				return fmt.Errorf("%s:%d: %w", name, n, ferr)
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}
