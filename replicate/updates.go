package replicate

import (
	"fmt"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/scopes"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/towers"
)

// updatePlan is one state update (towers.Scope.Assign or AssignAdd) across
// the towers of a train build.
type updatePlan struct {
	v     *towers.Variable
	add   bool
	nodes []*G.Node // the value or delta on each tower
	parts []any     // scratch: each tower's value of the last run
	// local is the towers' combined value of the last run: the sum of the
	// deltas, or the weighted mean of the values (before any all-reduce
	// across processes).
	local any
	self  []any // local alone, to add it with addInto
}

// planUpdates resolves the state updates the towers declared, TensorFlow's
// UPDATE_OPS: every tower must declare the same updates, in the same
// order; an Assign needs a float variable (the towers' values are
// averaged); the global step is the engine's own.
func (e *Engine) planUpdates(b *build) error {
	first := scopes.Updates(b.towers[0].Scope)
	for i, t := range b.towers[1:] {
		if a, c := describeUpdates(first), describeUpdates(scopes.Updates(t.Scope)); !slices.Equal(a, c) {
			return fmt.Errorf("%v, %v mode: model function declared different state updates than tower 0: %v, tower 0: %v", b.towers[i+1], model.Train, c, a)
		}
	}
	for k, u := range first {
		if u.Var == model.GlobalStepName {
			return fmt.Errorf("%v: state update of %q: the global step is incremented by the engine", b.towers[0], u.Var)
		}
		v, err := e.store.Lookup(u.Var)
		if err != nil {
			return fmt.Errorf("%v: state update: %w", b.towers[0], err)
		}
		if !u.Add && !numeric.IsFloat(v.Dtype()) {
			return fmt.Errorf("%v: Assign(%q): the variable has dtype %v; assigned values are averaged over the towers, so only float32 and float64 variables can be assigned (AssignAdd adds to any number)", b.towers[0], u.Var, v.Dtype())
		}
		if u.Add && !addable(v.Dtype()) {
			return fmt.Errorf("%v: AssignAdd(%q): the variable has dtype %v; want float32, float64, int, int32 or int64", b.towers[0], u.Var, v.Dtype())
		}
		p := &updatePlan{v: v, add: u.Add, parts: make([]any, len(b.towers)), local: numeric.NewSlice(v.Dtype(), v.Size())}
		p.self = []any{p.local}
		for _, t := range b.towers {
			p.nodes = append(p.nodes, scopes.Updates(t.Scope)[k].Value)
		}
		b.updates = append(b.updates, p)
	}
	return nil
}

func describeUpdates(us []towers.Update) []string {
	out := make([]string, len(us))
	for i, u := range us {
		kind := "Assign"
		if u.Add {
			kind = "AssignAdd"
		}
		out[i] = fmt.Sprintf("%s(%q)", kind, u.Var)
	}
	return out
}

func addable(dt tensor.Dtype) bool {
	switch dt {
	case tensor.Float32, tensor.Float64, tensor.Int, tensor.Int32, tensor.Int64:
		return true
	}
	return false
}

// combineUpdates combines each state update of the last train step over
// the towers: an AssignAdd adds every tower's delta (a counter incremented
// in each of two towers grows by two, as in TensorFlow); an Assign takes
// the batch-weighted mean of the towers' values, each weighted by its share
// of the batch's rows whatever the loss reduction, so that a moving average
// of a batch statistic on N towers is one device's on the whole batch.
// writeUpdates then writes them, once, after the optimizers.
//
// Across processes share is this process's share of every process's rows:
// the assigned values are weighted by it, to be summed over the processes.
func combineUpdates(b *build, share float64) error {
	var shares []float64 // each tower's share of the rows, once a step
	for _, p := range b.updates {
		if err := towerUpdates(b, p); err != nil {
			return err
		}
		var err error
		if p.add {
			numeric.Zero(p.local)
			err = addInto(p.local, p.parts)
		} else {
			if shares == nil {
				shares = lossWeights(BatchMean, b.rows)
				for i := range shares {
					shares[i] *= share
				}
			}
			err = numeric.WeightedSum(p.local, p.parts, shares)
		}
		if err != nil {
			return fmt.Errorf("state update of %q: %w", p.v.Name(), err)
		}
	}
	return nil
}

// towerUpdates reads the towers' values of state update p of the last run
// into p.parts.
func towerUpdates(b *build, p *updatePlan) error {
	for i, n := range p.nodes {
		v, err := b.towers[i].Value(n)
		if err != nil {
			return fmt.Errorf("state update of %q: %w", p.v.Name(), err)
		}
		if p.parts[i], err = numeric.Slice(v); err != nil {
			return fmt.Errorf("%v: state update of %q: %w", b.towers[i], p.v.Name(), err)
		}
		if n := numeric.Len(p.parts[i]); n != p.v.Size() {
			return fmt.Errorf("%v: state update of %q has %d elements, the variable %d", b.towers[i], p.v.Name(), n, p.v.Size())
		}
	}
	return nil
}

// writeUpdates applies the combined state updates to the masters: a delta
// is added, a value assigned.
func writeUpdates(b *build) error {
	for _, p := range b.updates {
		var err error
		if p.add {
			err = addInto(p.v.Data(), p.self)
		} else {
			err = numeric.CopyInto(p.v.Data(), p.local)
		}
		if err != nil {
			return fmt.Errorf("state update of %q: %w", p.v.Name(), err)
		}
	}
	return nil
}

// addInto adds every part, in tower order, to dst (all of one type).
func addInto(dst any, parts []any) error {
	switch d := dst.(type) {
	case []float32:
		return addParts(d, parts)
	case []float64:
		return addParts(d, parts)
	case []int:
		return addParts(d, parts)
	case []int32:
		return addParts(d, parts)
	case []int64:
		return addParts(d, parts)
	}
	return fmt.Errorf("cannot add to a %T", dst)
}

func addParts[T float32 | float64 | int | int32 | int64](dst []T, parts []any) error {
	for i, p := range parts {
		s, ok := p.([]T)
		if !ok || len(s) != len(dst) {
			return fmt.Errorf("tower %d's delta is a %T of %d elements, the variable a %T of %d", i, p, numeric.Len(p), dst, len(dst))
		}
	}
	for _, p := range parts {
		for j, x := range p.([]T) {
			dst[j] += x
		}
	}
	return nil
}
