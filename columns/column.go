package columns

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/towerflow/towerflow/layers"
)

// Column is a feature column: how one input of a model is made from raw
// features. Its concrete types are this package's (*NumericColumn,
// *BucketizedColumn, *VocabularyColumn, *HashBucketColumn,
// *IdentityColumn, *CrossedColumn, *WeightedColumn, *IndicatorColumn,
// *EmbeddingColumn); other packages cannot implement it.
type Column interface {
	// Name is the column's name, TensorFlow's: the raw feature's key for
	// numeric and categorical columns, "age_bucketized",
	// "a_X_b", "city_weighted_by_w", "city_indicator",
	// "city_embedding", "a_b_shared_embedding" for the others. The
	// features a Transformer makes and the model's variables are named
	// after it.
	Name() string
	// validate checks the column's settings (and its sources').
	validate() error
	// fitted reports whether the column (and its sources) has what it
	// needs from the data.
	fitted() bool
}

// DenseColumn is a column the input layer reads as a dense [batch,
// Dimension()] float block: numeric, bucketized (one-hot), indicator,
// embedding.
type DenseColumn interface {
	Column
	// Dimension is the width of the column's block of the input layer.
	Dimension() int
}

// CategoricalColumn is a column of integer ids in [0, NumBuckets()), a
// bag of them per record: the vocabulary, hash-bucket, identity,
// bucketized, crossed and weighted columns. Indicator and Embedding
// columns are made of one; LinearLogits gives each of them a row of
// weights per id.
type CategoricalColumn interface {
	Column
	// NumBuckets is the number of ids the column can give.
	NumBuckets() int
	categorical()
}

// Crossable is a key of a crossed column: a RawKey (a raw string or
// integer feature), a categorical column or a crossed column (whose keys
// are crossed in its place, as TensorFlow flattens nested crosses).
type Crossable interface {
	crossName() string
}

// RawKey is the key of a raw feature, strings or integers, crossed by
// its values (TensorFlow's string key in crossed_column's keys; an
// integer value crosses as its decimal string).
type RawKey string

func (k RawKey) crossName() string { return string(k) }

// ---- numeric ----

// NumericColumn is a number or a fixed-shape block of numbers per record,
// tf.feature_column.numeric_column: the raw feature key's Floats or
// Int64s (converted to float32), of exactly the shape's number of values
// (at most 2^24), in row-major order. An infinite value is an error.
type NumericColumn struct {
	key        string
	shape      []int
	def        []float32
	normalizer *Normalizer
	// statsFitted: the normalizer's statistics were set from the data.
	statsFitted bool
}

// NumericOption sets an option of a numeric column.
type NumericOption func(*NumericColumn)

// Shape sets the per-record shape of a numeric column (default [1]); a
// record must have exactly the product of its dimensions values.
func Shape(dims ...int) NumericOption {
	return func(c *NumericColumn) { c.shape = slices.Clone(dims) }
}

// Default sets the value a record without the feature (or with no
// values) takes: one value (every element) or one per element; a NaN
// element is missing too and takes its element's default. Without it, a
// record missing the feature is an error, as TensorFlow's numeric_column
// without a default_value.
func Default(values ...float32) NumericOption {
	return func(c *NumericColumn) { c.def = slices.Clone(values) }
}

// Normalize sets the column's normalizer, applied to each value after the
// default: (x - Mean) / Stddev.
func Normalize(n Normalizer) NumericOption {
	return func(c *NumericColumn) { nn := n; c.normalizer = &nn }
}

// Standardize normalizes the column to zero mean and unit variance with
// the mean and (population) standard deviation of its values in the
// training data, which Fit computes (scale_to_z_score of TensorFlow
// Transform). A column whose values do not vary keeps a Stddev of 1.
func Standardize() NumericOption {
	return Normalize(Normalizer{FromData: true})
}

// Normalizer is a numeric column's normalizer: x ↦ (x - Mean) / Stddev
// for every value (TensorFlow's normalizer_fn, recorded as numbers so
// that the export can carry it). With FromData, Fit sets Mean and Stddev
// from the training data.
type Normalizer struct {
	Mean, Stddev float64
	FromData     bool
}

// maxValues is the most values a numeric column's record may have.
const maxValues = 1 << 24

