package main

import (
	"cmp"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

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

// readTrainHistory reads a train_history.jsonl file
// (estimator.ReadTrainHistory), skipped torn last line reported to warn,
// sorted by step. A missing file gives an error wrapping fs.ErrNotExist.
func readTrainHistory(path string, warn func(error)) ([]trainRecord, error) {
	out, err := readHistoryFile(path, warn, estimator.ReadTrainHistory)
	if err != nil {
		return nil, err
	}
	return dedupSteps(out, func(r trainRecord) (string, int64) { return "", r.Step }), nil
}

// readEvalHistory reads an eval_history.jsonl file
// (estimator.ReadEvalHistory), skipped torn last line reported to warn,
// sorted by name and step. A missing file gives an error wrapping
// fs.ErrNotExist.
func readEvalHistory(path string, warn func(error)) ([]evalRecord, error) {
	out, err := readHistoryFile(path, warn, estimator.ReadEvalHistory)
	if err != nil {
		return nil, err
	}
	return dedupSteps(out, func(r evalRecord) (string, int64) { return r.Name, r.Step }), nil
}

// readHistoryFile opens path and reads it with read.
func readHistoryFile[T any](path string, warn func(error), read func(io.Reader, string, func(error)) ([]T, error)) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *fs.PathError names the file
	}
	defer f.Close()
	return read(f, path, warn)
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
