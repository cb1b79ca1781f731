package columns

import (
	G "gorgonia.org/gorgonia"

	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/towers"
)

// InputLayer returns the dense input of cols for the tower of s,
// tf.feature_column.input_layer: a [batch, Σ Dimension()] float32 node of
// the columns' blocks side by side in the order given — numeric columns'
// values (features[name], flattened), bucketized and indicator columns'
// one-hot or multi-hot blocks (features[Indicator(c).Name()]), embedding
// columns' combined embeddings (looked up by layers.EmbeddingLookupSparse
// from the sparse feature of their categorical column, in the table
// variable "input_layer/<TableName>/embedding_weights"; shared embedding
// columns read one table). Every column must be a DenseColumn of a
// Transformer's fitted columns, and the batch made by its Parse.
func InputLayer(s *towers.Scope, features model.Features, cols ...Column) (*G.Node, error) {
	return nil, ErrNotImplemented
}

// LinearLogits returns the [batch, units] logits of a linear model over
// cols, tf.feature_column.linear_model: for each categorical column, the
// sum of the weights of its ids (a weighted column's ids weighted) from
// the variable "linear_model/<Name>/weights" [NumBuckets, units], looked
// up by layers.EmbeddingLookupSparse with the sum combiner so that their
// gradient is sparse; for each dense column, its InputLayer block times
// "linear_model/<Name>/weights" [Dimension, units]; plus
// "linear_model/bias_weights" [units]. Weights and bias start at zero, as
// TensorFlow's.
func LinearLogits(s *towers.Scope, features model.Features, units int, cols ...Column) (*G.Node, error) {
	return nil, ErrNotImplemented
}
