package estimator

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// Gradients are one batch's gradients as values, the Ray/TensorFlow
// worker API: what ComputeGradients returns and ApplyGradients takes.
type Gradients struct {
	// Loss is the batch's loss reduced over the towers as a training step
	// reduces it. ApplyGradients ignores it.
	Loss float64
	// ByName holds the gradient of every variable a train op minimizes,
	// by variable name, in the variable's shape and dtype, except those
	// in Sparse.
	ByName map[string]*tensor.Dense
	// Sparse holds the gradients of the variables only embedding lookups
	// read (layers.EmbeddingLookup): the rows the batch touched, each id
	// once, ascending (towers.IndexedSlices, values of the variable's
	// dtype). ApplyGradients takes them with ByName.
	Sparse map[string]towers.IndexedSlices
	// Flat is every weight's gradient as one vector laid out as
	// towers.Store.Flat lays out the weights (trainable variables in
	// creation order, row-major, float64): a weight no train op minimizes
	// has zeros there.
	Flat []float64
}

// ComputeGradients computes the gradients of one batch without applying
// them, replicated across the towers exactly like a Train step and
// reduced with the same loss weights: Ray's compute_gradients. No
// variable, optimizer slot or global step changes; the batch's state
// updates (batch norm's moving statistics) stay pending until the next
// ApplyGradients writes them (see replicate.Engine.ComputeGradients).
// ComputeGradients then ApplyGradients on the same batch equals one Train
// step bit for bit. Like Train it first restores the model directory's
// latest checkpoint. It is an error across processes
// (replicate.Config.Processes) and for a model whose train ops minimize
// one variable twice.
func (e *Estimator) ComputeGradients(ctx context.Context, batch Batch) (Gradients, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.checkOpen("compute gradients"); err != nil {
		return Gradients{}, err
	}
	if err := e.restoreLatest(); err != nil {
		return Gradients{}, fmt.Errorf("compute gradients: %w", err)
	}
	loss, grads, err := e.eng.ComputeGradients(ctx, batch, replicate.StepHooks{})
	if err != nil {
		return Gradients{}, err
	}
	weights := e.store().WeightVariables()
	out := Gradients{Loss: loss, ByName: make(map[string]*tensor.Dense, len(grads)), Flat: make([]float64, flatSize(weights))}
	at := offsets(weights)
	for _, g := range grads {
		v := g.Variable
		if sl, ok := g.Value.(towers.IndexedSlices); ok {
			if out.Sparse == nil {
				out.Sparse = map[string]towers.IndexedSlices{}
			}
			cp := towers.IndexedSlices{Indices: slices.Clone(sl.Indices), DenseShape: slices.Clone(sl.DenseShape)}
			if sl.Values != nil {
				cp.Values = numeric.Copy(sl.Values)
			}
			out.Sparse[v.Name()] = cp
			if err := addRows(out.Flat[at[v.Name()]:at[v.Name()]+v.Size()], sl); err != nil {
				return Gradients{}, fmt.Errorf("compute gradients: %q: %w", v.Name(), err)
			}
			continue
		}
		out.ByName[v.Name()] = numeric.Over(v.Shape(), numeric.Copy(g.Value))
		vals, err := numeric.SliceFloat64s(g.Value)
		if err != nil {
			return Gradients{}, fmt.Errorf("compute gradients: %q: %w", v.Name(), err)
		}
		copy(out.Flat[at[v.Name()]:], vals)
	}
	return out, nil
}

// ApplyGradients applies gradients once with the model's optimizers, then
// the state updates a ComputeGradients left pending, and increments the
// global step: Ray's apply_gradients, the second half of a Train step.
// It takes g.ByName and g.Sparse when either is not nil — together exactly
// the variables ComputeGradients returns, in their shapes and dtypes —
// else g.Flat, laid out as
// Gradients.Flat (entries of weights no train op minimizes are ignored).
// A wrong name, shape, dtype or length is an error listing what was
// expected, and nothing changes. Only ApplyGradients creates or changes
// optimizer slots. The Estimator must have training towers: it has
// computed gradients or trained before (the optimizers are the model
// function's). Like Train it first restores the model directory's latest
// checkpoint; unlike Train it saves none: save with a Train run or
// checkpoint.Save.
func (e *Estimator) ApplyGradients(ctx context.Context, g Gradients) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.checkOpen("apply gradients"); err != nil {
		return err
	}
	if err := e.restoreLatest(); err != nil {
		return fmt.Errorf("apply gradients: %w", err)
	}
	want := e.eng.GradientVariables()
	var grads []replicate.Gradient
	var err error
	switch {
	case want == nil:
		err = fmt.Errorf("no training towers yet: compute gradients or train first (the optimizers are the model function's)")
	case g.ByName != nil || g.Sparse != nil:
		grads, err = gradientsByName(want, g.ByName, g.Sparse)
	case g.Flat != nil:
		grads, err = flatGradients(e.store().WeightVariables(), want, g.Flat)
	default:
		err = fmt.Errorf("no gradients: set Gradients.ByName or Gradients.Flat")
	}
	if err != nil {
		return fmt.Errorf("apply gradients: %w", err)
	}
	return e.eng.ApplyGradients(ctx, grads)
}

