package sharding

import (
	"fmt"
	"maps"
	"runtime"
	"slices"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/parallel"
)

// Batch is one step's input: features and labels keyed by name, each with
// the batch along dimension 0. Labels is nil in Predict mode. Sparse holds
// sparse features, split by row (SplitSparse) and kept sparse.
type Batch struct {
	Features map[string]*tensor.Dense
	Labels   map[string]*tensor.Dense
	Sparse   map[string]SparseCOO
	// Release, when not nil, gives the batch's memory back to the input
	// that made it, for a later batch; nothing may read the batch after.
	// estimator.Train and Evaluate call it once a step and its hooks are
	// done with the batch. estimator.FromTensors sets it, so that its
	// batches are copied into a few buffers in turn rather than into new
	// memory every step.
	Release func()
}

// splitSparse is SplitSparse, except that one shard is s itself, checked
// (the shard is the batch: SplitSparse would copy every index and value
// to rebase no row).
func splitSparse(s SparseCOO, n int) ([]SparseCOO, error) {
	if n != 1 {
		return SplitSparse(s, n)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return []SparseCOO{s}, nil
}

// Rows returns the batch's row count, checking that every feature, label and
// sparse feature agrees on it and has a value per example (no zero-sized
// dimension after the first).
func (b Batch) Rows() (int, error) {
	rows, from := -1, ""
	check := func(kind, key string, shape []int) error {
		if len(shape) == 0 {
			return fmt.Errorf("%s %q: rank-0 tensor has no batch dimension", kind, key)
		}
		if slices.ContainsFunc(shape, func(d int) bool { return d < 0 }) {
			return fmt.Errorf("%s %q has shape %v, with a negative dimension", kind, key, shape)
		}
		if slices.Contains(shape[1:], 0) {
			return fmt.Errorf("%s %q has shape %v: a zero-sized dimension leaves its examples without values", kind, key, tensor.Shape(shape))
		}
		if rows < 0 {
			rows, from = shape[0], fmt.Sprintf("%s %q", kind, key)
			return nil
		}
		if shape[0] != rows {
			return fmt.Errorf("%s %q has %d rows (shape %v), %s has %d", kind, key, shape[0], shape, from, rows)
		}
		return nil
	}
	for _, part := range []struct {
		kind string
		m    map[string]*tensor.Dense
	}{{"feature", b.Features}, {"label", b.Labels}} {
		for _, k := range slices.Sorted(maps.Keys(part.m)) {
			if part.m[k] == nil {
				return 0, fmt.Errorf("%s %q is nil", part.kind, k)
			}
			if err := check(part.kind, k, part.m[k].Shape()); err != nil {
				return 0, err
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b.Sparse)) {
		if _, dup := b.Features[k]; dup {
			return 0, fmt.Errorf("feature %q is both dense and sparse", k)
		}
		if err := check("sparse feature", k, b.Sparse[k].DenseShape); err != nil {
			return 0, err
		}
	}
	if rows < 0 {
		return 0, fmt.Errorf("batch has no features")
	}
	return rows, nil
}

// Split splits b along dimension 0 into n batches of Sizes(rows, n) rows,
// feature by feature and label by label (b.Labels may be nil); a sparse
// feature is split by row (SplitSparse: rows rebased to the shard) into a
// sparse feature of each shard. The shards share b's memory, except the
// sparse features' parts, which are copies; they have no Release. It
// returns the shards and their row counts.
func (b Batch) Split(n int) ([]Batch, []int, error) {
	rows, err := b.Rows()
	if err != nil {
		return nil, nil, err
	}
	sizes, err := Sizes(rows, n)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Batch, n)
	feats, err := SplitMap(b.Features, n)
	if err != nil {
		return nil, nil, fmt.Errorf("features: %w", err)
	}
	var labels []map[string]*tensor.Dense
	if b.Labels != nil {
		if labels, err = SplitMap(b.Labels, n); err != nil {
			return nil, nil, fmt.Errorf("labels: %w", err)
		}
	}
	for i := range out {
		out[i].Features = feats[i]
		if labels != nil {
			out[i].Labels = labels[i]
		}
	}
	keys := slices.Sorted(maps.Keys(b.Sparse))
	parts := make([][]SparseCOO, len(keys))
	errs := make([]error, len(keys))
	// The features are split at once on the cores (each a pass over its
	// entries) when there are enough entries to pay for the hand-off; an
	// error is the first feature's, as one after another.
	nnz := 0
	for _, s := range b.Sparse {
		nnz += len(s.Indices)
	}
	g := min(runtime.GOMAXPROCS(0), len(keys))
	split := func(w int) {
		for i := w; i < len(keys); i += g {
			parts[i], errs[i] = splitSparse(b.Sparse[keys[i]], n)
		}
	}
	if g > 1 && nnz >= parallel.MinWork {
		parallel.Gang(g, split)
	} else {
		g = 1
		split(0)
	}
	for i, k := range keys {
		if errs[i] != nil {
			return nil, nil, fmt.Errorf("sparse feature %q: %w", k, errs[i])
		}
		for sh, p := range parts[i] {
			if out[sh].Sparse == nil {
				out[sh].Sparse = make(map[string]SparseCOO, len(keys))
			}
			out[sh].Sparse[k] = p
		}
	}
	return out, sizes, nil
}
