package columns

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/towerflow/towerflow/dataset"
)

// Fit reads src to its end once and returns the Transformer of cfg with
// every column fitted to the data:
//
//   - Standardize: the mean and population standard deviation of the
//     column's values present in the data (missing values and NaNs, which
//     take the default, are left out); a column whose values do not vary
//     gets a standard deviation of 1.
//   - BucketizedQuantiles(source, n): boundaries at the values of rank
//     ⌊k·N/n⌋ (k = 1 … n-1) of the N sorted values the source gives
//     (defaults and normalizer applied, as the bucketizer sees them), with
//     repeats and the smallest value dropped (so that no bucket of the
//     data's range is empty; constant data gets one bucket). The pass keeps these columns' values in memory
//     (8 bytes a value).
//   - VocabularyFromData: the distinct values, most frequent first (ties
//     in byte order), those seen fewer than MinCount times left out, at
//     most MaxSize of them.
//
// Columns that need nothing from the data are kept as they are. A
// column's feature without a default that no record has is an error
// naming it and the features the records have: a misspelled name would
// otherwise train a column on nothing (TensorFlow's "not in features
// dictionary"); the label and the example weight may be absent (data to
// fit on may be unlabelled). Bad data
// is an error naming the column and wrapping a *dataset.ParseError whose
// Example is the record's number in src (counted from 0); a cancelled
// ctx stops the pass with ctx's error.
func Fit(ctx context.Context, src dataset.Source, cfg Config) (*Transformer, error) {
	if src == nil {
		return nil, errors.New("columns: fit: nil source")
	}
	f := &fitter{seen: map[Column]bool{}, keys: map[string]bool{}}
	for i, c := range cfg.Columns {
		if c == nil || isNil(c) {
			return nil, fmt.Errorf("columns: fit: column %d is nil", i)
		}
		if err := c.validate(); err != nil {
			return nil, fmt.Errorf("columns: fit: %w", err)
		}
		f.visit(c)
	}
	need := required(cfg)
	record := 0
	for ; ; record++ {
		if record%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("columns: fit: after %d records: %w", record, err)
			}
		}
		ex, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("columns: fit: reading record %d: %w", record, err)
		}
		if err := f.add(ex, record); err != nil {
			return nil, err
		}
		for key := range need {
			if _, ok := ex[key]; ok {
				delete(need, key)
			}
		}
		if record < keysListed {
			for k := range ex {
				f.keys[k] = true
			}
		}
	}
	if len(need) > 0 {
		return nil, fmt.Errorf("columns: fit: %w", missingError(need, f.keys, record))
	}
	if err := f.finish(record); err != nil {
		return nil, err
	}
	fitted := Config{Label: cfg.Label, Weight: cfg.Weight}
	memo := map[any]any{}
	for _, c := range cfg.Columns {
		fitted.Columns = append(fitted.Columns, f.clone(c, memo))
	}
	t, err := newTransformer(fitted)
	if err != nil {
		return nil, fmt.Errorf("columns: fit: %w", err)
	}
	return t, nil
}

// required is the features of cfg's columns that a record may not lack
// everywhere: those without a default (labels and example weights aside:
// data to fit on may be unlabelled).
func required(cfg Config) map[string]bool {
	need := map[string]bool{}
	for key, spec := range rawSpec(cfg) {
		if !spec.Label && spec.Default.Len() == 0 {
			need[key] = true
		}
	}
	return need
}

// missingError is the error of the features need that none of the
// records fitted on has: a name misspelled, or the wrong files, which
// would otherwise train a column on nothing. have is the features of the
// first records.
func missingError(need, have map[string]bool, records int) error {
	missing := slices.Sorted(maps.Keys(need))
	for i, key := range missing {
		missing[i] = strconv.Quote(key)
	}
	seen := slices.Sorted(maps.Keys(have))
	const most = 20
	list := strings.Join(seen, ", ")
	if len(seen) > most {
		list = strings.Join(seen[:most], ", ") + fmt.Sprintf(" and %d more", len(seen)-most)
	}
	if len(seen) == 0 {
		list = "none"
	}
	what := "feature " + missing[0]
	if len(missing) > 1 {
		what = "features " + strings.Join(missing, ", ")
	}
	whose := "the records have"
	if records > keysListed {
		whose = fmt.Sprintf("the first %d records have", keysListed)
	}
	return fmt.Errorf("no record of the %d fitted on has %s (a misspelled name, or the wrong files?); %s: %s", records, what, whose, list)
}

// keysListed is how many records' features an error of a feature no
// record has lists.
const keysListed = 1000

