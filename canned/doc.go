// Package canned is tf.estimator's canned estimators for towerflow: the
// heads (BinaryHead, MultiClassHead, RegressionHead) that turn logits into
// a loss, predictions, TensorFlow's eval metrics and export signatures, and
// the linear, DNN and wide-and-deep (DNNLinearCombined) classifiers and
// regressors built on them over feature columns (package columns).
//
// # Its place
//
// A canned estimator is an ordinary model function (model.Fn) wrapped by
// replicate.ModelFn and run by an estimator.Estimator, so it replicates
// over towers and processes like any model: its loss is a mean over the
// batch (TensorFlow's SUM_OVER_BATCH_SIZE), so N towers train as one
// device; its eval metrics reduce into the first tower; its predictions
// concatenate. Nothing in the run loop knows it is canned.
//
//	raw records (CSV rows, tf.Examples)
//	  → columns.Transformer.Parse (in dataset.Pipeline's workers; in serving, from the export)
//	  → batch: dense numeric and one-hot features, sparse ids, labels, weights
//	  → model function: columns.LinearLogits (wide part), columns.InputLayer → dense layers (deep part)
//	  → logits → Head: loss, predictions, eval metrics, export signatures
//
// # Using it
//
// A Head says what is predicted and where the label is (LabelKey, the
// label's column; "" is "label"); TransformerConfig makes the columns'
// Transformer parse the head's label (and weights) with the features;
// a constructor makes the Estimator, taking the columns it is given as
// the Transformer fitted them (columns.Transformer.Fitted), so that the
// columns defined before columns.Fit serve (see Example for a whole
// program):
//
//	head := canned.BinaryHead{LabelKey: "income_bracket", LabelVocabulary: []string{"<=50K", ">50K"}}
//	wide := []columns.Column{education, occupationXeducation}
//	deep := []columns.Column{age, columns.Embedding(education, 8)}
//	tr, err := columns.Fit(ctx, src, canned.TransformerConfig(head, append(wide, deep...)...))
//	est, err := canned.NewDNNLinearCombinedClassifier(canned.DNNLinearCombinedConfig{
//		Head: head, Transformer: tr,
//		LinearFeatureColumns: wide, DNNFeatureColumns: deep, DNNHiddenUnits: []int{100, 50},
//	}, estimator.RunConfig{ModelDir: dir})
//	train, err := est.Input(dataset.Pipeline{Files: files, CSV: &dataset.CSVOptions{Schema: schema}, BatchSize: 256, Epochs: estimator.Forever})
//	err = est.Train(ctx, train, estimator.MaxSteps(10000))
//	version, err := est.Export(ctx, exportDir, tr.ServingInput(1)) // records the Transformer
//	predictor, err := export.Load(version, est.Model())
//	out, err := predictor.PredictExamples(ctx, canned.PredictSignature, rawRecords)
//
// The Estimator embeds the *estimator.Estimator (Train, Evaluate, Predict,
// checkpoints, warm start through estimator.RunConfig.WarmStart, ...); its
// Export also records the Transformer (estimator.Preprocess), so that the
// export serves raw records; its Input makes an input function of files of
// raw records parsed by the Transformer; Model is what export.Load takes.
// A configuration without a Transformer works on batches that already
// hold the columns' features (as the Transformer would make them).
//
// # As TensorFlow
//
//   - Linear models train with FTRL (learning rate min(0.2, 1/√columns)),
//     DNNs with Adagrad (0.05); a wide-and-deep model trains its wide part
//     with FTRL (min(0.005, 1/√columns)) and its deep part with Adagrad
//     (0.001), each part's variables by its own optimizer (two
//     model.TrainOps over one loss).
//   - Variables are named as TensorFlow names them where the pieces allow:
//     "dnn/hiddenlayer_<i>/kernel", "dnn/logits/bias",
//     "dnn/hiddenlayer_<i>/batchnorm_<i>/gamma"; the columns' own
//     ("linear_model/<column>/weights", "input_layer/...") are package
//     columns'.
//   - Prediction keys, eval metric keys and signature keys are
//     TensorFlow's (see the constants), with one difference: gorgonia has
//     no string tensors, so "classes" and "all_classes" hold class ids, and
//     Head.ClassNames names them; a classify signature carries the names
//     (model.ClassificationOutput.ClassNames), which serving answers with.
//   - average_loss is the weighted mean of the examples' losses; the
//     estimator's "loss" is the mean over batches of the training loss.
package canned
