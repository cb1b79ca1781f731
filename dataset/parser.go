package dataset

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/guard"
	"github.com/towerflow/towerflow/sharding"
)

// Parser turns a batch of raw records into the batch a model takes: its
// features (dense and sparse) and, when the records carry them, its
// labels. It is what a Pipeline runs on its workers, and what an export
// records (estimator.Preprocess) so that serving turns raw requests into
// the same tensors (export.RegisterPreprocessor; a BoundedParser is told
// the signature's widths there).
//
// Parse is called from several goroutines at once, and must be safe for
// concurrent use; it must not keep or change examples. An error about
// one example's feature should be a *ParseError, which callers turn into
// the file and record (in a Pipeline) or the request's example (in
// serving) it came from.
type Parser interface {
	Parse(examples []Example) (sharding.Batch, error)
}

// RawSpecer is a Parser that can describe the raw features it reads, as
// tf.feature_column.make_parse_example_spec does: serving takes a raw
// value of such a feature as the kind its Dtype says (a JSON number as a
// float for a float feature, for one), and describes the feature in a
// model's metadata. Specs with Label set describe labels, which serving
// requests do not carry.
type RawSpecer interface {
	RawSpec() map[string]FeatureSpec
}

// BoundedParser is a Parser told the most values of its batch's sparse
// features an example may have, as its caller refuses more: serving
// gives it its signature's widths, by sparse input (the names of the
// batch's Sparse features, not of the examples' raw features; each at
// least 1). ParseBounded is Parse, but it may refuse an example that
// would make more values of a sparse feature named in most than most
// gives, with a *ParseError of that example, as soon as it knows, before
// making them; a feature not in most has no bound, and ParseBounded(ex,
// nil) is Parse(ex). As Parse, it is called from several goroutines at
// once, and must not keep or change examples or most. A Parser whose
// features can be many more than the raw values they come from (a cross
// of features, whose values are the product of theirs) implements it so
// that a request cannot make it build more than the signature takes.
type BoundedParser interface {
	Parser
	ParseBounded(examples []Example, most map[string]int) (sharding.Batch, error)
}

// SpecParser is ParseExamples with a spec, as a Parser: the Parser a
// Pipeline with a Spec runs.
type SpecParser map[string]FeatureSpec

// Parse is ParseExamples(examples, s).
func (s SpecParser) Parse(examples []Example) (sharding.Batch, error) {
	return ParseExamples(examples, s)
}

// RawSpec is s.
func (s SpecParser) RawSpec() map[string]FeatureSpec { return s }

// Check is an error naming the first feature of s that ParseExamples
// cannot parse (its dtype, shape or default), or saying s is empty.
func (s SpecParser) Check() error {
	if len(s) == 0 {
		return fmt.Errorf("no feature spec")
	}
	for name, fs := range s {
		if _, err := fs.check(); err != nil {
			return fmt.Errorf("feature %q: %w", name, err)
		}
	}
	return nil
}

// RowParser is a Parser that transforms each record on its own before it
// puts the batch together: PrepareRow(ex) is one record's part, and
// ParseRows, given the parts of examples, makes the batch
// Parse(examples) makes. A Pipeline with Cache keeps each record's part
// with the record, so that its later epochs neither decode nor
// transform it again, and only put batches together (tf.data's map
// before cache). Both are called from several goroutines
// at once; a row PrepareRow returned is read, never changed, and may be
// given to ParseRows many times. An error of PrepareRow about the data
// is a *ParseError of example 0.
type RowParser interface {
	Parser
	PrepareRow(ex Example) (any, error)
	ParseRows(rows []any) (sharding.Batch, error)
}

// ErrParser is wrapped by ParseGuarded's errors that are the parser's
// own failures, not its errors about the examples: a panic, a batch
// without a row for each example.
var ErrParser = errors.New("parser failed")

