package columns

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/sharding"
)

// preparedRow is one record transformed, before its batch is put
// together: the values of the numeric outputs (Transformer.dense's
// numeric columns, in order, each its Dimension, normalized), and the
// ids of the categorical outputs (its indicators, then t.sparse, in
// order; the dropped ones left out), output k's ids[ends[k-1]:ends[k]],
// with their weights at the same places in ws when the Transformer has
// a weighted column (1 for an unweighted output's). hasLabel is whether
// the record has the label: its values in labelF, or labelI for class
// ids, and its example weight weight.
type preparedRow struct {
	floats []float32
	ids    []int64
	ws     []float32
	ends   []int32

	hasLabel bool
	labelF   []float32
	labelI   []int64
	weight   float32
}

// reset empties p, keeping its memory.
func (p *preparedRow) reset() {
	p.floats, p.ids, p.ends, p.labelF, p.labelI = p.floats[:0], p.ids[:0], p.ends[:0], p.labelF[:0], p.labelI[:0]
	if p.ws != nil {
		p.ws = p.ws[:0]
	}
	p.hasLabel, p.weight = false, 0
}

// clone is a copy of p in memory of its own, of its exact size: a row
// kept for later epochs.
func (p *preparedRow) clone() *preparedRow {
	c := &preparedRow{
		floats: exact(p.floats), ids: exact(p.ids), ends: exact(p.ends),
		labelF: exact(p.labelF), labelI: exact(p.labelI),
		hasLabel: p.hasLabel, weight: p.weight,
	}
	if p.ws != nil {
		c.ws = append(make([]float32, 0, len(p.ws)), p.ws...) // not nil: the Transformer has weights
	}
	return c
}

