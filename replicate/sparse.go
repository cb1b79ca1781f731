package replicate

import (
	"context"
	"fmt"

	"github.com/towerflow/towerflow/internal/parallel"
	"github.com/towerflow/towerflow/internal/tower"
	"github.com/towerflow/towerflow/towers"
)

// The sparse half of _compute_sum_on_device. A variable that embedding
// lookups read (towers.Lookup: layers.EmbeddingLookup and
// EmbeddingLookupSparse) is left out of symbolic differentiation, which
// would make a dense gradient of its size; each tower's gradient of it is
// instead the gradient of each lookup's output (as large as the output)
// mapped back to one row per distinct id the lookup read, in ascending
// order of id, a towers.IndexedSlices. The towers' slices are summed,
// each tower's rows times its loss weight as the dense sum weights its
// gradient, the repeated ids summed (towers.SumSlices: ConcatSlices then
// Deduplicate, a merge of the towers' ascending ids): the optimizer gets
// that towers.IndexedSlices as the variable's gradient. No buffer of the
// table's size is made on this path. A variable the loss also reaches
// other than through lookups (a table also read densely) has its dense
// gradient summed as any other, and the rows are then added into that sum:
// the optimizer gets the dense sum.
//
// Across processes (Config.Processes, without Averaging) each process's
// sums, weighted by its share of the loss as its dense gradients are, are
// summed over the processes (across.reduceSparse: the ids and rows
// all-gathered, or densified and all-reduced, as Config.SparseAsDense
// says) after the dense all-reduce, once per update, and deduplicated
// again before clipping and the update: every process applies the same
// gradient. A table also read densely has a dense gradient, all-reduced
// with the others.

// sparsePlan is one variable's lookups across the towers of a build.
type sparsePlan struct {
	lookups [][]tower.LookupGradient // [tower][lookup of the variable]
	// scratch, reused every step: every tower's slices and their weights
	parts   []towers.IndexedSlices
	weights []float64
}

// planSparse returns the lookups of variable name whose outputs train op
// k's loss depends on, per tower (lookups[i] are tower i's of every
// variable), or nil when there are none. Every tower must have as many as
// tower 0.
func (e *Engine) planSparse(b *build, k int, name string, lookups [][]tower.LookupGradient) (*sparsePlan, error) {
	var sp *sparsePlan
	for i := range b.towers {
		var mine []tower.LookupGradient
		for _, l := range lookups[i] {
			if l.Variable == name {
				mine = append(mine, l)
			}
		}
		if i == 0 {
			if len(mine) == 0 {
				return nil, nil
			}
			sp = &sparsePlan{}
		}
		if i > 0 && len(mine) != len(sp.lookups[0]) {
			return nil, fmt.Errorf("train op %d: %v has %d lookups of %q, tower 0 has %d: every tower must build the same model", k, b.towers[i], len(mine), name, len(sp.lookups[0]))
		}
		sp.lookups = append(sp.lookups, mine)
	}
	return sp, nil
}

// reduceSparseAcross sums the sparse gradients of b's train plans (those
// of the tables only lookups read, p.apply) over the processes and
// deduplicates each sum in its place. Every process has the same tables
// in the same order: the step's header compared their builds (describe).
// ctx is the phase's (bound).
func (e *Engine) reduceSparseAcross(ctx context.Context, b *build) error {
	var names []string
	var grads []towers.IndexedSlices
	var at [][2]int // [plan, variable] of each gradient
	for k, p := range b.plans {
		for j, sp := range p.sparse {
			if sp == nil || p.grads[j] != nil {
				continue
			}
			g, ok := p.apply[j].(towers.IndexedSlices)
			if !ok {
				return fmt.Errorf("gradient of %q: a %T, want towers.IndexedSlices", p.vars[j].Name(), p.apply[j])
			}
			names, grads, at = append(names, p.vars[j].Name()), append(grads, g), append(at, [2]int{k, j})
		}
	}
	if len(grads) == 0 {
		return nil
	}
	sums, err := e.x.reduceSparse(ctx, e.cfg.SparseAsDense, names, grads)
	if err != nil {
		return err
	}
	for i, s := range sums {
		b.plans[at[i][0]].apply[at[i][1]] = s.Deduplicate()
	}
	return nil
}

