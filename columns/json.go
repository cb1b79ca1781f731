package columns

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/towerflow/towerflow/layers"
)

// jsonVersion is the version of the JSON form MarshalJSON writes; Load
// reads it and no other.
const jsonVersion = 1

type transformerJSON struct {
	Kind    string        `json:"kind"`
	Version int           `json:"version"`
	Columns []*columnJSON `json:"columns"`
	Label   *labelJSON    `json:"label,omitempty"`
	Weight  *weightJSON   `json:"example_weight,omitempty"`
}

type weightJSON struct {
	Key     string   `json:"key"`
	Default *float32 `json:"default,omitempty"`
}

type labelJSON struct {
	Key        string   `json:"key"`
	Vocabulary []string `json:"vocabulary,omitempty"`
	Dimension  int      `json:"dimension,omitempty"`
	Int64      bool     `json:"int64,omitempty"`
}

// columnJSON is one column, its type saying which fields it has; the
// columns it is made of are nested.
type columnJSON struct {
	Type string `json:"type"`
	Key  string `json:"key,omitempty"`

	// numeric
	Shape      []int           `json:"shape,omitempty"`
	Default    []float32       `json:"default,omitempty"`
	Normalizer *normalizerJSON `json:"normalizer,omitempty"`

	// bucketized
	Source     *columnJSON `json:"source,omitempty"`
	Boundaries *[]float64  `json:"boundaries,omitempty"`
	Quantiles  int         `json:"quantiles,omitempty"`

	// vocabulary
	Vocabulary *[]string `json:"vocabulary,omitempty"`
	File       string    `json:"file,omitempty"`
	OOVBuckets int       `json:"oov_buckets,omitempty"`
	DefaultID  *int      `json:"default_id,omitempty"`
	FromData   bool      `json:"from_data,omitempty"`
	MinCount   int       `json:"min_count,omitempty"`
	MaxSize    int       `json:"max_size,omitempty"`

	// hash bucket, identity, crossed
	Buckets int           `json:"buckets,omitempty"`
	Keys    []*columnJSON `json:"keys,omitempty"`
	HashKey string        `json:"hash_key,omitempty"` // decimal: uint64 overflows JSON readers' doubles
	// crossed; absent: DefaultMaxCrosses (and written only when another)
	MaxCrosses *int `json:"max_crosses,omitempty"`

	// weighted, indicator, embedding
	Categorical *columnJSON   `json:"categorical,omitempty"`
	WeightKey   string        `json:"weight_key,omitempty"`
	Dimension   int           `json:"dimension,omitempty"`
	Combiner    string        `json:"combiner,omitempty"`
	InitStddev  float64       `json:"init_stddev,omitempty"`
	Shared      string        `json:"shared,omitempty"`
	SharedWith  []*columnJSON `json:"shared_columns,omitempty"`
}

type normalizerJSON struct {
	Mean     float64 `json:"mean"`
	Stddev   float64 `json:"stddev"`
	FromData bool    `json:"from_data,omitempty"`
	Fitted   bool    `json:"fitted,omitempty"`
}

// MarshalJSON encodes the Transformer: its columns with everything they
// were fitted to (vocabularies, boundaries, statistics, hash settings),
// its label and example weight, under its kind and a version. Load
// decodes it into an equal Transformer: the same columns, which parse
// every batch as this one does.
func (t *Transformer) MarshalJSON() ([]byte, error) {
	out := transformerJSON{Kind: Kind, Version: jsonVersion}
	if w := t.cfg.Weight; w != nil {
		out.Weight = &weightJSON{Key: w.Key, Default: w.Default}
	}
	for _, c := range t.cfg.Columns {
		j, err := encodeColumn(c)
		if err != nil {
			return nil, err
		}
		out.Columns = append(out.Columns, j)
	}
	if l := t.cfg.Label; l != nil {
		out.Label = &labelJSON{Key: l.Key, Vocabulary: l.Vocabulary, Dimension: l.Dimension, Int64: l.Int64}
	}
	return json.Marshal(out)
}

