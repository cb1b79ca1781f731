// Package export writes trained models out and loads them back: export
// directories written from an Estimator's latest checkpoint, their
// versions under a base directory, and loading a version into a Predictor
// that computes its signatures (Load, LoadLatest).
//
// Package serving serves what this package loads over TensorFlow
// Serving's REST API.
//
// The export outputs themselves (the signatures a model function offers)
// are part of the model function's Spec: see model.ExportOutput.
package export
