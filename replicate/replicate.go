// Package replicate runs one model function as one tower per device, like
// TensorFlow's replicate_model_fn.
//
// ModelFn wraps a single-device estimator.ModelFn. The Estimator then splits
// every batch along dimension 0 across the devices (uneven batches allowed:
// shard sizes differ by at most one), builds the same model on each device
// over shared master variables (tower 0 creates them, later towers reuse
// them; tower i>0 names its nodes "tower_i/..."), and:
//
//   - Train: reduces the tower losses, sums each trainable variable's
//     gradients over towers with the same weights, and applies the optimizer
//     once on the masters; the global step grows by one.
//   - Eval: reduces the loss the same way; each tower updates its own metric
//     states from its shard, then the replicas are added into tower 0 and
//     zeroed, and the values are read there.
//   - Predict: predictions and export outputs are concatenated along
//     dimension 0 in tower order. Other Spec fields come from tower 0.
//
// Towers whose model functions build different variables, metrics, train ops
// or outputs are an error that names the tower.
package replicate

import (
	"fmt"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/estimator/optimizers"
	"github.com/towerflow/towerflow/towers"
)

// LossReduction says how tower losses, and so gradients, combine.
type LossReduction int

const (
	// Sum adds the tower losses: right for a loss that sums over examples,
	// and TensorFlow's default.
	Sum LossReduction = iota
	// Mean divides each tower's loss by the number of towers.
	Mean
	// BatchMean weights each tower's loss by its share of the batch's rows.
	// For a loss that is a mean over the shard's examples, N towers then
	// train exactly like one device, whatever the split.
	BatchMean
	// None is not a reduction: asking for it is an error, as in TensorFlow.
	None
)

// String returns the reduction's name.
func (r LossReduction) String() string {
	switch r {
	case Sum:
		return "SUM"
	case Mean:
		return "MEAN"
	case BatchMean:
		return "BATCH_MEAN"
	case None:
		return "NONE"
	}
	return fmt.Sprintf("LossReduction(%d)", int(r))
}

// weights returns each tower's loss factor for shards of the given rows.
func (r LossReduction) weights(rows []int) []float64 {
	w := make([]float64, len(rows))
	total := 0
	for _, n := range rows {
		total += n
	}
	for i, n := range rows {
		switch r {
		case Mean:
			w[i] = 1 / float64(len(rows))
		case BatchMean:
			w[i] = float64(n) / float64(total)
		default:
			w[i] = 1
		}
	}
	return w
}

// Option configures ModelFn.
type Option func(*Model)

// Devices sets the devices, one tower each; default towers.LocalDevices().
func Devices(ds ...towers.Device) Option {
	return func(m *Model) { m.devices = append([]towers.Device(nil), ds...) }
}

// DeviceNames sets the devices by TensorFlow-style name ("/gpu:0",
// "/device:CPU:1"); a malformed name is an error when the Estimator is made.
func DeviceNames(names ...string) Option {
	return func(m *Model) {
		m.devices = nil
		for _, n := range names {
			d, err := towers.ParseDevice(n)
			if err != nil {
				m.err = err
				return
			}
			m.devices = append(m.devices, d)
		}
	}
}

// Optimizer sets the optimizer that minimises the Spec's loss when the model
// function returns no train ops.
func Optimizer(opt optimizers.Optimizer) Option {
	return func(m *Model) {
		m.optimizer = func(estimator.Params) (optimizers.Optimizer, error) { return opt, nil }
	}
}

// OptimizerFn sets a function of the params that makes that optimizer.
func OptimizerFn(fn func(estimator.Params) (optimizers.Optimizer, error)) Option {
	return func(m *Model) { m.optimizer = fn }
}

// Reduction sets the loss reduction; default Sum.
func Reduction(r LossReduction) Option { return func(m *Model) { m.reduction = r } }

// RoundRobin places master variables over devices in creation order instead
// of the default (the single GPU, else CPU:0).
func RoundRobin(devices ...towers.Device) Option {
	return func(m *Model) { m.placement = towers.RoundRobin(devices...) }
}

// ReduceGradients sets a function that sees the tower-summed gradients
// before the optimizer runs, e.g. to all-reduce them across processes.
func ReduceGradients(fn estimator.GradientReducer) Option {
	return func(m *Model) { m.reduce = fn }
}

// Model is a replicated model function, an estimator.Model.
type Model struct {
	fn        estimator.ModelFn
	devices   []towers.Device
	reduction LossReduction
	placement towers.Placement
	optimizer func(estimator.Params) (optimizers.Optimizer, error)
	reduce    estimator.GradientReducer
	err       error
}

// ModelFn returns fn replicated over devices: one tower per device.
func ModelFn(fn estimator.ModelFn, opts ...Option) *Model {
	m := &Model{fn: fn, devices: towers.LocalDevices()}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Fn returns the wrapped model function.
func (m *Model) Fn() estimator.ModelFn { return m.fn }

// Replication returns how the Estimator runs the towers; an invalid option
// (reduction NONE, no devices, a repeated device) is an error.
func (m *Model) Replication() (estimator.Replication, error) {
	if m.err != nil {
		return estimator.Replication{}, fmt.Errorf("replicate: %w", m.err)
	}
	if m.fn == nil {
		return estimator.Replication{}, fmt.Errorf("replicate: nil model function")
	}
	switch m.reduction {
	case Sum, Mean, BatchMean:
	case None:
		return estimator.Replication{}, fmt.Errorf("replicate: loss reduction NONE cannot combine tower losses; use SUM, MEAN or BATCH_MEAN")
	default:
		return estimator.Replication{}, fmt.Errorf("replicate: unknown loss reduction %v", m.reduction)
	}
	if len(m.devices) == 0 {
		return estimator.Replication{}, fmt.Errorf("replicate: no devices")
	}
	seen := map[towers.Device]bool{}
	for _, d := range m.devices {
		if seen[d] {
			return estimator.Replication{}, fmt.Errorf("replicate: device %v listed twice", d)
		}
		seen[d] = true
	}
	placement := m.placement
	if placement == nil {
		placement = towers.AutoPlacement(m.devices)
	}
	return estimator.Replication{
		Devices:         append([]towers.Device(nil), m.devices...),
		TowerWeights:    m.reduction.weights,
		Placement:       placement,
		Optimizer:       m.optimizer,
		ReduceGradients: m.reduce,
	}, nil
}
