// Package canned is tf.estimator's canned estimators for towerflow: the
// heads (BinaryHead, MultiClassHead, RegressionHead) that turn logits into
// a loss, predictions, TensorFlow's eval metrics and export signatures, and
// the linear, DNN and wide-and-deep (DNNLinearCombined) classifiers and
// regressors built on them over feature columns.
//
// Its place: a canned estimator is an ordinary model function
// (model.Fn) wrapped by replicate.ModelFn and run by an
// estimator.Estimator, so it replicates over towers and processes like any
// model: its loss is a mean over the batch (TensorFlow's
// SUM_OVER_BATCH_SIZE), so N towers train as one device; its eval metrics
// reduce into the first tower; its predictions concatenate. Nothing in
// the run loop knows it is canned.
package canned