// fitter gathers, over the records, what the columns that need the data
// need: numbers for the statistics, values for quantiles, counts for
// vocabularies; each column once, in the order met.
type fitter struct {
	seen  map[Column]bool
	keys  map[string]bool // the features of the first keysListed records
	stats []*numStats
	quant []*quantValues
	vocab []*vocabCounts

	statsOf map[*NumericColumn]*numStats
	boundOf map[*BucketizedColumn][]float64
	vocabOf map[*VocabularyColumn][]string
	buf     []float32
}

type numStats struct {
	c        *NumericColumn
	n        float64
	mean, m2 float64
	fitted   Normalizer
}

type quantValues struct {
	c    *BucketizedColumn
	vals []float64
}

type vocabCounts struct {
	c      *VocabularyColumn
	counts map[string]int
}

func isNil(c Column) bool {
	switch c := c.(type) {
	case *NumericColumn:
		return c == nil
	case *BucketizedColumn:
		return c == nil
	case *VocabularyColumn:
		return c == nil
	case *HashBucketColumn:
		return c == nil
	case *IdentityColumn:
		return c == nil
	case *CrossedColumn:
		return c == nil
	case *WeightedColumn:
		return c == nil
	case *IndicatorColumn:
		return c == nil
	case *EmbeddingColumn:
		return c == nil
	}
	return false
}

// visit notes c and the columns it is made of that need the data.
func (f *fitter) visit(c Column) {
	if f.seen[c] {
		return
	}
	f.seen[c] = true
	switch c := c.(type) {
	case *NumericColumn:
		if !c.fitted() {
			f.stats = append(f.stats, &numStats{c: c})
		}
	case *BucketizedColumn:
		f.visit(c.source)
		if c.quantiles > 0 && c.boundaries == nil {
			f.quant = append(f.quant, &quantValues{c: c})
		}
	case *VocabularyColumn:
		if !c.fitted() {
			f.vocab = append(f.vocab, &vocabCounts{c: c, counts: map[string]int{}})
		}
	case *CrossedColumn:
		for _, k := range c.keys {
			if col, ok := k.(Column); ok {
				f.visit(col)
			}
		}
	case *WeightedColumn:
		f.visit(c.cat)
	case *IndicatorColumn:
		f.visit(c.cat)
	case *EmbeddingColumn:
		f.visit(c.cat)
		if c.shared != nil {
			// The table's size is all of its columns'.
			for _, o := range c.shared.cats {
				f.visit(o)
			}
		}
	}
}

// add takes in record ex, the record-th of the source.
func (f *fitter) add(ex dataset.Example, record int) error {
	for _, s := range f.stats {
		feat := ex[s.c.key]
		if feat.Len() == 0 {
			continue
		}
		vals := f.values(s.c.Dimension())
		if err := s.c.values(ex, record, vals); err != nil {
			return fmt.Errorf("columns: fit: column %q: %w", s.c.Name(), err)
		}
		for i, x := range vals {
			if feat.Floats != nil && math.IsNaN(float64(feat.Floats[i])) {
				continue // missing: took the default
			}
			// Welford's running mean and sum of squared deviations.
			s.n++
			d := float64(x) - s.mean
			s.mean += d / s.n
			s.m2 += d * (float64(x) - s.mean)
		}
	}
	for _, q := range f.quant {
		vals := f.values(q.c.source.Dimension())
		if err := q.c.source.values(ex, record, vals); err != nil {
			return fmt.Errorf("columns: fit: column %q: %w", q.c.Name(), err)
		}
		for _, x := range vals {
			q.vals = append(q.vals, float64(x))
		}
	}
	for _, v := range f.vocab {
		err := stringValues(ex, record, v.c.key, v.c.describe, func(b []byte) error {
			if len(b) == 0 { // a missing value, which Parse drops
				return nil
			}
			v.counts[string(b)]++
			return nil
		})
		if err != nil {
			return fmt.Errorf("columns: fit: column %q: %w", v.c.Name(), err)
		}
	}
	return nil
}

func (f *fitter) values(n int) []float32 {
	if cap(f.buf) < n {
		f.buf = make([]float32, n)
	}
	return f.buf[:n]
}

