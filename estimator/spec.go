package estimator

import (
	"context"
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/towerflow/towerflow/estimator/optimizers"
	"github.com/towerflow/towerflow/metrics"
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

// ModelFn builds a model on one tower. It gets the tower (graph and
// variables), the mode, the features and labels of the tower's shard as
// input nodes keyed like the batch (labels is nil in Predict mode), and the
// user's params. A sparse feature arrives densified: a dense node of shape
// [shard rows, dense shape[1:]...] with zeros where the sparse tensor has no
// entry.
//
// The same function runs unchanged on one device (passed to New directly) or
// replicated across devices (wrapped by replicate.ModelFn). It must build the
// same variables, metrics and train ops on every tower. A panic inside it
// becomes an error naming the tower and mode.
type ModelFn func(t *towers.Tower, mode Mode, features, labels map[string]*G.Node, params Params) (*Spec, error)

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
	// optimizer (replicate.Optimizer) minimises Loss over every trainable
	// variable.
	TrainOps []TrainOp
}

// TrainOp is one minimisation: Optimizer applied to the gradients of Loss
// with respect to Vars.
type TrainOp struct {
	// Loss is the scalar to minimise; nil means Spec.Loss.
	Loss *G.Node
	// Optimizer applies the gradients.
	Optimizer optimizers.Optimizer
	// Vars names the variables to update; nil means every trainable
	// variable the tower asked for. A listed variable the loss does not
	// depend on gets no gradient and is skipped.
	Vars []string
}

// Gradient is one variable's gradient summed over towers, as the
// optimizer will see it.
type Gradient struct {
	Variable *towers.Variable
	// Value is a []float32 or []float64 of the variable's size; it may be
	// changed in place.
	Value any
}

// GradientReducer sees the tower-summed gradients of one train op before
// its optimizer runs and may change them in place: the place to all-reduce
// gradients across processes.
type GradientReducer func(ctx context.Context, grads []Gradient) error

// Replication says how a model function is run: on which devices (one tower
// each), how tower losses are weighted, where master variables live.
type Replication struct {
	// Devices has one entry per tower; at least one.
	Devices []towers.Device
	// TowerWeights returns the factor each tower's loss, and so its
	// gradients, is multiplied by before summing, given the row count of
	// each tower's shard. nil means 1 for every tower.
	TowerWeights func(rows []int) []float64
	// Placement places master variables; nil means
	// towers.AutoPlacement(Devices).
	Placement towers.Placement
	// Optimizer makes the optimizer used when a Spec has a Loss but no
	// TrainOps; nil leaves such a Spec an error in Train mode.
	Optimizer func(Params) (optimizers.Optimizer, error)
	// ReduceGradients, when set, runs between summing tower gradients and
	// applying the optimizer.
	ReduceGradients GradientReducer
}

// Model is what an Estimator runs: a model function and its replication.
// ModelFn itself is a Model that runs on one device, /device:CPU:0;
// replicate.ModelFn returns one that runs a tower per device.
type Model interface {
	Fn() ModelFn
	Replication() (Replication, error)
}

// Fn returns fn.
func (fn ModelFn) Fn() ModelFn { return fn }

// Replication runs fn as one tower on /device:CPU:0.
func (fn ModelFn) Replication() (Replication, error) {
	return Replication{Devices: []towers.Device{towers.CPU(0)}}, nil
}
