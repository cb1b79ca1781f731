package serving

// Sparse inputs: a variable-length list of values per example (a bag of
// ids, or their weights), decoded into a sharding.SparseCOO whose entry j
// of row r has index [r, j].

import (
	"context"
	"fmt"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/sharding"
)

// SparseServable is a Servable whose signatures may take sparse inputs
// (export.TensorInfo.Sparse), as *export.Predictor does. A version with a
// sparse input is served only by a SparseServable.
type SparseServable interface {
	Servable
	// RunSparse is Run with the sparse inputs in sparse: each of dense
	// shape [rows, the most values per example], the values of row r at
	// indices [r, 0], [r, 1], ... Errors about the features, an id out of
	// a table's range included, wrap export.ErrBadInput.
	RunSparse(ctx context.Context, signature string, features map[string]*tensor.Dense, sparse map[string]sharding.SparseCOO) (map[string]*tensor.Dense, error)
}

// bag gathers the values of a sparse input, example by example.
type bag struct {
	col     column
	indices [][]int
	width   int // the most values per example
}

func newBag(in inputSpec, rows, most int) (*bag, error) {
	col, err := newColumn(in.dtype, columnSize(rows, in.shape, most))
	if err != nil {
		return nil, err
	}
	return &bag{col: col, indices: [][]int{}, width: in.shape[0]}, nil
}

// add appends the values of example row: v is a list of scalars, or with
// single a scalar too (tf.Example's one value). lenient is column.add's.
func (b *bag) add(row int, v any, single, lenient bool) error {
	vals, ok := v.([]any)
	switch {
	case !ok && single && v != nil && !isObject(v):
		vals = []any{v}
	case !ok:
		return badRequestf("found %s, want a list of at most %d values (a sparse input: the example's values, possibly none)", jsonText(v), b.width)
	}
	if len(vals) > b.width {
		return badRequestf("found a list of %d values, want at most %d (a sparse input)", len(vals), b.width)
	}
	for j, x := range vals {
		if _, isList := x.([]any); isList || isObject(x) || x == nil {
			return badRequestf("value %d is %s, want a single value (a sparse input is a flat list of values per example; nested lists are too deep)", j, jsonText(x))
		}
		if err := b.col.add(x, lenient); err != nil {
			return err
		}
		b.indices = append(b.indices, []int{row, j})
	}
	return nil
}

// sparse returns the values of rows examples.
func (b *bag) sparse(rows int) sharding.SparseCOO {
	return sharding.SparseCOO{Indices: b.indices, Values: b.col.dense([]int{len(b.indices)}), DenseShape: []int{rows, b.width}}
}

// runOn runs a signature on s: with sparse inputs (sparse != nil) by
// RunSparse (newServedVersion checked that s has it), else by Run.
func runOn(ctx context.Context, s Servable, sig string, features map[string]*tensor.Dense, sparse map[string]sharding.SparseCOO) (map[string]*tensor.Dense, error) {
	if sparse == nil {
		return s.Run(ctx, sig, features)
	}
	ss, ok := s.(SparseServable)
	if !ok {
		return nil, fmt.Errorf("version %d has sparse inputs but its servable %T does not implement SparseServable", s.Version(), s)
	}
	return ss.RunSparse(ctx, sig, features, sparse)
}

// concatSparse joins the requests' sparse inputs along dimension 0: the
// entries of each request, its rows moved past the requests before it.
func (bt *batch) concatSparse() (map[string]sharding.SparseCOO, error) {
	out := map[string]sharding.SparseCOO{}
	for name, first := range bt.reqs[0].sparse {
		var indices [][]int
		values := make([]*tensor.Dense, len(bt.reqs))
		rows := 0
		for i, req := range bt.reqs {
			s, ok := req.sparse[name]
			if !ok || s.Values == nil || len(s.DenseShape) != len(first.DenseShape) {
				return nil, fmt.Errorf("sparse input %q: request %d does not have it as request 0 does", name, i)
			}
			for _, idx := range s.Indices {
				moved := append([]int{idx[0] + rows}, idx[1:]...)
				indices = append(indices, moved)
			}
			values[i] = s.Values
			rows += s.DenseShape[0]
		}
		vals, err := sharding.Concat(values)
		if err != nil {
			return nil, fmt.Errorf("sparse input %q: %w", name, err)
		}
		if indices == nil {
			indices = [][]int{}
		}
		out[name] = sharding.SparseCOO{Indices: indices, Values: vals, DenseShape: append([]int{rows}, first.DenseShape[1:]...)}
	}
	return out, nil
}
