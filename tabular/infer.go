// Package tabular builds a canned model for a table without code, as
// `towerflow tabular` does: from a sample of the training data (Sample)
// it infers each column's feature column and the head from the label
// (Infer); the decisions are data only (a Plan), to print, test and
// change before any model exists. Plan.Columns makes them package
// columns' feature columns, Plan.CannedHead package canned's head, and Run
// does it all: infer, fit the columns, train a linear, DNN or wide & deep
// canned estimator, evaluate and export (docs/tabular.md).
package tabular

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/towerflow/towerflow/dataset"
)

// HeadKind is the kind of a model's head.
type HeadKind int

const (
	// InferHead lets Infer choose from the label's values.
	InferHead HeadKind = iota
	Binary
	MultiClass
	Regression
)

func (k HeadKind) String() string {
	switch k {
	case InferHead:
		return "infer"
	case Binary:
		return "binary"
	case MultiClass:
		return "multiclass"
	case Regression:
		return "regression"
	}
	return fmt.Sprintf("HeadKind(%d)", int(k))
}

// ParseHeadKind is the HeadKind that String names ("" is InferHead).
func ParseHeadKind(s string) (HeadKind, error) {
	for _, k := range []HeadKind{InferHead, Binary, MultiClass, Regression} {
		if s == k.String() {
			return k, nil
		}
	}
	if s == "" {
		return InferHead, nil
	}
	return 0, fmt.Errorf("head %q: want binary, multiclass or regression", s)
}

// ColumnKind is how a feature becomes model input.
type ColumnKind int

const (
	// Number: a standardized numeric column in the deep part, and
	// bucketized at the data's quantiles in the wide (linear) part.
	Number ColumnKind = iota + 1
	// Vocabulary: a categorical column with its vocabulary taken from the
	// training data and an out-of-vocabulary bucket; one-hot or embedded
	// in the deep part.
	Vocabulary
	// Hashed: a categorical column hashed into buckets (too many distinct
	// values for a vocabulary), embedded in the deep part.
	Hashed
)

func (k ColumnKind) String() string {
	switch k {
	case Number:
		return "number"
	case Vocabulary:
		return "vocabulary"
	case Hashed:
		return "hashed"
	}
	return fmt.Sprintf("ColumnKind(%d)", int(k))
}

// Feature is what Infer decided for one feature of the data.
type Feature struct {
	Name string
	Kind ColumnKind
	// Raw is the kind of the raw values (KindInt64, KindFloat or
	// KindBytes).
	Raw dataset.Kind
	// Distinct is the number of distinct values in the sample, Missing
	// the number of sampled records without a value.
	Distinct, Missing int
	// Mean and Stddev are the sample's (numbers): Mean is what a missing
	// number takes.
	Mean, Stddev float64
	// QuantileBuckets is a number's buckets in the wide part.
	QuantileBuckets int
	// HashBuckets is a Hashed feature's buckets.
	HashBuckets int
	// EmbeddingDim is a categorical feature's embedding width in the deep
	// part; 0 reads it one-hot (an indicator column).
	EmbeddingDim int
}

// Head is what Infer decided for the label.
type Head struct {
	Kind HeadKind
	// Classes are a classifier's label values, sorted, except that a
	// binary head's positive class is last (index 1, as TensorFlow's
	// label_vocabulary).
	Classes []string
	// Raw is the kind of the label's raw values.
	Raw dataset.Kind
	// Mean and Stddev are a regression label's in the sample.
	Mean, Stddev float64
}

// Plan is what Infer decided: the head and a feature column per feature,
// in the data's order, from Rows sampled records.
type Plan struct {
	Label    string
	Head     Head
	Features []Feature
	Rows     int
}

