package columns

import (
	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/sharding"
)

// Kind is a Transformer's PreprocessKind: the kind of its record in an
// export, under which package columns registers its loader.
const Kind = "towerflow/columns"

// Label says how a Transformer parses a label feature into the batch's
// Labels.
type Label struct {
	// Key is the raw feature and the name of the label in Batch.Labels.
	Key string
	// Vocabulary, when set, maps string labels (Bytes) to their index, a
	// class id (TensorFlow's label_vocabulary); a label outside it is an
	// error. Without it, labels are numbers (Floats or Int64s).
	Vocabulary []string
	// Dimension is the number of values per record (default 1).
	Dimension int
	// Int64 makes the label int64 class ids rather than float32 values.
	Int64 bool
}

// ExampleWeight says how a Transformer parses an example-weight feature
// into the batch's Labels (under Key): one float per record, Default
// for a record without it (a record without it and no Default is an
// error).
type ExampleWeight struct {
	Key     string
	Default *float32
}

// Config is what a Transformer is made of: the columns the model reads
// (their sources included implicitly), and optionally a label and an
// example weight.
type Config struct {
	Columns []Column
	Label   *Label
	Weight  *ExampleWeight
}

// Transformer turns batches of raw records into model inputs by its
// columns. It is immutable: Parse is safe for concurrent use.
type Transformer struct {
	cfg Config
}

// NewTransformer checks cfg and returns its Transformer. Every column
// must be fitted: a column that needs the data (Standardize,
// BucketizedQuantiles, VocabularyFromData) is an error; Fit makes those.
// Two different columns of one name are an error.
func NewTransformer(cfg Config) (*Transformer, error) {
	return nil, ErrNotImplemented
}

// Columns returns the Transformer's columns, fitted, in the order given:
// what the model function passes to InputLayer and LinearLogits.
func (t *Transformer) Columns() []Column { return append([]Column(nil), t.cfg.Columns...) }

// Column returns the Transformer's column called name.
func (t *Transformer) Column(name string) (Column, bool) {
	for _, c := range t.cfg.Columns {
		if c.Name() == name {
			return c, true
		}
	}
	return nil, false
}

// Config returns the Transformer's configuration, its columns fitted.
func (t *Transformer) Config() Config { return t.cfg }

// Parse turns examples into a batch of len(examples) rows: each numeric
// column a dense float32 feature [rows, shape...] under its name; each
// categorical column a sharding.SparseCOO of int64 ids [rows, most ids of
// a record] under its name (a weighted column also its float32 weights
// under WeightsName); each bucketized column and indicator column a dense
// float32 multi-hot feature [rows, NumBuckets] under the indicator's name
// (Indicator(c).Name()); the label and example weight, if configured and
// present, in Labels. An error names the feature, the record (its index in
// examples) and the value.
func (t *Transformer) Parse(examples []dataset.Example) (sharding.Batch, error) {
	return sharding.Batch{}, ErrNotImplemented
}

// PreprocessKind is Kind: how an export names the transformation.
func (t *Transformer) PreprocessKind() string { return Kind }

// MarshalJSON encodes the Transformer: its columns with everything they
// were fitted to (vocabularies, boundaries, statistics, hash settings),
// its label and example weight. Load decodes it.
func (t *Transformer) MarshalJSON() ([]byte, error) { return nil, ErrNotImplemented }

// Load decodes a Transformer encoded by MarshalJSON.
func Load(config []byte) (*Transformer, error) { return nil, ErrNotImplemented }