// sumSparse sums the sparse gradients of p's variables over the towers of
// b with weights (per tower): the towers' slices concatenated with their
// weights and deduplicated. For a variable only lookups read that is its
// gradient (p.apply); for one also read densely the rows are added into
// its dense sum.
//
// The variables' sums are independent: with several variables and
// processors they run at once, the variables dealt out in turn over up
// to parallel.Cores goroutines (a Gang), each sum computed as alone.
func sumSparse(b *build, p *trainPlan, weights []float64) error {
	var tables []int
	for j, sp := range p.sparse {
		if sp != nil {
			tables = append(tables, j)
		}
	}
	n := min(parallel.Cores(), len(tables))
	if n <= 1 {
		for _, j := range tables {
			if err := sumSparseVar(b, p, weights, j); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, len(tables))
	parallel.Gang(n, func(g int) {
		for k := g; k < len(tables); k += n {
			errs[k] = sumSparseVar(b, p, weights, tables[k])
		}
	})
	for _, err := range errs {
		if err != nil {
			return err // the first variable's, as one after another
		}
	}
	return nil
}

// sumSparseVar is sumSparse of variable j.
func sumSparseVar(b *build, p *trainPlan, weights []float64, j int) error {
	sp := p.sparse[j]
	v := p.vars[j]
	sp.parts, sp.weights = sp.parts[:0], sp.weights[:0]
	for i, ls := range sp.lookups {
		for _, l := range ls {
			gv, err := b.towers[i].Value(l.Grad)
			if err != nil {
				return err
			}
			s, err := l.Slices(gv)
			if err != nil {
				return fmt.Errorf("%v: gradient of %q: %w", b.towers[i], v.Name(), err)
			}
			sp.parts = append(sp.parts, s)
			sp.weights = append(sp.weights, weights[i])
		}
	}
	sum, err := towers.SumSlices(sp.parts, sp.weights)
	if err != nil {
		return fmt.Errorf("gradient of %q: %w", v.Name(), err)
	}
	if err := sum.CheckFor(v); err != nil {
		return fmt.Errorf("gradient of %q: %w", v.Name(), err)
	}
	if p.grads[j] == nil {
		p.apply[j] = sum
		return nil
	}
	if err := sum.AddTo(p.apply[j]); err != nil {
		return fmt.Errorf("gradient of %q: %w", v.Name(), err)
	}
	return nil
}

// accumulateSparse is sumSparse over micro-batches: b's sparse gradients
// (its towers' rows times b.weights) join the sums the micro-batches
// before left, carried (their plan's apply; nil for the first): for a
// variable only lookups read, the carried rows and b's are concatenated
// and deduplicated; for one also read densely, b's rows are added into the
// dense sum, which carries the earlier ones.
func accumulateSparse(b *build, p *trainPlan, carried []any) error {
	if err := sumSparse(b, p, b.weights); err != nil {
		return err
	}
	for j, sp := range p.sparse {
		if sp == nil || p.grads[j] != nil || carried == nil {
			continue
		}
		was, ok := carried[j].(towers.IndexedSlices)
		if !ok {
			return fmt.Errorf("gradient of %q: the micro-batches before left a %T", p.vars[j].Name(), carried[j])
		}
		sum, err := towers.SumSlices([]towers.IndexedSlices{was, p.apply[j].(towers.IndexedSlices)}, []float64{1, 1})
		if err != nil {
			return fmt.Errorf("gradient of %q: %w", p.vars[j].Name(), err)
		}
		p.apply[j] = sum
	}
	return nil
}