// InferOptions tunes Infer; its zero value (with Label) infers everything.
type InferOptions struct {
	// Label is the label's feature. Required.
	Label string
	// Positive is a binary label's positive class; "" picks the less
	// frequent value (1 for 0/1 labels, "true", "yes" where they are one
	// of the two).
	Positive string
	// Head forces the head's kind; InferHead chooses: a label of two
	// values is binary, of strings with at most MaxClasses values
	// multi-class, of other numbers regression.
	Head HeadKind
	// Ignore are features not to use (identifiers, leaks).
	Ignore []string
	// MaxVocabulary is the most distinct values of a vocabulary column;
	// a string feature with more in the sample is hashed. 0 means 1000.
	MaxVocabulary int
	// MaxClasses is the most classes a multi-class head infers; 0 means
	// 100.
	MaxClasses int
	// MaxOneHot is the most distinct values a categorical feature reads
	// one-hot in the deep part; more are embedded. 0 means 10.
	MaxOneHot int
	// Order is the features' order in the plan (a CSV header's); features
	// not in it follow, sorted by name.
	Order []string
}

func (o InferOptions) withDefaults() InferOptions {
	if o.MaxVocabulary == 0 {
		o.MaxVocabulary = 1000
	}
	if o.MaxClasses == 0 {
		o.MaxClasses = 100
	}
	if o.MaxOneHot == 0 {
		o.MaxOneHot = 10
	}
	return o
}

// Infer decides from sample (records of the training data, each holding
// one value or none per feature) the head and each feature's column.
// Every feature but the label and opts.Ignore is used. A number feature
// is standardized (deep) and cut at quantile buckets (wide): one per 250
// sampled records, 3 to 10, so that each bucket sees enough; a string
// feature is a vocabulary column when the sample has at most
// MaxVocabulary distinct values, else hashed into a power of two of
// buckets at least twice its distinct values; categorical features are
// one-hot in the deep part up to MaxOneHot values and embedded beyond,
// 6·n^¼ wide (at most 32), as TensorFlow's guide suggests.
func Infer(sample []dataset.Example, opts InferOptions) (*Plan, error) {
	opts = opts.withDefaults()
	if opts.Label == "" {
		return nil, errors.New("tabular: no label column named")
	}
	if len(sample) == 0 {
		return nil, errors.New("tabular: no records to infer columns from")
	}
	stats, order, err := gather(sample)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := slices.Index(opts.Order, order[i]), slices.Index(opts.Order, order[j])
		if a < 0 || b < 0 {
			return a >= 0 && b < 0 || (a < 0 && b < 0 && order[i] < order[j])
		}
		return a < b
	})
	ls, ok := stats[opts.Label]
	if !ok {
		return nil, fmt.Errorf("tabular: label %q is not a column of the data (columns: %s)", opts.Label, strings.Join(order, ", "))
	}
	if ls.missing > 0 {
		return nil, fmt.Errorf("tabular: label %q: %d of %d sampled records have no value", opts.Label, ls.missing, len(sample))
	}
	for _, name := range opts.Ignore {
		if _, ok := stats[name]; !ok {
			return nil, fmt.Errorf("tabular: ignored column %q is not a column of the data (columns: %s)", name, strings.Join(order, ", "))
		}
	}
	p := &Plan{Label: opts.Label, Rows: len(sample)}
	if p.Head, err = inferHead(opts, ls); err != nil {
		return nil, err
	}
	for _, name := range order {
		if name == opts.Label || slices.Contains(opts.Ignore, name) {
			continue
		}
		s := stats[name]
		f := Feature{Name: name, Raw: s.kind, Distinct: len(s.counts), Missing: s.missing}
		switch {
		case s.kind == dataset.KindBytes && f.Distinct > opts.MaxVocabulary:
			f.Kind = Hashed
			f.HashBuckets = 1
			for f.HashBuckets < 2*f.Distinct {
				f.HashBuckets *= 2
			}
			f.EmbeddingDim = embeddingDim(f.Distinct)
		case s.kind == dataset.KindBytes:
			f.Kind = Vocabulary
			if f.Distinct > opts.MaxOneHot {
				f.EmbeddingDim = embeddingDim(f.Distinct)
			}
		default:
			f.Kind = Number
			f.Mean, f.Stddev = s.meanStddev()
			f.QuantileBuckets = min(max(len(sample)/250, 3), 10)
		}
		p.Features = append(p.Features, f)
	}
	if len(p.Features) == 0 {
		return nil, fmt.Errorf("tabular: no feature columns besides the label %q", opts.Label)
	}
	return p, nil
}

func embeddingDim(n int) int {
	return min(32, int(math.Ceil(6*math.Pow(float64(n), 0.25))))
}

