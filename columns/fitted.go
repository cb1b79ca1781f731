package columns

import (
	"fmt"
)

// Fitted returns the Transformer's version of c, a column defined before
// Fit (which fits copies of the columns it is given) or anew, for a
// model function to read the Transformer's batches with: c with the
// statistics, boundaries and vocabularies the Transformer fitted to the
// data for the columns of the same names. It is an error unless that
// column is one whose batch feature the Transformer makes (Column) and
// has c's settings; an embedding column the Transformer does not have is
// fine when the Transformer makes its categorical column's feature (the
// table, of the embedding's dimension, is the model's). Fitted(c) for one
// of the Transformer's own columns is c.
func (t *Transformer) Fitted(c Column) (Column, error) {
	if c == nil || isNil(c) {
		return nil, fmt.Errorf("columns: nil column")
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("columns: %w", err)
	}
	fc, err := t.fitLike(c)
	if err != nil {
		return nil, err
	}
	if have, ok := t.Column(fc.Name()); ok {
		if !sameColumn(have, fc) {
			return nil, fmt.Errorf("columns: column %q is not the Transformer's column of that name: their settings differ", c.Name())
		}
		return have, nil
	}
	if e, ok := fc.(*EmbeddingColumn); ok && e.shared == nil {
		have, ok := t.makes[e.cat.Name()]
		if !ok {
			return nil, fmt.Errorf("columns: embedding column %q: the Transformer makes no feature %q of its categorical column: give it to Fit or NewTransformer", c.Name(), e.cat.Name())
		}
		if !sameColumn(have, e.cat) {
			return nil, fmt.Errorf("columns: embedding column %q: its categorical column %q is not the Transformer's column of that name: their settings differ", c.Name(), e.cat.Name())
		}
		return fc, nil
	}
	return nil, fmt.Errorf("columns: the Transformer makes no feature %q: give the column to Fit or NewTransformer", c.Name())
}

// fitLike returns c fitted as the Transformer's columns of the same names
// were: each column of c's (c included) that needs the data takes what
// the Transformer's column of its name and kind was fitted to.
func (t *Transformer) fitLike(c Column) (Column, error) {
	f := &fitter{seen: map[Column]bool{}}
	walk(c, f.visit) // a shared embedding's other columns too
	if len(f.stats)+len(f.quant)+len(f.vocab) == 0 {
		return c, nil
	}
	fitted := map[string]Column{}
	for _, tc := range t.cfg.Columns {
		walk(tc, func(x Column) {
			if _, dup := fitted[x.Name()]; !dup {
				fitted[x.Name()] = x
			}
		})
	}
	f.statsOf = map[*NumericColumn]*numStats{}
	for _, s := range f.stats {
		n, ok := fitted[s.c.Name()].(*NumericColumn)
		if !ok || n.normalizer == nil || !n.statsFitted {
			return nil, fmt.Errorf("columns: column %q needs the statistics of the data, and the Transformer has no standardized numeric column %q", c.Name(), s.c.Name())
		}
		f.statsOf[s.c] = &numStats{fitted: *n.normalizer}
	}
	f.boundOf = map[*BucketizedColumn][]float64{}
	for _, q := range f.quant {
		b, ok := fitted[q.c.Name()].(*BucketizedColumn)
		if !ok || b.quantiles == 0 {
			return nil, fmt.Errorf("columns: column %q needs quantiles of the data, and the Transformer has no bucketized column %q of quantiles", c.Name(), q.c.Name())
		}
		f.boundOf[q.c] = b.boundaries
	}
	f.vocabOf = map[*VocabularyColumn][]string{}
	for _, v := range f.vocab {
		vc, ok := fitted[v.c.Name()].(*VocabularyColumn)
		if !ok || !vc.fromData {
			return nil, fmt.Errorf("columns: column %q needs a vocabulary from the data, and the Transformer has no vocabulary column %q from the data", c.Name(), v.c.Name())
		}
		f.vocabOf[v.c] = vc.vocab
	}
	return f.clone(c, map[any]any{}), nil
}

// walk calls fn with c and every column c is made of.
func walk(c Column, fn func(Column)) {
	fn(c)
	switch c := c.(type) {
	case *BucketizedColumn:
		walk(c.source, fn)
	case *CrossedColumn:
		for _, k := range c.keys {
			if col, ok := k.(Column); ok {
				walk(col, fn)
			}
		}
	case *WeightedColumn:
		walk(c.cat, fn)
	case *IndicatorColumn:
		walk(c.cat, fn)
	case *EmbeddingColumn:
		walk(c.cat, fn)
		if c.shared != nil {
			for _, o := range c.shared.cats {
				walk(o, fn)
			}
		}
	}
}