// ParseGuarded runs p.Parse, as a Pipeline does (serving runs
// ParseGuardedBounded): a Parser is user code. The error Parse returns is returned as it is; a panic inside
// Parse, or a batch with a tensor that has not one row for each example,
// is an error wrapping ErrParser that names the parser's type.
func ParseGuarded(p Parser, examples []Example) (b sharding.Batch, err error) {
	return guardParse(p, "Parse", len(examples), func() (sharding.Batch, error) { return p.Parse(examples) })
}

// ParseGuardedBounded is ParseGuarded with p.ParseBounded(examples, most)
// where p is a BoundedParser, p.Parse(examples) where not.
func ParseGuardedBounded(p Parser, examples []Example, most map[string]int) (b sharding.Batch, err error) {
	bp, ok := p.(BoundedParser)
	if !ok {
		return ParseGuarded(p, examples)
	}
	return guardParse(p, "ParseBounded", len(examples), func() (sharding.Batch, error) { return bp.ParseBounded(examples, most) })
}

// parseRowsGuarded is ParseGuarded for a RowParser, with each record's
// row from rows, PrepareRow making (and setting) the nil ones from
// example(i), record i's Example. An error of PrepareRow is a
// *ParseError of its record's index when it is about the data, a
// *recordError of its record otherwise (a panic wrapping ErrParser).
func parseRowsGuarded(p RowParser, rows []any, example func(i int) (Example, error)) (sharding.Batch, error) {
	for i, row := range rows {
		if row != nil {
			continue
		}
		ex, err := example(i)
		if err != nil {
			return sharding.Batch{}, err
		}
		err = guard.Call(fmt.Sprintf("parser %T", p), "PrepareRow", func() error {
			var err error
			row, err = p.PrepareRow(ex)
			return err
		})
		var pe *guard.PanicError
		var parse *ParseError
		switch {
		case errors.As(err, &pe):
			return sharding.Batch{}, &recordError{i, fmt.Errorf("%w: %w", ErrParser, err)}
		case errors.As(err, &parse):
			e := *parse
			e.Example = i
			return sharding.Batch{}, &e
		case err != nil:
			return sharding.Batch{}, &recordError{i, err}
		}
		rows[i] = row
	}
	// ParseRows gets a copy: rows keeps the prepared ones whatever it does
	// with its slice.
	return guardParse(p, "ParseRows", len(rows), func() (sharding.Batch, error) { return p.ParseRows(slices.Clone(rows)) })
}

// recordError is an error about one record of a batch, by its index.
type recordError struct {
	record int
	err    error
}

func (e *recordError) Error() string { return fmt.Sprintf("record %d: %v", e.record, e.err) }
func (e *recordError) Unwrap() error { return e.err }

// guardParse runs parse, the method method of p, for ParseGuarded.
func guardParse(p Parser, method string, rows int, parse func() (sharding.Batch, error)) (b sharding.Batch, err error) {
	err = guard.Call(fmt.Sprintf("parser %T", p), method, func() error {
		b, err = parse()
		return err
	})
	var pe *guard.PanicError
	if errors.As(err, &pe) {
		return sharding.Batch{}, fmt.Errorf("%w: %w", ErrParser, err)
	}
	if err != nil {
		return sharding.Batch{}, err
	}
	if err := checkRows(b, rows); err != nil {
		return sharding.Batch{}, fmt.Errorf("%w: parser %T: %w", ErrParser, p, err)
	}
	return b, nil
}

// checkRows checks that every tensor of b has rows rows.
func checkRows(b sharding.Batch, rows int) error {
	var bad []string
	dense := func(what string, m map[string]*tensor.Dense) {
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if t := m[name]; t == nil || len(t.Shape()) == 0 || t.Shape()[0] != rows {
				bad = append(bad, fmt.Sprintf("%s %q", what, name))
			}
		}
	}
	dense("feature", b.Features)
	dense("label", b.Labels)
	for _, name := range slices.Sorted(maps.Keys(b.Sparse)) {
		if s := b.Sparse[name]; len(s.DenseShape) == 0 || s.DenseShape[0] != rows {
			bad = append(bad, fmt.Sprintf("sparse feature %q", name))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("a batch of %d examples gave %s without %d rows", rows, strings.Join(bad, ", "), rows)
	}
	return nil
}