func inferHead(opts InferOptions, ls *colStats) (Head, error) {
	h := Head{Kind: opts.Head, Raw: ls.kind}
	values := ls.values()
	if h.Kind == InferHead {
		switch {
		case len(values) == 2:
			h.Kind = Binary
		case len(values) < 2:
			return h, fmt.Errorf("tabular: label %q has one value (%q) in the sample: nothing to learn", opts.Label, values)
		case ls.kind == dataset.KindBytes && len(values) <= opts.MaxClasses:
			h.Kind = MultiClass
		case ls.kind == dataset.KindBytes:
			return h, fmt.Errorf("tabular: label %q has %d distinct strings in the sample: more than %d classes; is it the right column?", opts.Label, len(values), opts.MaxClasses)
		default:
			h.Kind = Regression
		}
	}
	switch h.Kind {
	case Binary:
		if len(values) != 2 {
			return h, fmt.Errorf("tabular: label %q has %d distinct values in the sample (%s); a binary head needs 2", opts.Label, len(values), short(values))
		}
		pos := opts.Positive
		if pos == "" {
			pos = defaultPositive(values, ls.counts)
		}
		if !slices.Contains(values, pos) {
			return h, fmt.Errorf("tabular: positive class %q is not a value of label %q (values: %s)", pos, opts.Label, short(values))
		}
		neg := values[0]
		if neg == pos {
			neg = values[1]
		}
		h.Classes = []string{neg, pos}
	case MultiClass:
		if opts.Positive != "" {
			return h, fmt.Errorf("tabular: -positive %q is for a binary label; label %q has %d values", opts.Positive, opts.Label, len(values))
		}
		h.Classes = values
	case Regression:
		if ls.kind == dataset.KindBytes {
			return h, fmt.Errorf("tabular: label %q holds strings (%s); regression needs numbers", opts.Label, short(values))
		}
		if opts.Positive != "" {
			return h, fmt.Errorf("tabular: -positive %q is for a binary label; label %q is a regression target", opts.Positive, opts.Label)
		}
		h.Mean, h.Stddev = ls.meanStddev()
	default:
		return h, fmt.Errorf("tabular: head %v", h.Kind)
	}
	return h, nil
}

// defaultPositive is "1", "true" or "yes" (any case) when values hold
// one, else the less frequent value (the first in order when as frequent).
func defaultPositive(values []string, counts map[string]int) string {
	for _, v := range values {
		switch strings.ToLower(v) {
		case "1", "true", "yes", "y", "t":
			return v
		}
	}
	if counts[values[1]] < counts[values[0]] {
		return values[1]
	}
	return values[0]
}

func short(values []string) string {
	q := make([]string, 0, 6)
	for i, v := range values {
		if i == 5 {
			q = append(q, fmt.Sprintf("… %d more", len(values)-5))
			break
		}
		q = append(q, strconv.Quote(v))
	}
	return strings.Join(q, ", ")
}

// colStats is what the sample shows of one feature.
type colStats struct {
	kind      dataset.Kind
	counts    map[string]int // distinct values (numbers as strconv writes them)
	missing   int
	n         int
	sum, sum2 float64
}

func (s *colStats) values() []string {
	v := make([]string, 0, len(s.counts))
	for k := range s.counts {
		v = append(v, k)
	}
	if s.kind == dataset.KindBytes {
		sort.Strings(v)
	} else {
		sort.Slice(v, func(i, j int) bool {
			a, _ := strconv.ParseFloat(v[i], 64)
			b, _ := strconv.ParseFloat(v[j], 64)
			return a < b
		})
	}
	return v
}

func (s *colStats) meanStddev() (float64, float64) {
	if s.n == 0 {
		return 0, 1
	}
	m := s.sum / float64(s.n)
	v := s.sum2/float64(s.n) - m*m
	if !(v > 0) {
		return m, 1
	}
	return m, math.Sqrt(v)
}