// Numeric returns the numeric column of the raw feature key.
func Numeric(key string, opts ...NumericOption) *NumericColumn {
	c := &NumericColumn{key: key, shape: []int{1}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Name is the feature's key.
func (c *NumericColumn) Name() string { return c.key }

// Key is the raw feature the column reads.
func (c *NumericColumn) Key() string { return c.key }

// Shape is the column's per-record shape.
func (c *NumericColumn) Shape() []int { return slices.Clone(c.shape) }

// Dimension is the number of values per record.
func (c *NumericColumn) Dimension() int {
	n := 1
	for _, d := range c.shape {
		n *= d
	}
	return n
}

// DefaultValue is the value of a missing feature, one per element; nil
// when a missing feature is an error.
func (c *NumericColumn) DefaultValue() []float32 {
	if len(c.def) == 0 {
		return nil
	}
	out := make([]float32, c.Dimension())
	for i := range out {
		if len(c.def) == 1 {
			out[i] = c.def[0]
		} else if i < len(c.def) {
			out[i] = c.def[i]
		}
	}
	return out
}

// Normalizer is the column's normalizer; ok is false when it has none.
func (c *NumericColumn) Normalizer() (n Normalizer, ok bool) {
	if c.normalizer == nil {
		return Normalizer{}, false
	}
	return *c.normalizer, true
}

func (c *NumericColumn) validate() error {
	if c.key == "" {
		return errors.New("numeric column with an empty key")
	}
	if len(c.shape) == 0 {
		return fmt.Errorf("numeric column %q: empty shape", c.key)
	}
	n := 1
	for _, d := range c.shape {
		if d <= 0 {
			return fmt.Errorf("numeric column %q: shape %v has a dimension < 1", c.key, c.shape)
		}
		if n > maxValues/d {
			return fmt.Errorf("numeric column %q: shape %v has more than %d values", c.key, c.shape, maxValues)
		}
		n *= d
	}
	if n := len(c.def); n > 1 && n != c.Dimension() {
		return fmt.Errorf("numeric column %q: %d default values for shape %v (%d values); give 1 or %d", c.key, n, c.shape, c.Dimension(), c.Dimension())
	}
	for _, v := range c.def {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("numeric column %q: default value %v is not finite", c.key, v)
		}
	}
	if n := c.normalizer; n != nil && (!n.FromData || c.statsFitted) {
		if math.IsNaN(n.Mean) || math.IsInf(n.Mean, 0) || !(n.Stddev > 0) || math.IsInf(n.Stddev, 0) {
			return fmt.Errorf("numeric column %q: normalizer mean %v stddev %v: want a finite mean and a finite positive stddev", c.key, n.Mean, n.Stddev)
		}
	}
	return nil
}

func (c *NumericColumn) fitted() bool {
	return c.normalizer == nil || !c.normalizer.FromData || c.statsFitted
}

// ---- bucketized ----

// BucketizedColumn is a numeric column cut into buckets by boundaries,
// tf.feature_column.bucketized_column: boundaries [b0, b1, …] make the
// buckets (-inf, b0), [b0, b1), …, [bn-1, +inf), one id per value of the
// source (a source of shape [k] gives k ids, the i-th offset by
// i·(len(boundaries)+1), as TensorFlow).
type BucketizedColumn struct {
	source     *NumericColumn
	boundaries []float64
	quantiles  int // > 0: boundaries from the data's quantiles
}

// Bucketized returns source cut at boundaries, which must be sorted
// strictly increasing. The boundaries cut the values the source makes
// (its default taken, its normalizer applied), as TensorFlow's
// bucketized_column of a normalized numeric_column: bucketize a column
// without a normalizer to cut raw values.
func Bucketized(source *NumericColumn, boundaries []float64) *BucketizedColumn {
	return &BucketizedColumn{source: source, boundaries: slices.Clone(boundaries)}
}

// BucketizedQuantiles returns source cut into buckets of about equal
// counts of the training data's values: Fit sets the boundaries to the
// data's quantiles 1/buckets, 2/buckets, …, dropping repeats (so a column
// of few distinct values gets fewer buckets).
func BucketizedQuantiles(source *NumericColumn, buckets int) *BucketizedColumn {
	return &BucketizedColumn{source: source, quantiles: buckets}
}

// Name is the source's name and "_bucketized".
func (c *BucketizedColumn) Name() string { return c.source.Name() + "_bucketized" }

// Source is the numeric column bucketized.
func (c *BucketizedColumn) Source() *NumericColumn { return c.source }

// Boundaries are the bucket boundaries (nil before Fit for
// BucketizedQuantiles).
func (c *BucketizedColumn) Boundaries() []float64 { return slices.Clone(c.boundaries) }

// NumBuckets is (len(boundaries)+1) times the source's dimension.
func (c *BucketizedColumn) NumBuckets() int {
	return (len(c.boundaries) + 1) * c.source.Dimension()
}

// Dimension is NumBuckets: the input layer reads the column one-hot.
func (c *BucketizedColumn) Dimension() int { return c.NumBuckets() }

func (c *BucketizedColumn) categorical()      {}
func (c *BucketizedColumn) crossName() string { return c.Name() }

func (c *BucketizedColumn) validate() error {
	if c.source == nil {
		return errors.New("bucketized column of a nil numeric column")
	}
	if err := c.source.validate(); err != nil {
		return fmt.Errorf("bucketized column %q: %w", c.Name(), err)
	}
	if c.quantiles < 0 || (c.quantiles == 0 && len(c.boundaries) == 0) {
		return fmt.Errorf("bucketized column %q: no boundaries (give boundaries or a positive number of quantile buckets)", c.Name())
	}
	for i, b := range c.boundaries {
		if math.IsNaN(b) || math.IsInf(b, 0) {
			return fmt.Errorf("bucketized column %q: boundary %d is %v", c.Name(), i, b)
		}
		if i > 0 && b <= c.boundaries[i-1] {
			return fmt.Errorf("bucketized column %q: boundaries %v are not sorted strictly increasing", c.Name(), c.boundaries)
		}
	}
	return nil
}

func (c *BucketizedColumn) fitted() bool {
	return c.source.fitted() && (c.quantiles == 0 || c.boundaries != nil)
}

// ---- categorical with a vocabulary ----

// VocabularyColumn maps each value of a raw feature to its index in a
// vocabulary, tf.feature_column.categorical_column_with_vocabulary_list
// and _file: strings by their bytes, integers by their decimal string.
// A value not in the vocabulary goes to one of NumOOVBuckets buckets
// after the vocabulary (by Fingerprint64 of its string modulo the
// buckets, as TensorFlow), or to DefaultID, or is dropped (TensorFlow's
// default_value -1). An empty string is a missing value and is dropped,
// as TensorFlow drops its ignore value "" (an empty CSV field reads as a
// record without the value, as a request that leaves the feature out).
type VocabularyColumn struct {
	key        string
	vocab      []string
	index      map[string]int
	oov        int
	def        int // -1: drop
	fromData   bool
	minCount   int
	maxSize    int
	file       string
	err        error // from the constructor (a file that cannot be read)
	hasDefault bool
}

// VocabularyOption sets an option of a vocabulary column.
type VocabularyOption func(*VocabularyColumn)

// OOVBuckets sends values outside the vocabulary to n buckets after it:
// id len(vocabulary) + Fingerprint64(value) mod n.
func OOVBuckets(n int) VocabularyOption { return func(c *VocabularyColumn) { c.oov = n } }

// DefaultID sends values outside the vocabulary to id, which must be in
// [0, len(vocabulary)); not with OOVBuckets.
func DefaultID(id int) VocabularyOption {
	return func(c *VocabularyColumn) { c.def, c.hasDefault = id, true }
}

// MinCount keeps, in a vocabulary from the data, only values seen at
// least n times.
func MinCount(n int) VocabularyOption { return func(c *VocabularyColumn) { c.minCount = n } }

// MaxSize keeps, in a vocabulary from the data, only the n most frequent
// values.
func MaxSize(n int) VocabularyOption { return func(c *VocabularyColumn) { c.maxSize = n } }

// VocabularyList returns the vocabulary column of the raw feature key
// with the vocabulary given, whose entries must be distinct.
func VocabularyList(key string, vocabulary []string, opts ...VocabularyOption) *VocabularyColumn {
	c := &VocabularyColumn{key: key, def: -1}
	for _, o := range opts {
		o(c)
	}
	c.setVocabulary(slices.Clone(vocabulary))
	return c
}

// setVocabulary sets the column's vocabulary and its index (the last
// position of each entry; validate reports repeats).
func (c *VocabularyColumn) setVocabulary(vocab []string) {
	c.vocab = vocab
	c.index = make(map[string]int, len(vocab))
	for i, v := range vocab {
		c.index[v] = i
	}
}

// VocabularyFile returns the vocabulary column of the raw feature key
// whose vocabulary is the lines of the file at path (without their line
// ends, "\n" or "\r\n"), the first size of them when size > 0 (TensorFlow's
// vocabulary_size). The file is read now: the column, and an export of
// it, carries the vocabulary itself.
func VocabularyFile(key, path string, size int, opts ...VocabularyOption) *VocabularyColumn {
	c := VocabularyList(key, nil, opts...)
	c.file = path
	vocab, err := readVocabulary(path, size)
	c.setVocabulary(vocab)
	c.err = err
	return c
}

func readVocabulary(path string, size int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vocabulary file: %w", err)
	}
	defer f.Close()
	var vocab []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() && (size <= 0 || len(vocab) < size) {
		vocab = append(vocab, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("vocabulary file %s line %d: %w", path, len(vocab)+1, err)
	}
	if size > 0 && len(vocab) < size {
		return nil, fmt.Errorf("vocabulary file %s has %d lines, vocabulary size %d asked", path, len(vocab), size)
	}
	return vocab, nil
}

// VocabularyFromData returns the vocabulary column of the raw feature
// key whose vocabulary Fit takes from the training data: its distinct
// values, most frequent first (ties in byte order), limited by MinCount
// and MaxSize.
func VocabularyFromData(key string, opts ...VocabularyOption) *VocabularyColumn {
	c := VocabularyList(key, nil, opts...)
	c.fromData = true
	return c
}

// Name is the feature's key.
func (c *VocabularyColumn) Name() string { return c.key }

// Key is the raw feature the column reads.
func (c *VocabularyColumn) Key() string { return c.key }

// Vocabulary is the column's vocabulary (nil before Fit for
// VocabularyFromData).
func (c *VocabularyColumn) Vocabulary() []string { return slices.Clone(c.vocab) }

// NumBuckets is the vocabulary's size plus the OOV buckets.
func (c *VocabularyColumn) NumBuckets() int { return len(c.vocab) + c.oov }

func (c *VocabularyColumn) categorical()      {}
func (c *VocabularyColumn) crossName() string { return c.key }

func (c *VocabularyColumn) validate() error {
	if c.key == "" {
		return errors.New("vocabulary column with an empty key")
	}
	if c.err != nil {
		return fmt.Errorf("vocabulary column %q: %w", c.key, c.err)
	}
	if c.oov < 0 || c.minCount < 0 || c.maxSize < 0 {
		return fmt.Errorf("vocabulary column %q: OOV buckets %d, min count %d, max size %d: none may be negative", c.key, c.oov, c.minCount, c.maxSize)
	}
	if c.hasDefault && c.oov > 0 {
		return fmt.Errorf("vocabulary column %q: both a default id and OOV buckets; give one", c.key)
	}
	if !c.fromData && (c.minCount > 0 || c.maxSize > 0) {
		return fmt.Errorf("vocabulary column %q: MinCount and MaxSize are options of VocabularyFromData", c.key)
	}
	if !c.fitted() {
		return nil
	}
	if len(c.vocab) == 0 && c.oov == 0 {
		return fmt.Errorf("vocabulary column %q: empty vocabulary and no OOV buckets", c.key)
	}
	if c.hasDefault && (c.def < 0 || c.def >= len(c.vocab)) {
		return fmt.Errorf("vocabulary column %q: default id %d outside the vocabulary [0, %d)", c.key, c.def, len(c.vocab))
	}
	if len(c.index) != len(c.vocab) {
		for i, v := range c.vocab {
			if j := c.index[v]; j != i {
				return fmt.Errorf("vocabulary column %q: entry %q at %d and %d", c.key, v, i, j)
			}
		}
	}
	return nil
}

func (c *VocabularyColumn) fitted() bool { return !c.fromData || c.vocab != nil }

// ---- hash buckets ----

// HashBucketColumn maps each value of a raw feature to
// Fingerprint64(value) mod buckets,
// tf.feature_column.categorical_column_with_hash_bucket (strings by their
// bytes, integers by their decimal string). An empty string is a missing
// value and is dropped, as in a VocabularyColumn.
type HashBucketColumn struct {
	key     string
	buckets int
}

// HashBucket returns the hash-bucket column of the raw feature key.
func HashBucket(key string, buckets int) *HashBucketColumn {
	return &HashBucketColumn{key: key, buckets: buckets}
}

// Name is the feature's key.
func (c *HashBucketColumn) Name() string { return c.key }

// Key is the raw feature the column reads.
func (c *HashBucketColumn) Key() string { return c.key }

// NumBuckets is the number of hash buckets.
func (c *HashBucketColumn) NumBuckets() int { return c.buckets }

func (c *HashBucketColumn) categorical()      {}
func (c *HashBucketColumn) crossName() string { return c.key }
func (c *HashBucketColumn) fitted() bool      { return true }

func (c *HashBucketColumn) validate() error {
	if c.key == "" {
		return errors.New("hash bucket column with an empty key")
	}
	if c.buckets < 1 {
		return fmt.Errorf("hash bucket column %q: %d buckets, want at least 1", c.key, c.buckets)
	}
	return nil
}

// ---- identity ----

// IdentityColumn takes a raw integer feature's values as ids,
// tf.feature_column.categorical_column_with_identity: a value outside
// [0, buckets) becomes the default id when there is one; without one, a
// value >= buckets is an error and a negative value is dropped, as
// TensorFlow.
type IdentityColumn struct {
	key        string
	buckets    int
	def        int
	hasDefault bool
}

// IdentityOption sets an option of an identity column.
type IdentityOption func(*IdentityColumn)

// IdentityDefault sends values outside [0, buckets) to id.
func IdentityDefault(id int) IdentityOption {
	return func(c *IdentityColumn) { c.def, c.hasDefault = id, true }
}

// Identity returns the identity column of the raw feature key.
func Identity(key string, buckets int, opts ...IdentityOption) *IdentityColumn {
	c := &IdentityColumn{key: key, buckets: buckets}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Name is the feature's key.
func (c *IdentityColumn) Name() string { return c.key }

// Key is the raw feature the column reads.
func (c *IdentityColumn) Key() string { return c.key }

// NumBuckets is the number of ids.
func (c *IdentityColumn) NumBuckets() int { return c.buckets }

func (c *IdentityColumn) categorical()      {}
func (c *IdentityColumn) crossName() string { return c.key }
func (c *IdentityColumn) fitted() bool      { return true }

func (c *IdentityColumn) validate() error {
	if c.key == "" {
		return errors.New("identity column with an empty key")
	}
	if c.buckets < 1 {
		return fmt.Errorf("identity column %q: %d buckets, want at least 1", c.key, c.buckets)
	}
	if c.hasDefault && (c.def < 0 || c.def >= c.buckets) {
		return fmt.Errorf("identity column %q: default id %d outside [0, %d)", c.key, c.def, c.buckets)
	}
	return nil
}

// ---- crossed ----

// DefaultHashKey is the hash key of a crossed column without HashKey,
// TensorFlow's sparse_cross_hashed default (0xDECAFCAFFE).
const DefaultHashKey uint64 = 0xDECAFCAFFE

// CrossedColumn is the hashed cross of its keys,
// tf.feature_column.crossed_column: per record, every combination of one
// value of each key, hashed as TensorFlow's sparse_cross_hashed
// (FingerprintCat64 of the hash key and each value's hash in turn, modulo
// the buckets; the last key varies fastest in a record's bag). A raw
// key's values hash as their Fingerprint64 (TensorFlow's raw keys are
// strings; integers hash as their decimal string, so that a raw value
// crosses alike whether a CSV reader or a JSON request typed it as a
// number or a string); a categorical column's ids hash as themselves, as
// TensorFlow's cross of int64 ids. As TensorFlow, a HashBucketColumn
// cannot be crossed (hashing before crossing only adds collisions): cross
// its RawKey.
//
// A record makes as many ids as the product of its keys' counts of
// values: three keys of 1,000 values each (about 12 KB of a request) make
// a billion ids. So that a record cannot make a batch take memory without
// bound, a record whose keys would make more than the column's MaxCrosses
// combinations is an error of the record, in training and in serving
// alike, before any is made; in serving, so is a record that would make
// more than the signature takes of the cross (Transformer.ParseBounded).
// TensorFlow's crossed_column has no such limit.
type CrossedColumn struct {
	keys       []Crossable // flattened: RawKey or CategoricalColumn, not *CrossedColumn
	buckets    int
	hashKey    uint64
	maxCrosses int
}

// DefaultMaxCrosses is the most combinations a crossed column without the
// MaxCrosses option makes of one record.
const DefaultMaxCrosses = 256

// CrossOption sets an option of a crossed column.
type CrossOption func(*CrossedColumn)

// HashKey sets the key FingerprintCat64 starts from (default
// DefaultHashKey).
func HashKey(k uint64) CrossOption { return func(c *CrossedColumn) { c.hashKey = k } }

// MaxCrosses sets the most combinations the column makes of one record
// (at least 1; default DefaultMaxCrosses).
func MaxCrosses(n int) CrossOption { return func(c *CrossedColumn) { c.maxCrosses = n } }

// Crossed returns the cross of keys (at least two) into buckets hash
// buckets. A crossed column among keys adds its own keys (its options do
// not carry over).
func Crossed(keys []Crossable, buckets int, opts ...CrossOption) *CrossedColumn {
	c := &CrossedColumn{buckets: buckets, hashKey: DefaultHashKey, maxCrosses: DefaultMaxCrosses}
	for _, k := range keys {
		if x, ok := k.(*CrossedColumn); ok && x != nil {
			c.keys = append(c.keys, x.keys...)
			continue
		}
		c.keys = append(c.keys, k)
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Name is the keys' names joined by "_X_", in the order given.
func (c *CrossedColumn) Name() string {
	names := make([]string, len(c.keys))
	for i, k := range c.keys {
		if nilKey(k) {
			names[i] = "<nil>"
			continue
		}
		names[i] = k.crossName()
	}
	return strings.Join(names, "_X_")
}

// nilKey reports whether k is nil or a nil column.
func nilKey(k Crossable) bool {
	if k == nil {
		return true
	}
	col, ok := k.(Column)
	return ok && isNil(col)
}

// Keys are the keys crossed, nested crosses flattened.
func (c *CrossedColumn) Keys() []Crossable { return slices.Clone(c.keys) }

// HashKey is the cross's hash key.
func (c *CrossedColumn) HashKey() uint64 { return c.hashKey }

// MaxCrosses is the most combinations the column makes of one record.
func (c *CrossedColumn) MaxCrosses() int { return c.maxCrosses }

// NumBuckets is the number of hash buckets.
func (c *CrossedColumn) NumBuckets() int { return c.buckets }

func (c *CrossedColumn) categorical()      {}
func (c *CrossedColumn) crossName() string { return c.Name() }

func (c *CrossedColumn) validate() error {
	if len(c.keys) < 2 {
		return fmt.Errorf("crossed column %q: %d keys, want at least 2", c.Name(), len(c.keys))
	}
	if c.buckets < 1 {
		return fmt.Errorf("crossed column %q: %d buckets, want at least 1", c.Name(), c.buckets)
	}
	if c.maxCrosses < 1 {
		return fmt.Errorf("crossed column %q: MaxCrosses %d, want at least 1", c.Name(), c.maxCrosses)
	}
	for i, k := range c.keys {
		if k != nil && nilKey(k) {
			return fmt.Errorf("crossed column %q: key %d is a nil %T", c.Name(), i, k)
		}
		switch k := k.(type) {
		case RawKey:
			if k == "" {
				return fmt.Errorf("crossed column %q: key %d is an empty raw key", c.Name(), i)
			}
		case CategoricalColumn:
			switch k.(type) {
			case *CrossedColumn:
				return fmt.Errorf("crossed column %q: key %d is crossed column %q; list its keys in its place (as Crossed does)", c.Name(), i, k.Name())
			case *WeightedColumn:
				return fmt.Errorf("crossed column %q: key %d is a weighted column, which cannot be crossed", c.Name(), i)
			case *HashBucketColumn:
				return fmt.Errorf("crossed column %q: key %d is hash bucket column %q, which cannot be crossed (hashing before crossing adds collisions): cross RawKey(%q)", c.Name(), i, k.Name(), k.Name())
			}
			if err := k.validate(); err != nil {
				return fmt.Errorf("crossed column %q: %w", c.Name(), err)
			}
		default:
			return fmt.Errorf("crossed column %q: key %d is a %T; want a RawKey or a categorical column", c.Name(), i, k)
		}
	}
	return nil
}

func (c *CrossedColumn) fitted() bool {
	for _, k := range c.keys {
		if col, ok := k.(Column); ok && !col.fitted() {
			return false
		}
	}
	return true
}

// ---- weighted ----

// WeightedColumn gives each id of a categorical column the weight at the
// same position of a raw number feature (floats, or integers as floats),
// tf.feature_column.weighted_categorical_column: a record must have as
// many weights as values, each finite (a NaN or an infinity is an error
// of the record, as a numeric column's).
type WeightedColumn struct {
	cat       CategoricalColumn
	weightKey string
}

// Weighted returns cat weighted by the raw feature weightKey.
func Weighted(cat CategoricalColumn, weightKey string) *WeightedColumn {
	return &WeightedColumn{cat: cat, weightKey: weightKey}
}

// Name is cat's name, "_weighted_by_" and the weight key.
func (c *WeightedColumn) Name() string {
	return nameOf(c.cat) + "_weighted_by_" + c.weightKey
}

// Categorical is the column weighted.
func (c *WeightedColumn) Categorical() CategoricalColumn { return c.cat }

// WeightKey is the raw feature of the weights.
func (c *WeightedColumn) WeightKey() string { return c.weightKey }

// NumBuckets is the weighted column's.
func (c *WeightedColumn) NumBuckets() int { return c.cat.NumBuckets() }

func (c *WeightedColumn) categorical()      {}
func (c *WeightedColumn) crossName() string { return c.Name() }
func (c *WeightedColumn) fitted() bool      { return nilColumn(c.cat) || c.cat.fitted() }

func (c *WeightedColumn) validate() error {
	if nilColumn(c.cat) {
		return errors.New("weighted column of a nil categorical column")
	}
	if c.weightKey == "" {
		return fmt.Errorf("weighted column of %q: empty weight key", c.cat.Name())
	}
	if _, nested := c.cat.(*WeightedColumn); nested {
		return fmt.Errorf("weighted column %q: the column weighted is already weighted", c.Name())
	}
	if k, ok := c.cat.(interface{ Key() string }); ok && k.Key() == c.weightKey {
		return fmt.Errorf("weighted column %q: the weights' feature %q is the values' (TensorFlow's conflicting parse specs)", c.Name(), c.weightKey)
	}
	if err := c.cat.validate(); err != nil {
		return fmt.Errorf("weighted column %q: %w", c.Name(), err)
	}
	return nil
}

// WeightsName is the name of the sparse feature of a weighted column's
// weights in a Transformer's batch: its Name() and "_weights".
func (c *WeightedColumn) WeightsName() string { return c.Name() + "_weights" }

// ---- indicator ----

// IndicatorColumn is a categorical column as a multi-hot block of
// NumBuckets() floats, tf.feature_column.indicator_column: each id's
// element counts its occurrences in the record (a weighted column's
// element sums its weights).
type IndicatorColumn struct {
	cat CategoricalColumn
}

// Indicator returns cat's indicator column.
func Indicator(cat CategoricalColumn) *IndicatorColumn { return &IndicatorColumn{cat: cat} }

// Name is cat's name and "_indicator".
func (c *IndicatorColumn) Name() string { return nameOf(c.cat) + "_indicator" }

// Categorical is the column indicated.
func (c *IndicatorColumn) Categorical() CategoricalColumn { return c.cat }

// Dimension is cat's NumBuckets.
func (c *IndicatorColumn) Dimension() int { return c.cat.NumBuckets() }

func (c *IndicatorColumn) fitted() bool { return nilColumn(c.cat) || c.cat.fitted() }

func (c *IndicatorColumn) validate() error {
	if nilColumn(c.cat) {
		return errors.New("indicator column of a nil categorical column")
	}
	if err := c.cat.validate(); err != nil {
		return fmt.Errorf("indicator column %q: %w", c.Name(), err)
	}
	return nil
}

// ---- embedding ----

// EmbeddingColumn is a categorical column through an embedding table of
// NumBuckets() rows of Dimension() floats, each record's bag of ids
// combined (mean by default, as TensorFlow),
// tf.feature_column.embedding_column. Shared embedding columns
// (SharedEmbeddings) read one table.
type EmbeddingColumn struct {
	cat      CategoricalColumn
	dim      int
	combiner layers.Combiner
	stddev   float64
	shared   *sharedTable
}

// sharedTable is what the columns of one SharedEmbeddings call share.
type sharedTable struct {
	name string
	cats []CategoricalColumn
}

// EmbeddingOption sets an option of an embedding column.
type EmbeddingOption func(*EmbeddingColumn)

// Combine sets how a record's embeddings combine (default
// layers.CombineMean).
func Combine(c layers.Combiner) EmbeddingOption {
	return func(e *EmbeddingColumn) { e.combiner = c }
}

// InitStddev sets the standard deviation of the truncated normal the
// table starts from (default 1/√dimension, as TensorFlow).
func InitStddev(s float64) EmbeddingOption {
	return func(e *EmbeddingColumn) { e.stddev = s }
}

// Embedding returns cat's embedding column of dimension dim.
func Embedding(cat CategoricalColumn, dim int, opts ...EmbeddingOption) *EmbeddingColumn {
	e := &EmbeddingColumn{cat: cat, dim: dim, combiner: layers.CombineMean}
	if dim > 0 {
		e.stddev = 1 / math.Sqrt(float64(dim))
	}
	for _, o := range opts {
		o(e)
	}
	return e
}

// SharedEmbeddings returns one embedding column per categorical column,
// all reading one table (named after the columns joined by "_" and
// "_shared_embedding", TensorFlow's shared_embedding_columns): the
// columns must have the same NumBuckets.
func SharedEmbeddings(cats []CategoricalColumn, dim int, opts ...EmbeddingOption) []*EmbeddingColumn {
	names := make([]string, len(cats))
	for i, c := range cats {
		names[i] = nameOf(c)
	}
	sh := &sharedTable{name: strings.Join(names, "_") + "_shared_embedding", cats: slices.Clone(cats)}
	out := make([]*EmbeddingColumn, len(cats))
	for i, c := range cats {
		out[i] = Embedding(c, dim, opts...)
		out[i].shared = sh
	}
	return out
}

// Name is cat's name and "_embedding", or for a shared embedding column
// cat's name and "_shared_embedding".
func (c *EmbeddingColumn) Name() string {
	if c.shared != nil {
		return nameOf(c.cat) + "_shared_embedding"
	}
	return nameOf(c.cat) + "_embedding"
}

// Categorical is the column embedded.
func (c *EmbeddingColumn) Categorical() CategoricalColumn { return c.cat }

// Dimension is the embedding's dimension.
func (c *EmbeddingColumn) Dimension() int { return c.dim }

// Combiner is how a record's embeddings combine.
func (c *EmbeddingColumn) Combiner() layers.Combiner { return c.combiner }

// TableName is the name of the table's variable's scope: the column's
// Name, or the shared table's name ("a_b_shared_embedding").
func (c *EmbeddingColumn) TableName() string {
	if c.shared != nil {
		return c.shared.name
	}
	return c.Name()
}

func (c *EmbeddingColumn) fitted() bool { return nilColumn(c.cat) || c.cat.fitted() }

func (c *EmbeddingColumn) validate() error {
	if nilColumn(c.cat) {
		return errors.New("embedding column of a nil categorical column")
	}
	if c.dim < 1 {
		return fmt.Errorf("embedding column %q: dimension %d, want at least 1", c.Name(), c.dim)
	}
	if c.combiner != layers.CombineSum && c.combiner != layers.CombineMean && c.combiner != layers.CombineSqrtN {
		return fmt.Errorf("embedding column %q: unknown combiner %v", c.Name(), c.combiner)
	}
	if !(c.stddev > 0) || math.IsInf(c.stddev, 0) {
		return fmt.Errorf("embedding column %q: initializer stddev %v, want finite and positive", c.Name(), c.stddev)
	}
	if err := c.cat.validate(); err != nil {
		return fmt.Errorf("embedding column %q: %w", c.Name(), err)
	}
	if c.shared != nil && c.cat.fitted() {
		n := c.cat.NumBuckets()
		for _, o := range c.shared.cats {
			if nilColumn(o) {
				return fmt.Errorf("shared embedding %q: a nil categorical column", c.shared.name)
			}
			if o.fitted() && o.NumBuckets() != n {
				return fmt.Errorf("shared embedding %q: columns %q (%d buckets) and %q (%d buckets) differ in size", c.shared.name, c.cat.Name(), n, o.Name(), o.NumBuckets())
			}
		}
	}
	return nil
}

// nilColumn reports whether c is nil or a nil pointer of a column type.
func nilColumn(c Column) bool { return c == nil || isNil(c) }

// nameOf is c's name, "<nil>" for nil.
func nameOf(c Column) string {
	if nilColumn(c) {
		return "<nil>"
	}
	return c.Name()
}
