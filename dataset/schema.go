package dataset

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Column describes one column of a CSV file: its name, the kind of
// Feature its values become, and what an empty value means.
//
// A value of a KindInt64 column is a base-10 integer (strconv.ParseInt)
// and becomes an Int64s of one value; a value of a KindFloat column is a
// number (strconv.ParseFloat, so also "NaN", "Inf" and hex floats)
// rounded to the nearest float32, as tf.Example stores floats, and
// becomes a Floats of one value; a value of a KindBytes column is any
// string and becomes a Bytes of one value. Values are taken as they are,
// spaces included: " 5" is not an integer.
type Column struct {
	Name string
	// Kind is KindInt64, KindFloat or KindBytes.
	Kind Kind
	// Optional lets a value be empty: it then takes Default. An empty
	// value in a column that is not Optional is an error.
	Optional bool
	// Default is the value, written as in the file, that an empty value
	// of an Optional column takes: "" is 0 for numbers (write "NaN" for
	// a float NaN) and the empty string for bytes.
	Default string
}

// Schema is the columns of a CSV file, in the file's order: every column
// of the file, whether the reader keeps it or not.
type Schema []Column

// Validate is an error when s has no columns, a column without a name or
// with a name used twice, a kind that is not KindInt64, KindFloat or
// KindBytes, or a default that is not a value of its column.
func (s Schema) Validate() error {
	_, err := s.compile()
	return err
}

// String is s as a Go composite literal, one column a line, which a user
// can paste into code (InferCSVSchema's result, for one).
func (s Schema) String() string {
	var b strings.Builder
	b.WriteString("dataset.Schema{\n")
	for _, c := range s {
		fmt.Fprintf(&b, "\t{Name: %q, Kind: dataset.%s", c.Name, kindIdent(c.Kind))
		if c.Optional {
			b.WriteString(", Optional: true")
		}
		if c.Default != "" {
			fmt.Fprintf(&b, ", Default: %q", c.Default)
		}
		b.WriteString("},\n")
	}
	b.WriteString("}")
	return b.String()
}

func kindIdent(k Kind) string {
	switch k {
	case KindNone:
		return "KindNone"
	case KindInt64:
		return "KindInt64"
	case KindFloat:
		return "KindFloat"
	case KindBytes:
		return "KindBytes"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// column is a Column ready to parse values: its default parsed.
type column struct {
	Column
	defInt   int64
	defFloat float32
}

func (s Schema) compile() ([]column, error) {
	if len(s) == 0 {
		return nil, errors.New("schema has no columns")
	}
	cols := make([]column, len(s))
	seen := make(map[string]int, len(s))
	for i, c := range s {
		where := fmt.Sprintf("schema column %d", i+1)
		if c.Name == "" {
			return nil, fmt.Errorf("%s has no name", where)
		}
		where = fmt.Sprintf("schema column %q (%d)", c.Name, i+1)
		if j, ok := seen[c.Name]; ok {
			return nil, fmt.Errorf("%s: the name of column %d too", where, j+1)
		}
		seen[c.Name] = i
		cols[i].Column = c
		switch c.Kind {
		case KindInt64, KindFloat, KindBytes:
		default:
			return nil, fmt.Errorf("%s: kind %v; a column is KindInt64, KindFloat or KindBytes", where, c.Kind)
		}
		if c.Default != "" && !c.Optional {
			return nil, fmt.Errorf("%s: Default %q set on a column that is not Optional", where, c.Default)
		}
		if c.Default == "" {
			continue
		}
		var err error
		switch c.Kind {
		case KindInt64:
			cols[i].defInt, err = parseInt(c.Default)
		case KindFloat:
			cols[i].defFloat, err = parseFloat(c.Default)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: Default: %w", where, err)
		}
	}
	return cols, nil
}

// ErrNotInt and ErrNotNumber are what a value that an int64 or a float
// column cannot hold wraps.
var (
	ErrNotInt    = errors.New("is not an integer")
	ErrNotNumber = errors.New("is not a number")
)

// valueError is a value's error: the value quoted, then why.
type valueError struct {
	value string
	err   error
	why   string
}

func (e *valueError) Error() string {
	if e.why != "" {
		return fmt.Sprintf("%q %v (%s)", e.value, e.err, e.why)
	}
	return fmt.Sprintf("%q %v", e.value, e.err)
}

func (e *valueError) Unwrap() error { return e.err }

func parseInt(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		why := ""
		if errors.Is(err, strconv.ErrRange) {
			why = "out of int64's range"
		}
		return 0, &valueError{value: s, err: ErrNotInt, why: why}
	}
	return v, nil
}

func parseFloat(s string) (float32, error) {
	v, err := strconv.ParseFloat(s, 32)
	if err != nil {
		why := ""
		if errors.Is(err, strconv.ErrRange) {
			why = "out of float32's range"
		}
		return 0, &valueError{value: s, err: ErrNotNumber, why: why}
	}
	return float32(v), nil
}
