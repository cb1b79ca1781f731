package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/towerflow/towerflow/estimator"
)

// The history files and their records are the estimator's.
const (
	TrainHistoryFile = estimator.TrainHistoryFile
	EvalHistoryFile  = estimator.EvalHistoryFile
)

type (
	trainRecord = estimator.TrainRecord
	evalRecord  = estimator.EvalRecord
)

// readTrainHistory reads a train_history.jsonl file. A missing file gives
// an error wrapping fs.ErrNotExist.
func readTrainHistory(path string) ([]trainRecord, error) {
	var out []trainRecord
	err := readJSONLines(path, func(line []byte) error {
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
		out = append(out, trainRecord{Step: *r.Step, Loss: *r.Loss, Time: r.Time})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return dedupSteps(out, func(r trainRecord) (string, int64) { return "", r.Step }), nil
}

// readEvalHistory reads an eval_history.jsonl file. A missing file gives an
// error wrapping fs.ErrNotExist.
func readEvalHistory(path string) ([]evalRecord, error) {
	var out []evalRecord
	err := readJSONLines(path, func(line []byte) error {
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
		out = append(out, evalRecord{Step: *r.Step, Time: r.Time, Name: r.Name, Metrics: metrics})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return dedupSteps(out, func(r evalRecord) (string, int64) { return r.Name, r.Step }), nil
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

// readJSONLines calls fn with every non-blank line of the file, trimmed.
// Errors name the file and, for fn's errors, the line number.
func readJSONLines(path string, fn func(line []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err // *fs.PathError names the file
	}
	defer f.Close()
	br := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			if ferr := fn(t); ferr != nil {
				return fmt.Errorf("%s:%d: %w", path, n, ferr)
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// dedupSteps sorts records by their key, a name (of an evaluation) and a
// step, and where a key occurs more than once (a run resumed from a
// checkpoint older than its last logged step) keeps the one written last.
func dedupSteps[T any](rs []T, key func(T) (string, int64)) []T {
	slices.SortStableFunc(rs, func(a, b T) int {
		na, sa := key(a)
		nb, sb := key(b)
		return cmp.Or(strings.Compare(na, nb), cmp.Compare(sa, sb))
	})
	out := rs[:0]
	for i, r := range rs {
		if i+1 < len(rs) {
			n, s := key(r)
			if nn, ns := key(rs[i+1]); nn == n && ns == s {
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// isNotExist reports whether err says a file does not exist.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
