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

import (
	"errors"

	"github.com/towerflow/towerflow/internal/exportdir"
)

// Signature is one servable function of an export: its method ("predict",
// "classify" or "regress"), and its inputs and outputs by name.
type Signature = exportdir.Signature

// TensorInfo describes one input or output of a signature: its dtype as
// TensorFlow names it ("float32", "float64", "int64", "int32", "bool",
// "uint8"; see estimator.DtypeByName) and its shape with -1 for the batch
// dimension. A sparse input (Sparse; estimator.FeatureSpec.Sparse) has
// shape [-1, the most values per example] and is given to
// Predictor.RunSparse as a sharding.SparseCOO.
type TensorInfo = exportdir.TensorInfo

var (
	// ErrBadInput is wrapped by Run's errors about the request's features:
	// a missing or unexpected input, a wrong dtype or shape. A
	// serving.Server answers them with 400 Bad Request.
	ErrBadInput = errors.New("bad input")
	// ErrUnknownSignature is wrapped by Run's error for a signature key the
	// export does not have.
	ErrUnknownSignature = errors.New("unknown signature")
	// ErrNoVersion is wrapped by LoadLatest's error when the base directory
	// holds no version.
	ErrNoVersion = errors.New("no export version")
	// ErrClosed is wrapped by Run's error after Close.
	ErrClosed = errors.New("predictor is closed")
)