func encodeColumn(c Column) (*columnJSON, error) {
	switch c := c.(type) {
	case *NumericColumn:
		j := &columnJSON{Type: "numeric", Key: c.key, Shape: c.shape, Default: c.def}
		if n := c.normalizer; n != nil {
			j.Normalizer = &normalizerJSON{Mean: n.Mean, Stddev: n.Stddev, FromData: n.FromData, Fitted: c.statsFitted}
		}
		return j, nil
	case *BucketizedColumn:
		src, err := encodeColumn(c.source)
		if err != nil {
			return nil, err
		}
		j := &columnJSON{Type: "bucketized", Source: src, Quantiles: c.quantiles}
		if c.boundaries != nil {
			b := c.boundaries
			j.Boundaries = &b
		}
		return j, nil
	case *VocabularyColumn:
		j := &columnJSON{Type: "vocabulary", Key: c.key, File: c.file, OOVBuckets: c.oov, FromData: c.fromData, MinCount: c.minCount, MaxSize: c.maxSize}
		if c.vocab != nil {
			v := c.vocab
			j.Vocabulary = &v
		}
		if c.hasDefault {
			d := c.def
			j.DefaultID = &d
		}
		return j, nil
	case *HashBucketColumn:
		return &columnJSON{Type: "hash_bucket", Key: c.key, Buckets: c.buckets}, nil
	case *IdentityColumn:
		j := &columnJSON{Type: "identity", Key: c.key, Buckets: c.buckets}
		if c.hasDefault {
			d := c.def
			j.DefaultID = &d
		}
		return j, nil
	case *CrossedColumn:
		j := &columnJSON{Type: "crossed", Buckets: c.buckets, HashKey: strconv.FormatUint(c.hashKey, 10)}
		if c.maxCrosses != DefaultMaxCrosses {
			j.MaxCrosses = &c.maxCrosses
		}
		for _, k := range c.keys {
			if raw, ok := k.(RawKey); ok {
				j.Keys = append(j.Keys, &columnJSON{Type: "raw", Key: string(raw)})
				continue
			}
			kj, err := encodeColumn(k.(Column))
			if err != nil {
				return nil, err
			}
			j.Keys = append(j.Keys, kj)
		}
		return j, nil
	case *WeightedColumn:
		cat, err := encodeColumn(c.cat)
		if err != nil {
			return nil, err
		}
		return &columnJSON{Type: "weighted", Categorical: cat, WeightKey: c.weightKey}, nil
	case *IndicatorColumn:
		cat, err := encodeColumn(c.cat)
		if err != nil {
			return nil, err
		}
		return &columnJSON{Type: "indicator", Categorical: cat}, nil
	case *EmbeddingColumn:
		cat, err := encodeColumn(c.cat)
		if err != nil {
			return nil, err
		}
		j := &columnJSON{Type: "embedding", Categorical: cat, Dimension: c.dim, Combiner: c.combiner.String(), InitStddev: c.stddev}
		if sh := c.shared; sh != nil {
			j.Shared = sh.name
			for _, o := range sh.cats {
				oj, err := encodeColumn(o)
				if err != nil {
					return nil, err
				}
				j.SharedWith = append(j.SharedWith, oj)
			}
		}
		return j, nil
	}
	return nil, fmt.Errorf("columns: cannot encode column %q, a %T", nameOf(c), c)
}

// Load decodes a Transformer encoded by MarshalJSON: an export's record
// of the transformation (its kind Kind). Anything that is not that form,
// or columns that are not valid or not fitted, is an error.
func Load(config []byte) (*Transformer, error) {
	dec := json.NewDecoder(bytes.NewReader(config))
	dec.DisallowUnknownFields()
	var j transformerJSON
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("columns: load: %w", err)
	}
	if dec.More() {
		return nil, errors.New("columns: load: data after the transformer's JSON")
	}
	if j.Kind != Kind {
		return nil, fmt.Errorf("columns: load: kind %q, want %q", j.Kind, Kind)
	}
	if j.Version != jsonVersion {
		return nil, fmt.Errorf("columns: load: version %d, this package reads version %d", j.Version, jsonVersion)
	}
	d := decoder{shared: map[string]*sharedTable{}}
	var cfg Config
	if w := j.Weight; w != nil {
		cfg.Weight = &ExampleWeight{Key: w.Key, Default: w.Default}
	}
	for i, cj := range j.Columns {
		c, err := d.column(cj)
		if err != nil {
			return nil, fmt.Errorf("columns: load: column %d: %w", i, err)
		}
		cfg.Columns = append(cfg.Columns, c)
	}
	if l := j.Label; l != nil {
		cfg.Label = &Label{Key: l.Key, Vocabulary: l.Vocabulary, Dimension: l.Dimension, Int64: l.Int64}
	}
	t, err := newTransformer(cfg)
	if err != nil {
		return nil, fmt.Errorf("columns: load: %w", err)
	}
	return t, nil
}

// UnmarshalJSON sets t to the Transformer Load decodes from data.
func (t *Transformer) UnmarshalJSON(data []byte) error {
	l, err := Load(data)
	if err != nil {
		return err
	}
	*t = *l
	return nil
}

type decoder struct {
	shared map[string]*sharedTable
}

