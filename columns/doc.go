// Package columns is towerflow's tf.feature_column: it turns raw records
// (dataset.Example: named lists of integers, floats and byte strings, as
// CSV rows and tf.Example records carry them) into a model's inputs.
//
// Columns are defined once and used in three places:
//
//   - Fit computes in one streaming pass over the training data what some
//     columns need from it: a numeric column's standardization statistics,
//     a bucketized column's quantile boundaries, a vocabulary taken from
//     the data. It returns a Transformer holding the fitted columns.
//   - A Transformer's Parse turns a batch of Examples into a
//     sharding.Batch: numeric columns into dense float32 features,
//     categorical columns into sparse features of int64 ids (with float32
//     weights for weighted columns) that the model reads through
//     towers.Scope.SparseFeature, indicator columns into dense one-hot or
//     multi-hot features. It runs in the input pipeline (dataset.Pipeline's
//     Parser) and, recorded in an export by its JSON form (MarshalJSON,
//     Load), in serving on raw feature values, so that both see the same
//     transformation.
//   - The model function reads the batch through the same columns, as
//     the Transformer fitted them (Transformer.Columns, or
//     Transformer.Fitted of a column defined before Fit, which fits
//     copies): InputLayer makes the dense input of a DNN
//     (tf.feature_column.input_layer), LinearLogits the logits of a
//     linear model over sparse and dense columns
//     (tf.feature_column.linear_model).
//
// The columns follow TensorFlow's semantics: Numeric (shape, default,
// normalizer), Bucketized (given boundaries or quantiles of the data),
// VocabularyList, VocabularyFile and VocabularyFromData (out-of-vocabulary
// hash buckets or a default id), HashBucket (FarmHash Fingerprint64 of the
// value modulo the buckets, TensorFlow's string_to_hash_bucket_fast, so
// that the ids match TensorFlow's for the same strings; integers are
// hashed as their decimal string), Identity, Crossed (TensorFlow's
// sparse_cross_hashed), Weighted, Indicator, Embedding and
// SharedEmbeddings. Column names, and the names of the batch features and
// model variables made from them, are TensorFlow's.
package columns