// gradientsByName checks given against the variables wanted and returns
// them as the engine takes them.
func gradientsByName(want []*towers.Variable, given map[string]*tensor.Dense, sparse map[string]towers.IndexedSlices) ([]replicate.Gradient, error) {
	expected := func() string { return replicate.DescribeVariables(want) }
	out := make([]replicate.Gradient, 0, len(want))
	for _, v := range want {
		if sl, ok := sparse[v.Name()]; ok {
			if _, twice := given[v.Name()]; twice {
				return nil, fmt.Errorf("gradient of %q both dense and sparse; want one", v.Name())
			}
			out = append(out, replicate.Gradient{Variable: v, Value: sl})
			continue
		}
		d, ok := given[v.Name()]
		if !ok {
			return nil, fmt.Errorf("no gradient of %q; want gradients of %s", v.Name(), expected())
		}
		if d == nil || !d.Shape().Eq(v.Shape()) || d.Dtype() != v.Dtype() {
			return nil, fmt.Errorf("gradient of %q has %s; want gradients of %s", v.Name(), describeDense(d), expected())
		}
		value, err := numeric.Slice(d) // a scalar's one element as a slice, as the engine takes it
		if err != nil {
			return nil, fmt.Errorf("gradient of %q: %w", v.Name(), err)
		}
		out = append(out, replicate.Gradient{Variable: v, Value: value})
	}
	if len(given)+len(sparse) != len(want) {
		for _, name := range slices.Sorted(maps.Keys(sparse)) {
			if !slices.ContainsFunc(want, func(v *towers.Variable) bool { return v.Name() == name }) {
				return nil, fmt.Errorf("sparse gradient of %q, which no train op minimizes; want gradients of %s", name, expected())
			}
		}
		for _, name := range slices.Sorted(maps.Keys(given)) {
			if !slices.ContainsFunc(want, func(v *towers.Variable) bool { return v.Name() == name }) {
				return nil, fmt.Errorf("gradient of %q, which no train op minimizes; want gradients of %s", name, expected())
			}
		}
	}
	return out, nil
}

// flatGradients cuts a vector laid out as Gradients.Flat into the
// gradients of the variables wanted, in their dtypes.
func flatGradients(weights, want []*towers.Variable, flat []float64) ([]replicate.Gradient, error) {
	if n := flatSize(weights); len(flat) != n {
		return nil, fmt.Errorf("flat gradients of %d values, the weights have %d: %s", len(flat), n, replicate.DescribeVariables(weights))
	}
	at := offsets(weights)
	out := make([]replicate.Gradient, 0, len(want))
	for _, v := range want {
		lo, ok := at[v.Name()]
		if !ok {
			return nil, fmt.Errorf("variable %q is minimized but is not a weight (weights: %s)", v.Name(), replicate.DescribeVariables(weights))
		}
		vals := flat[lo : lo+v.Size()]
		var value any = vals
		if v.Dtype() != tensor.Float64 {
			value = numeric.NewSlice(v.Dtype(), v.Size())
			if err := numeric.SetFloat64s(value, vals); err != nil {
				return nil, fmt.Errorf("gradient of %q: %w", v.Name(), err)
			}
		}
		out = append(out, replicate.Gradient{Variable: v, Value: value})
	}
	return out, nil
}

func flatSize(weights []*towers.Variable) int {
	n := 0
	for _, v := range weights {
		n += v.Size()
	}
	return n
}

// offsets are where each weight starts in the flat layout.
func offsets(weights []*towers.Variable) map[string]int {
	at := make(map[string]int, len(weights))
	n := 0
	for _, v := range weights {
		at[v.Name()] = n
		n += v.Size()
	}
	return at
}

func describeDense(d *tensor.Dense) string {
	if d == nil {
		return "no value"
	}
	return fmt.Sprintf("shape %v dtype %v", d.Shape(), d.Dtype())
}

// addRows adds the rows of s into dst, its variable's part of a flat
// float64 vector.
func addRows(dst []float64, s towers.IndexedSlices) error {
	if s.Rows() == 0 {
		return nil
	}
	vals, err := numeric.SliceFloat64s(s.Values)
	if err != nil {
		return err
	}
	return towers.IndexedSlices{Indices: s.Indices, Values: vals, DenseShape: s.DenseShape}.AddTo(dst)
}