func (d *decoder) categorical(j *columnJSON, what string) (CategoricalColumn, error) {
	if j == nil {
		return nil, fmt.Errorf("%s has no categorical column", what)
	}
	c, err := d.column(j)
	if err != nil {
		return nil, err
	}
	cat, ok := c.(CategoricalColumn)
	if !ok {
		return nil, fmt.Errorf("%s: %q is a %s column, not categorical", what, c.Name(), j.Type)
	}
	return cat, nil
}

func (d *decoder) column(j *columnJSON) (Column, error) {
	if j == nil {
		return nil, errors.New("null column")
	}
	switch j.Type {
	case "numeric":
		c := &NumericColumn{key: j.Key, shape: j.Shape, def: j.Default}
		if n := j.Normalizer; n != nil {
			c.normalizer = &Normalizer{Mean: n.Mean, Stddev: n.Stddev, FromData: n.FromData}
			c.statsFitted = n.Fitted
		}
		return c, nil
	case "bucketized":
		src, err := d.column(j.Source)
		if err != nil {
			return nil, fmt.Errorf("bucketized source: %w", err)
		}
		num, ok := src.(*NumericColumn)
		if !ok {
			return nil, fmt.Errorf("bucketized column of %q, a %s column", src.Name(), j.Source.Type)
		}
		c := &BucketizedColumn{source: num, quantiles: j.Quantiles}
		if j.Boundaries != nil {
			c.boundaries = *j.Boundaries
			if c.boundaries == nil {
				c.boundaries = []float64{}
			}
		}
		return c, nil
	case "vocabulary":
		c := &VocabularyColumn{key: j.Key, file: j.File, oov: j.OOVBuckets, def: -1, fromData: j.FromData, minCount: j.MinCount, maxSize: j.MaxSize}
		if j.DefaultID != nil {
			c.def, c.hasDefault = *j.DefaultID, true
		}
		var vocab []string
		if j.Vocabulary != nil {
			vocab = *j.Vocabulary
			if vocab == nil {
				vocab = []string{}
			}
		}
		c.setVocabulary(vocab)
		return c, nil
	case "hash_bucket":
		return &HashBucketColumn{key: j.Key, buckets: j.Buckets}, nil
	case "identity":
		c := &IdentityColumn{key: j.Key, buckets: j.Buckets}
		if j.DefaultID != nil {
			c.def, c.hasDefault = *j.DefaultID, true
		}
		return c, nil
	case "crossed":
		key, err := strconv.ParseUint(j.HashKey, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("crossed column hash key %q: %w", j.HashKey, err)
		}
		c := &CrossedColumn{buckets: j.Buckets, hashKey: key, maxCrosses: DefaultMaxCrosses}
		if j.MaxCrosses != nil {
			c.maxCrosses = *j.MaxCrosses
		}
		for _, kj := range j.Keys {
			if kj != nil && kj.Type == "raw" {
				c.keys = append(c.keys, RawKey(kj.Key))
				continue
			}
			k, err := d.categorical(kj, "crossed column key")
			if err != nil {
				return nil, err
			}
			c.keys = append(c.keys, k.(Crossable))
		}
		return c, nil
	case "weighted":
		cat, err := d.categorical(j.Categorical, "weighted column")
		if err != nil {
			return nil, err
		}
		return &WeightedColumn{cat: cat, weightKey: j.WeightKey}, nil
	case "indicator":
		cat, err := d.categorical(j.Categorical, "indicator column")
		if err != nil {
			return nil, err
		}
		return &IndicatorColumn{cat: cat}, nil
	case "embedding":
		cat, err := d.categorical(j.Categorical, "embedding column")
		if err != nil {
			return nil, err
		}
		comb, err := combinerOf(j.Combiner)
		if err != nil {
			return nil, err
		}
		c := &EmbeddingColumn{cat: cat, dim: j.Dimension, combiner: comb, stddev: j.InitStddev}
		if j.Shared != "" {
			sh, ok := d.shared[j.Shared]
			if !ok {
				sh = &sharedTable{name: j.Shared}
				for _, oj := range j.SharedWith {
					o, err := d.categorical(oj, "shared embedding column")
					if err != nil {
						return nil, err
					}
					sh.cats = append(sh.cats, o)
				}
				d.shared[j.Shared] = sh
			}
			c.shared = sh
		}
		return c, nil
	}
	return nil, fmt.Errorf("unknown column type %q", j.Type)
}

func combinerOf(s string) (layers.Combiner, error) {
	for _, c := range []layers.Combiner{layers.CombineSum, layers.CombineMean, layers.CombineSqrtN} {
		if c.String() == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown combiner %q (want sum, mean or sqrtn)", s)
}