// gather collects each feature's statistics, and the features' names in
// the order they first appear (sorted within a record).
func gather(sample []dataset.Example) (map[string]*colStats, []string, error) {
	stats := map[string]*colStats{}
	var order []string
	for i, ex := range sample {
		names := make([]string, 0, len(ex))
		for name := range ex {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			f := ex[name]
			if f.Len() > 1 {
				return nil, nil, fmt.Errorf("tabular: record %d: feature %q has %d values; tabular data has one a column", i, name, f.Len())
			}
			s, ok := stats[name]
			if !ok {
				s = &colStats{kind: f.Kind(), counts: map[string]int{}, missing: i}
				stats[name] = s
				order = append(order, name)
			}
			if f.Len() == 0 {
				s.missing++
				continue
			}
			k := f.Kind()
			if s.kind == dataset.KindNone {
				s.kind = k
			}
			if k != s.kind && !(isNumber(k) && isNumber(s.kind)) {
				return nil, nil, fmt.Errorf("tabular: record %d: feature %q holds %v, earlier records %v", i, name, k, s.kind)
			}
			if k == dataset.KindFloat {
				s.kind = dataset.KindFloat
			}
			var key string
			switch k {
			case dataset.KindBytes:
				key = string(f.Bytes[0])
			case dataset.KindInt64:
				key = strconv.FormatInt(f.Int64s[0], 10)
				s.add(float64(f.Int64s[0]))
			case dataset.KindFloat:
				v := float64(f.Floats[0])
				if math.IsNaN(v) {
					s.missing++
					continue
				}
				key = strconv.FormatFloat(v, 'g', -1, 32)
				s.add(v)
			}
			s.counts[key]++
		}
		for _, name := range order {
			if _, ok := ex[name]; !ok {
				stats[name].missing++
			}
		}
	}
	for _, s := range stats {
		if s.kind == dataset.KindNone {
			s.kind = dataset.KindBytes
		}
	}
	return stats, order, nil
}

func (s *colStats) add(v float64) {
	s.n++
	s.sum += v
	s.sum2 += v * v
}

func isNumber(k dataset.Kind) bool { return k == dataset.KindInt64 || k == dataset.KindFloat }

