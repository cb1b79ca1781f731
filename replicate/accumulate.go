package replicate

import (
	"context"
	"fmt"
	"runtime/trace"
	"slices"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/parallel"
	"github.com/towerflow/towerflow/internal/scopes"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// Gradient accumulation: one update from K micro-batches run one after
// another, as K times the towers would run them at once. Micro-batch k's
// tower i is weighted as tower i of k in one step on every micro-batch's
// towers together (lossWeightsOf: under BatchMean its rows over the rows
// of all K), its gradients added to the sums the micro-batches before it
// left, in the train plans' own buffers (no buffer of a variable's size
// more than a step has); so the update is one step on the K batches
// together, and with SGD on one device bit for bit that step where its
// sums are exact. Batch norm normalizes each micro-batch by its own
// statistics, as PyTorch does (each micro-batch runs the model function
// as a step does); the moving statistics are updated once per update,
// with the row-weighted mean of the micro-batches' values, as for towers.
// Across processes the header and the all-reduce run once per update,
// after the last micro-batch; clipping runs once per update, on the sum.

// TrainMicroBatches runs one training update on batches, micro-batches run
// one after another: each micro-batch's towers compute its loss and
// gradients, which are summed, weighted as one step on the batches
// together weights them (BatchMean: each row by the rows of all of them),
// into one sum; then, as TrainStep does, the loss is checked once (the
// reduced loss over every micro-batch), the sums are reduced across
// processes and Config.ReduceGradients once, every train op is applied
// once (clipped on the sum) and the global step grows by one. It returns
// the reduced loss. One batch is TrainStep. The state updates of the
// micro-batches are combined as those of towers are; fetches afterwards
// see the last micro-batch's towers.
func (e *Engine) TrainMicroBatches(ctx context.Context, batches []sharding.Batch, hooks StepHooks) (float64, error) {
	switch len(batches) {
	case 0:
		return 0, fmt.Errorf("train step %d: no micro-batches", e.Step())
	case 1:
		return e.TrainStep(ctx, batches[0], hooks)
	}
	b, loss, err := e.computeMicroBatches(ctx, batches, hooks)
	if err != nil {
		return loss, err
	}
	if err := e.applyStep(ctx, b); err != nil {
		return 0, err
	}
	return loss, nil
}

// computeMicroBatches is computeStep over several micro-batches: it
// returns the last micro-batch's build, whose plans (p.apply) hold the
// sums over every micro-batch and whose state updates are pending.
func (e *Engine) computeMicroBatches(ctx context.Context, batches []sharding.Batch, hooks StepHooks) (*build, float64, error) {
	e.pending = nil
	total, towers := 0, 0
	for k, batch := range batches {
		rows, err := batch.Rows()
		if err == nil && rows == 0 {
			err = fmt.Errorf("empty batch")
		}
		if err != nil {
			return nil, 0, fmt.Errorf("train step %d: micro-batch %d: %w", e.Step(), k, err)
		}
		total += rows
		towers += e.towersFor(rows)
	}
	var prev *build
	loss := 0.0
	for k, batch := range batches {
		region := trace.StartRegion(ctx, "prepare")
		b, err := e.prepare(model.Train, batch)
		region.End()
		if err != nil {
			return nil, 0, fmt.Errorf("train step %d: micro-batch %d: %w", e.Step(), k, err)
		}
		if prev != nil {
			if err := sameTrainPlans(prev, b); err != nil {
				return nil, 0, fmt.Errorf("train step %d: micro-batch %d: %w", e.Step(), k, err)
			}
		}
		for _, g := range scopes.Groups(b.towers[0].Scope) {
			g.SetWeights(b.weights)
		}
		if err := runTowers(ctx, b, hooks.Started); err != nil {
			return nil, 0, fmt.Errorf("train step %d: micro-batch %d: %w", e.Step(), k, err)
		}
		e.last = b
		// From here on the micro-batch's towers weigh as towers of the
		// whole update.
		b.weights = lossWeightsOf(e.cfg.Reduction, b.rows, total, towers)
		l, err := b.loss()
		if err != nil {
			return nil, 0, err
		}
		loss += l
		region = trace.StartRegion(ctx, "sum gradients")
		err = accumulateGradients(b, prev)
		region.End()
		if err != nil {
			return nil, 0, fmt.Errorf("train step %d: micro-batch %d: %w", e.Step(), k, err)
		}
		if err := accumulateUpdates(b, prev, lossWeightsOf(BatchMean, b.rows, total, towers)); err != nil {
			return nil, 0, fmt.Errorf("train step %d: micro-batch %d: %w", e.Step(), k, err)
		}
		prev = b
	}
	b := prev
	if hooks.CheckLoss != nil {
		if err := hooks.CheckLoss(loss); err != nil {
			return nil, loss, err
		}
	}
	sync := e.x != nil && e.x.avg.Every <= 0
	xctx := ctx // the context of the update's collectives
	if sync {
		var cancel context.CancelFunc
		xctx, cancel = e.x.bound(ctx)
		defer cancel()
		var scale, rowShare float64
		var err error
		if loss, scale, rowShare, err = e.updateHeader(xctx, b, total, towers, loss); err != nil {
			return nil, 0, fmt.Errorf("train step %d: %w", e.Step(), err)
		}
		scaleForProcesses(b, scale, rowShare)
	}
	if err := e.reduceSums(ctx, xctx, b, sync); err != nil {
		return nil, 0, err
	}
	e.pending = b
	return b, loss, nil
}

// sameTrainPlans is an error unless b trains the variables prev does, in
// its order, with the same state updates: micro-batches of one update
// must build one model.
func sameTrainPlans(prev, b *build) error {
	differ := func() error {
		return fmt.Errorf("the model function built different train ops or state updates than for the micro-batch before (%s; before: %s): the micro-batches of one update must build one model", DescribeVariables(planVariables(b)), DescribeVariables(planVariables(prev)))
	}
	if len(prev.plans) != len(b.plans) || len(prev.updates) != len(b.updates) {
		return differ()
	}
	for k, p := range b.plans {
		q := prev.plans[k]
		if len(q.vars) != len(p.vars) {
			return differ()
		}
		for j, v := range p.vars {
			if q.vars[j] != v {
				return differ()
			}
		}
	}
	for k, u := range b.updates {
		if q := prev.updates[k]; q.v != u.v || q.add != u.add {
			return differ()
		}
	}
	return nil
}

// accumulateGradients sets b's sums to the sums prev left (none when prev
// is nil; prev may be b) plus b's tower gradients weighted by b.weights,
// added in tower order after them, and points the plans at the sums.
func accumulateGradients(b, prev *build) error {
	for k, p := range b.plans {
		parts := make([][]any, len(p.vars))
		weights := b.weights
		if prev != nil {
			weights = append([]float64{1}, b.weights...)
		}
		var carried []any // the sparse sums prev left (see accumulateSparse)
		if prev != nil {
			carried = slices.Clone(prev.plans[k].apply)
		}
		for j := range p.vars {
			if p.grads[j] == nil {
				continue // only lookups read it: accumulateSparse's
			}
			if err := towerGradients(b, p, j); err != nil {
				return err
			}
			parts[j] = p.parts[j]
			if prev != nil {
				parts[j] = append([]any{prev.plans[k].sums[j]}, p.parts[j]...)
			}
			p.apply[j] = p.sums[j]
		}
		err := parallel.ForChunks(p.sizes, func(j, lo, hi int) error {
			if err := sumGradients(p.sums[j], parts[j], weights, lo, hi); err != nil {
				return fmt.Errorf("gradient of %q: %w", p.vars[j].Name(), err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := accumulateSparse(b, p, carried); err != nil {
			return err
		}
	}
	return nil
}

// accumulateUpdates is combineUpdates carried over micro-batches: b's
// combined state updates become what prev left (none when prev is nil;
// prev may be b) plus b's towers' deltas, or their values weighted by
// shares (each tower's share of the update's rows).
func accumulateUpdates(b, prev *build, shares []float64) error {
	for k, p := range b.updates {
		if err := towerUpdates(b, p); err != nil {
			return err
		}
		var carried any
		if prev != nil {
			carried = prev.updates[k].local
		}
		var err error
		switch {
		case p.add && prev == b:
			err = addInto(p.local, p.parts)
		case p.add && prev != nil:
			if err = numeric.CopyInto(p.local, carried); err == nil {
				err = addInto(p.local, p.parts)
			}
		case p.add:
			numeric.Zero(p.local)
			err = addInto(p.local, p.parts)
		case prev != nil:
			err = numeric.WeightedSum(p.local, append([]any{carried}, p.parts...), append([]float64{1}, shares...))
		default:
			err = numeric.WeightedSum(p.local, p.parts, shares)
		}
		if err != nil {
			return fmt.Errorf("state update of %q: %w", p.v.Name(), err)
		}
	}
	return nil
}

// scaleForProcesses multiplies b's sums (dense, and the sparse ones of the
// tables only lookups read) by scale, and its assigned state values by
// rowShare, the process's shares across processes (which a single step
// applies as its towers are summed).
func scaleForProcesses(b *build, scale, rowShare float64) {
	if scale != 1 {
		for _, p := range b.plans {
			for j, s := range p.sums {
				if g, ok := p.apply[j].(towers.IndexedSlices); ok && s == nil {
					s = g.Values
				}
				clipValues(s, scale, 0)
			}
		}
	}
	if rowShare != 1 {
		for _, u := range b.updates {
			if !u.add {
				clipValues(u.local, rowShare, 0)
			}
		}
	}
}

// AccumulateSteps is Config.AccumulateSteps, at least 1: how many
// micro-batches the estimator's Train reads for each update.
func (e *Engine) AccumulateSteps() int { return max(e.cfg.AccumulateSteps, 1) }