// exact is a copy of s of its length (nil when empty).
func exact[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

// rowLens is where a preparedRow's slices end, to cut a row out of an
// arena of several.
type rowLens struct{ floats, ids, ws, ends, labelF, labelI int }

func (p *preparedRow) lens() rowLens {
	return rowLens{len(p.floats), len(p.ids), len(p.ws), len(p.ends), len(p.labelF), len(p.labelI)}
}

// reserve grows p's slices for n more rows the size of those it holds
// (an arena of one row, about to take the batch's others).
func (p *preparedRow) reserve(n int) {
	p.floats = slices.Grow(p.floats, n*len(p.floats))
	p.ids = slices.Grow(p.ids, n*len(p.ids)+n)
	p.ws = slices.Grow(p.ws, n*len(p.ws))
	p.ends = slices.Grow(p.ends, n*len(p.ends))
	p.labelF = slices.Grow(p.labelF, n*len(p.labelF))
	p.labelI = slices.Grow(p.labelI, n*len(p.labelI))
}

// since is the row p's slices hold past at (sharing p's memory; ends
// relative to the row's ids).
func (p *preparedRow) since(at rowLens) preparedRow {
	row := preparedRow{
		floats: clip(p.floats, at.floats), ids: clip(p.ids, at.ids), ends: clip(p.ends, at.ends),
		labelF: clip(p.labelF, at.labelF), labelI: clip(p.labelI, at.labelI),
		hasLabel: p.hasLabel, weight: p.weight,
	}
	if p.ws != nil {
		row.ws = p.ws[at.ws:len(p.ws):len(p.ws)] // not nil, even when empty: the Transformer has weights
	}
	for k := range row.ends {
		row.ends[k] -= int32(at.ids)
	}
	return row
}

// idsOf is output k's ids and weights (nil when the Transformer has no
// weighted column).
func (p *preparedRow) idsOf(k int) ([]int64, []float32) {
	var start int32
	if k > 0 {
		start = p.ends[k-1]
	}
	var ws []float32
	if p.ws != nil {
		ws = p.ws[start:p.ends[k]]
	}
	return p.ids[start:p.ends[k]], ws
}

// prepare appends record ex's (the row-th of its batch) transformation
// to into.
func (t *Transformer) prepare(ex dataset.Example, row int, ps *rowState, into *preparedRow) error {
	ps.reset(ex, row)
	switch {
	case !t.weighted:
		into.ws = nil
	case into.ws == nil:
		into.ws = []float32{}
	}
	add := func(c CategoricalColumn) error {
		start := len(into.ids)
		ids, ws, err := bag(c, ex, row, into.ids, into.ws, ps)
		if err != nil {
			return err
		}
		into.ids = ids
		switch {
		case ws != nil:
			into.ws = ws
		case t.weighted: // unweighted: ones
			for range len(ids) - start {
				into.ws = append(into.ws, 1)
			}
		}
		into.ends = append(into.ends, int32(len(into.ids)))
		return nil
	}
	for _, d := range t.dense {
		if c := d.numeric; c != nil {
			n := len(into.floats)
			into.floats = slices.Grow(into.floats, c.Dimension())[:n+c.Dimension()]
			vals := into.floats[n:]
			if err := c.values(ex, row, vals); err != nil {
				return err
			}
			c.normalize(vals)
			continue
		}
		if err := add(d.cat); err != nil {
			return err
		}
	}
	for _, s := range t.sparse {
		if err := add(s.cat); err != nil {
			return err
		}
	}
	if t.label != nil {
		return t.label.prepare(ex, row, into)
	}
	return nil
}

// clip is s[from:], without s's spare capacity; nil when empty.
func clip[T any](s []T, from int) []T {
	if from == len(s) {
		return nil
	}
	return s[from:len(s):len(s)]
}

// assemble puts a batch together from its records' prepared rows: the
// batch Parse documents.
func (t *Transformer) assemble(rows []*preparedRow) (sharding.Batch, error) {
	n := len(rows)
	b := sharding.Batch{Features: map[string]*tensor.Dense{}}
	k, off := 0, 0 // the categorical output, the numeric values' offset
	for _, d := range t.dense {
		if c := d.numeric; c != nil {
			dim := c.Dimension()
			data := make([]float32, n*dim)
			for r, p := range rows {
				copy(data[r*dim:(r+1)*dim], p.floats[off:off+dim])
			}
			off += dim
			b.Features[d.name] = tensor.New(tensor.WithShape(append([]int{n}, c.shape...)...), tensor.WithBacking(data))
			continue
		}
		_, weighted := d.cat.(*WeightedColumn)
		dim := d.cat.NumBuckets()
		data := make([]float32, n*dim)
		for r, p := range rows {
			row := data[r*dim : (r+1)*dim]
			ids, ws := p.idsOf(k)
			for i, id := range ids {
				if weighted {
					row[id] += ws[i]
				} else {
					row[id]++
				}
			}
		}
		k++
		b.Features[d.name] = tensor.New(tensor.WithShape(n, dim), tensor.WithBacking(data))
	}
	if len(t.sparse) > 0 {
		b.Sparse = map[string]sharding.SparseCOO{}
	}
	for _, s := range t.sparse {
		_, weighted := s.cat.(*WeightedColumn)
		total, width := 0, 1
		for _, p := range rows {
			ids, _ := p.idsOf(k)
			total += len(ids)
			width = max(width, len(ids))
		}
		flat := make([]int, 0, 2*total) // row, position: the entries' indices
		vals := make([]int64, 0, total)
		var ws []float32
		if weighted {
			ws = make([]float32, 0, total)
		}
		for r, p := range rows {
			ids, w := p.idsOf(k)
			for j := range ids {
				flat = append(flat, r, j)
			}
			vals = append(vals, ids...)
			if weighted {
				ws = append(ws, w...)
			}
		}
		k++
		indices := make([][]int, total)
		for e := range indices {
			indices[e] = flat[2*e : 2*e+2 : 2*e+2]
		}
		shape := []int{n, width}
		b.Sparse[s.cat.Name()] = sharding.SparseCOO{Indices: indices, Values: tensor.New(tensor.WithShape(total), tensor.WithBacking(vals)), DenseShape: shape}
		if w, ok := s.cat.(*WeightedColumn); ok {
			b.Sparse[w.WeightsName()] = sharding.SparseCOO{Indices: indices, Values: tensor.New(tensor.WithShape(total), tensor.WithBacking(ws)), DenseShape: slices.Clone(shape)}
		}
	}
	if t.label != nil {
		labels, err := t.label.assemble(rows)
		if err != nil {
			return sharding.Batch{}, err
		}
		b.Labels = labels
	}
	return b, nil
}

// errNoExamples is Parse's error for an empty batch.
var errNoExamples = errors.New("columns: no examples to parse")

// rowScratch is PrepareRow's arena and state, reused between calls.
type rowScratch struct {
	row preparedRow
	ps  rowState
}

var scratchPool = sync.Pool{New: func() any { return new(rowScratch) }}

// PrepareRow transforms one record on its own (dataset.RowParser): what
// ParseRows puts together into the batch Parse makes. An error about the
// data is a *dataset.ParseError of record 0.
func (t *Transformer) PrepareRow(ex dataset.Example) (any, error) {
	sc := scratchPool.Get().(*rowScratch)
	defer func() {
		sc.ps.ex = nil // keeps no record
		scratchPool.Put(sc)
	}()
	sc.row.reset()
	if err := t.prepare(ex, 0, &sc.ps, &sc.row); err != nil {
		return nil, err
	}
	return sc.row.clone(), nil
}

// ParseRows is Parse of the examples whose rows PrepareRow made
// (dataset.RowParser).
func (t *Transformer) ParseRows(rows []any) (sharding.Batch, error) {
	if len(rows) == 0 {
		return sharding.Batch{}, errNoExamples
	}
	prepared := make([]*preparedRow, len(rows))
	for r, row := range rows {
		p, ok := row.(*preparedRow)
		if !ok || p == nil {
			return sharding.Batch{}, fmt.Errorf("columns: row %d is a %T, not one PrepareRow made", r, row)
		}
		prepared[r] = p
	}
	return t.assemble(prepared)
}

var _ dataset.RowParser = (*Transformer)(nil)
