// Package metrics holds towerflow's streaming evaluation metrics: metrics
// whose state is additive, so that the states of the towers (and of
// processes) merge by addition, and replicas reduce into tower 0.
//
// A metric is the Go counterpart of a TF1 tf.metrics.* function: where TF
// keeps a metric's running state in local variables (counts, weighted sums,
// confusion counts at thresholds) and increments them with an update op, a
// Metric here keeps the whole of its state as one vector of additive float64
// sums, State, and folds batches in with Update. Because every element of the
// state is a sum, two states of the same Kind combine by element-wise
// addition (Merge), a metric is reset by zeroing (Reset), and the value is a
// pure function of the state (Result). This mirrors TF's own distribution
// strategy, which creates metric variables with
// aggregation=VariableAggregation.SUM and sums the replicas before computing
// the value (metric_variable and _aggregate_across_replicas in
// tensorflow/python/ops/metrics_impl.py).
//
// # Its place in towerflow
//
//   - A model function binds metrics to nodes of its graph, for example
//     metrics.Accuracy(labels, predictions) or metrics.AUC(labels, probs,
//     metrics.Weights(w)). The result is a Bound: the nodes whose values the
//     metric needs (Inputs) and a constructor for a fresh zero-state metric
//     (New).
//   - Metric values are updated in Go, not by graph ops: after each eval step
//     the values computed for Bound.Inputs are handed to Metric.Update (see
//     also Bound.Update and UpdateValues, which read gorgonia values).
//   - Under replication every tower (graph copy) owns its own metric per name
//     and updates it from its shard of the batch. ReduceIntoFirst then adds
//     every replica into tower 0's metric and zeroes the replicas, so tower 0
//     holds the metric over the whole input; Results reads the values.
//
// # Names
//
// Each metric has one name for each of the two things a user does with it:
//
//   - X binds it to graph nodes in a model function and returns a Bound:
//     metrics.AUC(labels, probs, metrics.NumThresholds(50)). This is the
//     usual way in.
//   - NewX makes a zero state outside any graph, for Go code that has the
//     values already (a custom eval loop, a test, merging states read from
//     elsewhere): m, err := metrics.NewAUC(metrics.NumThresholds(50)), then
//     m.Update([]*tensor.Dense{labels, predictions}) per batch. A Bound's
//     New makes the same state, once per tower.
//
// Both give a Metric, the one interface every state implements; no concrete
// metric type is exported, since Merge, Reset, ReduceIntoFirst and Results
// need nothing else. The layout of each metric's State is documented on its
// NewX. A metric whose value is a vector (one per threshold) also
// implements MultiResult.
//
// The metrics, each an X and a NewX (TF1 name in parentheses):
//
//	Mean (mean), Accuracy (accuracy)
//	AccuracyBaseline (accuracy_baseline of TensorFlow's binary heads)
//	MeanSquaredError (mean_squared_error)
//	RootMeanSquaredError (root_mean_squared_error)
//	MeanAbsoluteError (mean_absolute_error)
//	Precision (precision), Recall (recall)
//	TruePositives, FalsePositives, TrueNegatives, FalseNegatives
//	  (true_positives, false_positives, true_negatives, false_negatives)
//	AUC (auc, ROC or PR, trapezoidal)
//	PrecisionAtThresholds (precision_at_thresholds)
//	RecallAtThresholds (recall_at_thresholds)
//	MeanIoU (mean_iou)
//	RecallAtK (recall_at_k with one label per example)
//
// Every one keeps its state as additive sums, takes optional per-example
// weights, and computes its value from the state alone.
//
// # Settings and options
//
// A setting a metric cannot do without is an argument (the thresholds of
// PrecisionAtThresholds, numClasses of MeanIoU, k of RecallAtK), the same
// for X and NewX. Everything optional is an Option, the one option type:
// Weights for every X, NumThresholds and Curve for AUC and NewAUC. An option
// that does not apply to what it is passed to is an error, never ignored.
//
// # Errors
//
// Bound constructors never panic; a nil node, a bad setting or an option
// that does not apply sets Bound.Err (see Bound). The NewX that take no
// configuration (NewMean, NewPrecision, ...) cannot fail and return a
// Metric; those that do (NewAUC, NewPrecisionAtThresholds,
// NewRecallAtThresholds, NewMeanIoU, NewRecallAtK) return (Metric, error).
// Bad data (wrong input count, shapes that do not match, out-of-range
// values) is an error from Update, which leaves the state unchanged.
//
// # Inputs
//
// Inputs may have any numeric dtype (float32, float64, the int and uint
// types) or bool; they are converted to float64. Labels and predictions must
// have the same number of elements (except for RecallAtK, whose predictions
// hold a score per class). Optional weights are broadcast like TF's
// weights_broadcast_ops.broadcast_weights (after _remove_squeezable_dimensions):
// a scalar, the shape of the predictions, or a prefix of it such as [batch]
// or [batch, 1], broadcast over the trailing dimensions.
package metrics