// String is the plan as `towerflow tabular` prints it: the head, then a
// line a feature.
func (p *Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "label %q: %v head", p.Label, p.Head.Kind)
	switch p.Head.Kind {
	case Regression:
		fmt.Fprintf(&b, " (sample mean %.4g, stddev %.4g: the model predicts their units)", p.Head.Mean, p.Head.Stddev)
	case Binary:
		fmt.Fprintf(&b, ", positive class %q (negative %q)", p.Head.Classes[1], p.Head.Classes[0])
	case MultiClass:
		fmt.Fprintf(&b, ", %d classes: %s", len(p.Head.Classes), short(p.Head.Classes))
	}
	fmt.Fprintf(&b, "\n%d feature columns, from %d sampled rows:\n", len(p.Features), p.Rows)
	for _, f := range p.Features {
		fmt.Fprintf(&b, "  %-24s ", f.Name)
		switch f.Kind {
		case Number:
			fmt.Fprintf(&b, "number (%v): standardized (sample mean %.4g, stddev %.4g); wide: %d quantile buckets", f.Raw, f.Mean, f.Stddev, f.QuantileBuckets)
		case Vocabulary:
			fmt.Fprintf(&b, "categorical: vocabulary of %d values + 1 out-of-vocabulary bucket", f.Distinct)
		case Hashed:
			fmt.Fprintf(&b, "categorical: %d distinct values hashed into %d buckets", f.Distinct, f.HashBuckets)
		}
		if f.Kind != Number {
			if f.EmbeddingDim > 0 {
				fmt.Fprintf(&b, "; deep: embedding of %d", f.EmbeddingDim)
			} else {
				b.WriteString("; deep: one-hot")
			}
		}
		if f.Missing > 0 {
			fmt.Fprintf(&b, "; %d missing", f.Missing)
			if f.Kind == Number {
				b.WriteString(" (take the mean)")
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Sample reads up to rows records of files: CSV files with a header when
// their names end in .csv, TFRecord files of tf.Examples otherwise (the
// schema is then nil). For CSV it returns the schema to read them with
// (see CSVSchema) and records in which a missing value is no feature at
// all, as in a tf.Example.
func Sample(files []string, rows int) (dataset.Schema, []dataset.Example, error) {
	if len(files) == 0 {
		return nil, nil, errors.New("tabular: no training files")
	}
	if err := compressedCSV(files); err != nil {
		return nil, nil, err
	}
	if IsCSV(files) {
		return sampleCSV(files, rows)
	}
	sample, err := sampleRecords(files, rows)
	return nil, sample, err
}

// sampleRecords reads up to rows tf.Examples of TFRecord files (paths
// or filepath.Match patterns, each pattern's matches in lexical order).
func sampleRecords(files []string, rows int) ([]dataset.Example, error) {
	r, err := dataset.NewExampleReader(files, records)
	if err != nil {
		return nil, fmt.Errorf("tabular: %w", err)
	}
	defer r.Close()
	var sample []dataset.Example
	for len(sample) < rows {
		ex, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("tabular: %w", err)
		}
		sample = append(sample, ex)
	}
	return sample, nil
}

// compressedCSV is the error of a compressed CSV file among files (by its
// name): only TFRecord files are read compressed.
func compressedCSV(files []string) error {
	for _, f := range files {
		if dataset.CompressionOf(f) != dataset.NoCompression && strings.EqualFold(filepath.Ext(strings.TrimSuffix(f, filepath.Ext(f))), ".csv") {
			return fmt.Errorf("tabular: %s: compressed CSV files are not read (TFRecord files are): decompress it", f)
		}
	}
	return nil
}

// IsCSV reports whether files are CSV files (by the first's extension).
func IsCSV(files []string) bool {
	return len(files) > 0 && strings.EqualFold(filepath.Ext(files[0]), ".csv")
}

func sampleCSV(files []string, rows int) (dataset.Schema, []dataset.Example, error) {
	schema, err := dataset.InferCSVSchema(files, dataset.CSVOptions{}, rows)
	if err != nil {
		return nil, nil, fmt.Errorf("tabular: %w", err)
	}
	// Read the sample again with optional columns as strings, to drop
	// their empty values.
	raw := slices.Clone(schema)
	for i := range raw {
		if raw[i].Optional {
			raw[i].Kind, raw[i].Default = dataset.KindBytes, ""
		}
	}
	r, err := dataset.NewCSVReader(files, dataset.CSVOptions{Schema: raw})
	if err != nil {
		return nil, nil, fmt.Errorf("tabular: %w", err)
	}
	defer r.Close()
	var sample []dataset.Example
	for len(sample) < rows {
		ex, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("tabular: %w", err)
		}
		for i, c := range raw {
			if !c.Optional {
				continue
			}
			v := string(ex[c.Name].Bytes[0])
			switch {
			case v == "":
				delete(ex, c.Name)
			case schema[i].Kind == dataset.KindInt64:
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, nil, fmt.Errorf("tabular: column %q: %w", c.Name, err)
				}
				ex[c.Name] = dataset.Feature{Int64s: []int64{n}}
			case schema[i].Kind == dataset.KindFloat:
				x, err := strconv.ParseFloat(v, 32)
				if err != nil {
					return nil, nil, fmt.Errorf("tabular: column %q: %w", c.Name, err)
				}
				ex[c.Name] = dataset.Feature{Floats: []float32{float32(x)}}
			}
		}
		sample = append(sample, ex)
	}
	return schema, sample, nil
}

// CSVSchema is the schema to read the CSV files of the plan with: every
// column but the label is Optional, so that an empty value the sample did
// not show is no error; a number feature is float and takes the plan's
// sample mean when empty, as a record without the feature does; an empty
// string is a missing value to the plan's categorical columns, as a
// record without the feature.
func (p *Plan) CSVSchema(schema dataset.Schema) dataset.Schema {
	out := slices.Clone(schema)
	for i, c := range out {
		if c.Name == p.Label {
			continue
		}
		out[i].Optional = true
		for _, f := range p.Features {
			if f.Name == c.Name && f.Kind == Number {
				out[i].Kind = dataset.KindFloat
				out[i].Default = strconv.FormatFloat(f.Mean, 'g', -1, 32)
			}
		}
	}
	return out
}

// ColumnNames are schema's column names, in order.
func ColumnNames(schema dataset.Schema) []string {
	names := make([]string, len(schema))
	for i, c := range schema {
		names[i] = c.Name
	}
	return names
}
