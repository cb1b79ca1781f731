// Package export turns a trained model into something that answers
// requests: export directories written from an Estimator's latest
// checkpoint, loading them back into a predictor, and serving them.
//
// The export outputs themselves (the signatures a model function offers)
// are part of the model function's Spec: see estimator.ExportOutput.
package export
