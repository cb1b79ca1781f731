package columns

import (
	"fmt"
	"slices"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/towers"
)

// InputLayer returns the dense input of cols for the tower of s,
// tf.feature_column.input_layer: a [batch, Σ Dimension()] float32 node of
// the columns' blocks side by side in the order of their names, as
// TensorFlow orders them (two columns of one name are an error) — numeric columns'
// values (features[Name()], flattened), bucketized and indicator columns'
// one-hot or multi-hot blocks (features[Indicator(c).Name()]), embedding
// columns' combined embeddings (layers.EmbeddingLookupSparse of the
// sparse feature of their categorical column, a weighted column's
// weights as IDWeights) from the table variable
// "input_layer/<TableName>/embedding_weights" [NumBuckets, Dimension],
// which starts from a truncated normal of stddev 1/√Dimension (shared
// embedding columns read one table). Every column must be a DenseColumn
// of a Transformer's (fitted) columns, and the batch made by its Parse;
// a categorical column is an error saying to wrap it in Indicator or
// Embedding.
func InputLayer(s *towers.Scope, features model.Features, cols ...Column) (*G.Node, error) {
	if s == nil {
		return nil, fmt.Errorf("columns.InputLayer: nil scope")
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("columns.InputLayer: no columns")
	}
	sorted, err := byName(cols)
	if err != nil {
		return nil, fmt.Errorf("columns.InputLayer: %w", err)
	}
	m := layers.NewModule(s, "input_layer")
	parts := make([]*G.Node, 0, len(cols))
	for _, c := range sorted {
		x, err := denseBlock(m, features, c)
		if err != nil {
			return nil, fmt.Errorf("columns.InputLayer: column %q: %w", c.Name(), err)
		}
		parts = append(parts, x)
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	out, err := layers.Concat(parts...)
	if err != nil {
		return nil, fmt.Errorf("columns.InputLayer: %w", err)
	}
	return out, nil
}

// byName returns cols sorted by name, as TensorFlow's input_layer and
// linear_model take them; a nil or invalid column, or two of one name,
// are errors.
func byName(cols []Column) ([]Column, error) {
	for i, c := range cols {
		if c == nil || isNil(c) {
			return nil, fmt.Errorf("column %d is nil", i)
		}
		if err := c.validate(); err != nil {
			return nil, err
		}
	}
	sorted := slices.Clone(cols)
	slices.SortStableFunc(sorted, func(a, b Column) int { return strings.Compare(a.Name(), b.Name()) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Name() == sorted[i-1].Name() {
			return nil, fmt.Errorf("two columns named %q", sorted[i].Name())
		}
	}
	return sorted, nil
}

// denseBlock is column c's [batch, Dimension] block of the input layer of
// module m.
func denseBlock(m *layers.Module, features model.Features, c Column) (*G.Node, error) {
	if !c.fitted() {
		return nil, fmt.Errorf("column %q is not fitted: pass the Transformer's Columns(), or Transformer.Fitted of it", c.Name())
	}
	switch c := c.(type) {
	case *NumericColumn:
		return feature(features, c.Name(), c.Dimension())
	case *BucketizedColumn:
		return feature(features, Indicator(c).Name(), c.NumBuckets())
	case *IndicatorColumn:
		return feature(features, c.Name(), c.Dimension())
	case *EmbeddingColumn:
		return embed(m, c)
	case CategoricalColumn:
		return nil, fmt.Errorf("categorical column %q is not dense: wrap it in Indicator or Embedding", c.Name())
	}
	return nil, fmt.Errorf("column %q is a %T, not one of this package's", c.Name(), c)
}

// feature is the dense feature name as a [batch, dim] float32 node.
func feature(features model.Features, name string, dim int) (*G.Node, error) {
	x, err := features.Lookup(name)
	if err != nil {
		return nil, err
	}
	if x.Dtype() != tensor.Float32 {
		return nil, fmt.Errorf("feature %q has dtype %v, want float32 (as a Transformer makes it)", name, x.Dtype())
	}
	sh := x.Shape()
	if len(sh) == 0 || sh.TotalSize()/max(sh[0], 1) != dim {
		return nil, fmt.Errorf("feature %q has shape %v, want [batch, %d] (as the column's Transformer makes it)", name, sh, dim)
	}
	if len(sh) == 2 {
		return x, nil
	}
	return layers.Reshape(x, tensor.Shape{sh[0], dim})
}

// embed is embedding column c's combined embeddings.
func embed(m *layers.Module, c *EmbeddingColumn) (*G.Node, error) {
	s := m.Scope()
	table, err := m.Variable(c.TableName()+"/embedding_weights", tensor.Float32,
		tensor.Shape{c.cat.NumBuckets(), c.dim}, towers.TruncatedNormal(0, c.stddev))
	if err != nil {
		return nil, fmt.Errorf("embedding column %q: %w", c.Name(), err)
	}
	ids, opts, err := sparseIDs(s, c.cat)
	if err != nil {
		return nil, fmt.Errorf("embedding column %q: %w", c.Name(), err)
	}
	return layers.EmbeddingLookupSparse(s, table, ids, c.combiner, opts...)
}

// sparseIDs is the sparse feature of cat's ids in the tower of s, with
// the option of its weights for a weighted column.
func sparseIDs(s *towers.Scope, cat CategoricalColumn) (*towers.SparseFeature, []layers.LookupOption, error) {
	ids, err := s.SparseFeature(cat.Name())
	if err != nil {
		return nil, nil, err
	}
	w, ok := cat.(*WeightedColumn)
	if !ok {
		return ids, nil, nil
	}
	ws, err := s.SparseFeature(w.WeightsName())
	if err != nil {
		return nil, nil, err
	}
	return ids, []layers.LookupOption{layers.IDWeights(ws)}, nil
}

// LinearLogits returns the [batch, units] logits of a linear model over
// cols (summed in the order of their names, two columns of one name an
// error), tf.feature_column.linear_model: for each categorical column
// (vocabulary, hash bucket, identity, bucketized, crossed, weighted), the
// sum of the weight rows of its ids (a weighted column's ids weighted)
// from the variable "linear_model/<Name>/weights" [NumBuckets, units],
// looked up by layers.EmbeddingLookupSparse with the sum combiner so that
// their gradient is sparse; for each other dense column (numeric,
// indicator, embedding), its InputLayer block times
// "linear_model/<Name>/weights" [Dimension, units] (an embedding column's
// table its own, "linear_model/<TableName>/embedding_weights", as
// TensorFlow's linear_model makes it: not InputLayer's); plus
// "linear_model/bias_weights" [units]. Weights and bias start at zero, as
// TensorFlow's.
func LinearLogits(s *towers.Scope, features model.Features, units int, cols ...Column) (*G.Node, error) {
	const op = "columns.LinearLogits"
	if s == nil {
		return nil, fmt.Errorf("%s: nil scope", op)
	}
	if units < 1 {
		return nil, fmt.Errorf("%s: %d units, want at least 1", op, units)
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%s: no columns", op)
	}
	sorted, err := byName(cols)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	m := layers.NewModule(s, "linear_model")
	var sum *G.Node
	add := func(x *G.Node) error {
		if sum == nil {
			sum = x
			return nil
		}
		var err error
		sum, err = G.Add(sum, x)
		return err
	}
	for _, c := range sorted {
		if !c.fitted() {
			return nil, fmt.Errorf("%s: column %q is not fitted: pass the Transformer's Columns(), or Transformer.Fitted of it", op, c.Name())
		}
		var part *G.Node
		if cat, ok := c.(CategoricalColumn); ok {
			w, err := m.Variable(c.Name()+"/weights", tensor.Float32, tensor.Shape{cat.NumBuckets(), units}, towers.Zeros())
			if err != nil {
				return nil, fmt.Errorf("%s: column %q: %w", op, c.Name(), err)
			}
			ids, opts, err := sparseIDs(s, cat)
			if err != nil {
				return nil, fmt.Errorf("%s: column %q: %w", op, c.Name(), err)
			}
			if part, err = layers.EmbeddingLookupSparse(s, w, ids, layers.CombineSum, opts...); err != nil {
				return nil, fmt.Errorf("%s: column %q: %w", op, c.Name(), err)
			}
		} else {
			x, err := denseBlock(m, features, c)
			if err != nil {
				return nil, fmt.Errorf("%s: column %q: %w", op, c.Name(), err)
			}
			w, err := m.Variable(c.Name()+"/weights", tensor.Float32, tensor.Shape{x.Shape()[1], units}, towers.Zeros())
			if err != nil {
				return nil, fmt.Errorf("%s: column %q: %w", op, c.Name(), err)
			}
			if part, err = layers.Dense(x, w, nil, layers.Linear); err != nil {
				return nil, fmt.Errorf("%s: column %q: %w", op, c.Name(), err)
			}
		}
		if err := add(part); err != nil {
			return nil, fmt.Errorf("%s: column %q: %w", op, c.Name(), err)
		}
	}
	bias, err := m.Variable("bias_weights", tensor.Float32, tensor.Shape{units}, towers.Zeros())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	out, err := G.BroadcastAdd(sum, bias, nil, []byte{0})
	if err != nil {
		return nil, fmt.Errorf("%s: bias: %w", op, err)
	}
	return out, nil
}