// finish computes the statistics, boundaries and vocabularies from the
// records read.
func (f *fitter) finish(records int) error {
	f.statsOf = map[*NumericColumn]*numStats{}
	for _, s := range f.stats {
		if s.n == 0 {
			return fmt.Errorf("columns: fit: column %q: no values in the %d records to standardize with", s.c.Name(), records)
		}
		std := math.Sqrt(s.m2 / s.n)
		if !(std > 0) || math.IsInf(std, 0) || math.IsInf(s.mean, 0) {
			if math.IsInf(std, 0) || math.IsInf(s.mean, 0) {
				return fmt.Errorf("columns: fit: column %q: mean %v, standard deviation %v: the values overflow", s.c.Name(), s.mean, std)
			}
			std = 1
		}
		s.fitted = Normalizer{Mean: s.mean, Stddev: std, FromData: true}
		f.statsOf[s.c] = s
	}
	f.boundOf = map[*BucketizedColumn][]float64{}
	for _, q := range f.quant {
		if len(q.vals) == 0 {
			return fmt.Errorf("columns: fit: column %q: no values in the %d records to take quantiles of", q.c.Name(), records)
		}
		src := q.c.source
		norm := src.normalizer
		if s, ok := f.statsOf[src]; ok {
			norm = &s.fitted
		}
		if norm != nil {
			for i, x := range q.vals {
				// As normalize does it, in float32.
				q.vals[i] = float64(float32((x - norm.Mean) / norm.Stddev))
			}
		}
		f.boundOf[q.c] = quantileBoundaries(q.vals, q.c.quantiles)
		q.vals = nil
	}
	f.vocabOf = map[*VocabularyColumn][]string{}
	for _, v := range f.vocab {
		f.vocabOf[v.c] = vocabularyOf(v.counts, v.c.minCount, v.c.maxSize)
	}
	return nil
}

// quantileBoundaries sorts vals and returns the boundaries of n buckets
// of about equal counts: the values of rank ⌊k·len/n⌋, k = 1 … n-1,
// repeats and the smallest value (below which no value falls) dropped;
// never nil.
func quantileBoundaries(vals []float64, n int) []float64 {
	slices.Sort(vals)
	out := []float64{}
	for k := 1; k < n; k++ {
		b := vals[min(k*len(vals)/n, len(vals)-1)]
		if b > vals[0] && (len(out) == 0 || b > out[len(out)-1]) {
			out = append(out, b)
		}
	}
	return out
}

// vocabularyOf is the vocabulary of counts: values seen at least
// minCount times, most frequent first, ties in byte order, at most
// maxSize (0: no limit) of them; never nil.
func vocabularyOf(counts map[string]int, minCount, maxSize int) []string {
	out := []string{}
	for v, n := range counts {
		if n >= minCount {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	if maxSize > 0 && len(out) > maxSize {
		out = out[:maxSize]
	}
	return out
}

// clone returns c with what was fitted set, sharing what did not change;
// memo maps each column (and shared table) to its clone, so that a
// column used twice stays one.
func (f *fitter) clone(c Column, memo map[any]any) Column {
	if d, ok := memo[c]; ok {
		return d.(Column)
	}
	var out Column = c
	switch c := c.(type) {
	case *NumericColumn:
		if s, ok := f.statsOf[c]; ok {
			d := *c
			n := s.fitted
			d.normalizer, d.statsFitted = &n, true
			out = &d
		}
	case *BucketizedColumn:
		src := f.clone(c.source, memo).(*NumericColumn)
		b, fit := f.boundOf[c]
		if src != c.source || fit {
			d := *c
			d.source = src
			if fit {
				d.boundaries = b
			}
			out = &d
		}
	case *VocabularyColumn:
		if v, ok := f.vocabOf[c]; ok {
			d := *c
			d.setVocabulary(v)
			out = &d
		}
	case *CrossedColumn:
		d := *c
		d.keys = make([]Crossable, len(c.keys))
		changed := false
		for i, k := range c.keys {
			d.keys[i] = k
			if col, ok := k.(Column); ok {
				d.keys[i] = f.clone(col, memo).(Crossable)
				changed = changed || d.keys[i] != k
			}
		}
		if changed {
			out = &d
		}
	case *WeightedColumn:
		if cat := f.clone(c.cat, memo).(CategoricalColumn); cat != c.cat {
			d := *c
			d.cat = cat
			out = &d
		}
	case *IndicatorColumn:
		if cat := f.clone(c.cat, memo).(CategoricalColumn); cat != c.cat {
			out = &IndicatorColumn{cat: cat}
		}
	case *EmbeddingColumn:
		cat := f.clone(c.cat, memo).(CategoricalColumn)
		sh := c.shared
		if sh != nil {
			if d, ok := memo[sh]; ok {
				sh = d.(*sharedTable)
			} else {
				n := &sharedTable{name: sh.name}
				for _, o := range sh.cats {
					n.cats = append(n.cats, f.clone(o, memo).(CategoricalColumn))
				}
				memo[sh] = n
				sh = n
			}
		}
		if cat != c.cat || sh != c.shared {
			d := *c
			d.cat, d.shared = cat, sh
			out = &d
		}
	}
	memo[c] = out
	return out
}
