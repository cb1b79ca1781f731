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

// runSparse runs a request with sparse inputs on v, which newServedVersion
// checked is a SparseServable. Such requests are not merged with others.
func runSparse(ctx context.Context, v *servedVersion, sig string, features map[string]*tensor.Dense, sparse map[string]sharding.SparseCOO) (map[string]*tensor.Dense, error) {
	ss, ok := v.s.(SparseServable)
	if !ok {
		return nil, fmt.Errorf("version %d has sparse inputs but its servable %T does not implement SparseServable", v.version, v.s)
	}
	return ss.RunSparse(ctx, sig, features, sparse)
}
