// Package dataset reads training data from files into batches an
// Estimator trains on: records in TFRecord files holding tf.Example
// protobufs, and rows of CSV files, both as Examples — named features,
// each a list of integers, floats or byte strings, as TensorFlow's
// tf.train.Example — which the input pipeline shuffles, batches and turns
// into dense tensors and sparse features.
package dataset

import "fmt"

// Kind is which list a Feature holds: tf.train.Feature's oneof.
type Kind int

const (
	// KindNone is a feature with no list set, as tf.train.Feature allows.
	KindNone Kind = iota
	KindInt64
	KindFloat
	KindBytes
)

func (k Kind) String() string {
	switch k {
	case KindNone:
		return "none"
	case KindInt64:
		return "int64"
	case KindFloat:
		return "float"
	case KindBytes:
		return "bytes"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Feature is one feature's values in one example: at most one of the
// lists is non-nil (tf.train.Feature's int64_list, float_list and
// bytes_list). An empty non-nil list is a feature of that kind with no
// values, which a variable-length feature may be.
type Feature struct {
	Int64s []int64
	Floats []float32
	Bytes  [][]byte
}

// Kind is the kind of list f holds, KindNone when none is set.
func (f Feature) Kind() Kind {
	switch {
	case f.Int64s != nil:
		return KindInt64
	case f.Floats != nil:
		return KindFloat
	case f.Bytes != nil:
		return KindBytes
	}
	return KindNone
}

// Len is the number of values f holds.
func (f Feature) Len() int { return len(f.Int64s) + len(f.Floats) + len(f.Bytes) }

// Validate is an error when f sets more than one list.
func (f Feature) Validate() error {
	n := 0
	for _, set := range []bool{f.Int64s != nil, f.Floats != nil, f.Bytes != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("feature sets %d value lists, at most one is allowed", n)
	}
	return nil
}

// Example is one record: features by name (tf.train.Example's features).
type Example map[string]Feature
