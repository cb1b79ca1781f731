// Package model is the contract between a model function and the library
// that runs it: the Mode it builds for, the Params it is handed, the Fn type
// itself, and the Spec it returns (loss, predictions, eval metrics, export
// outputs, train ops). It is a leaf: package replicate (the engine that runs
// one tower per device) and package estimator (the run loop) both import
// it; a model written against it runs on one device or on many.
package model

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/towers"
)

// Mode is what a model function builds for.
type Mode int

const (
	// Train builds a loss and train ops.
	Train Mode = iota
	// Eval builds a loss and eval metrics.
	Eval
	// Predict builds predictions and export outputs; there are no labels.
	Predict
)

// String returns "train", "eval" or "predict".
func (m Mode) String() string {
	switch m {
	case Train:
		return "train"
	case Eval:
		return "eval"
	case Predict:
		return "predict"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Params are the user's hyper-parameters, handed to every model function
// call unchanged.
type Params map[string]any

// GlobalStepName is the name of the global step variable: an int64 scalar,
// not trainable, incremented once per training step. It is
// towers.GlobalStepName, which optimizers' learning-rate schedules read.
const GlobalStepName = towers.GlobalStepName

// Fn builds a model on one tower. It gets the tower's scope (graph, device,
// variables by name), the mode, the features and labels of the tower's shard as
// input nodes keyed like the batch (labels is nil in Predict mode; Get names
// a missing one), and the user's params.
//
// A sparse feature (sharding.Batch.Sparse) reaches the tower sparse: its
// shard of the batch's SparseCOO (rows rebased to the shard) is
// s.SparseFeature(name), which embedding lookups read
// (layers.EmbeddingLookupSparse). features[name] is its densified node, of
// shape [shard rows, dense shape[1:]...] with zeros where the sparse tensor
// has no entry; a step densifies the shard only when the graph uses that
// node.
//
// The same function runs unchanged on one device or replicated across
// devices (replicate.ModelFn). It must build the same variables, metrics and
// train ops on every tower. A panic inside it becomes an error naming the
// tower and mode.
type Fn func(s *towers.Scope, mode Mode, features Features, labels Labels, params Params) (*Spec, error)

// Spec is what a model function returns.
type Spec struct {
	// Loss is a scalar node; required in Train and Eval mode.
	Loss *G.Node
	// Predictions are named outputs with the batch along dimension 0;
	// required in Predict mode.
	Predictions map[string]*G.Node
	// EvalMetrics are streaming metrics by name, updated in Eval mode.
	EvalMetrics map[string]metrics.Bound
	// ExportOutputs are the signatures the model serves, by key.
	ExportOutputs map[string]ExportOutput
	// TrainOps minimise losses in Train mode. With none, the replication's
	// optimizer (replicate.Config.Optimizer) minimises Loss over every
	// trainable variable.
	TrainOps []TrainOp
}

// TrainOp is one minimisation: Optimizer applied to the gradients of Loss
// with respect to Vars. Several train ops may minimise one loss over
// disjoint variables, each with its own optimizer (the linear and DNN
// parts of a wide-and-deep model): the loss is differentiated once for all
// of them. Train ops of different losses may share variables and nodes
// (one loss a part of another, or a multiple of it): each gets the
// gradients of its own loss.
type TrainOp struct {
	// Loss is the scalar to minimise; nil means Spec.Loss.
	Loss *G.Node
	// Optimizer applies the gradients.
	Optimizer optimizers.Optimizer
	// Vars names the variables to update; nil means every trainable
	// variable the tower asked for. A listed variable the loss does not
	// depend on gets no gradient and is skipped.
	Vars []string
	// Clip clips the gradients before Optimizer applies them (see Clip);
	// the zero value clips nothing.
	Clip Clip
}
