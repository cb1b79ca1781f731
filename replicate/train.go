package replicate

import (
	"context"
	"errors"
	"fmt"
	"runtime/trace"

	G "gorgonia.org/gorgonia"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/parallel"
	"github.com/towerflow/towerflow/internal/scopes"
	"github.com/towerflow/towerflow/internal/tower"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// trainPlan is one train op across towers.
type trainPlan struct {
	opt   optimizers.Optimizer
	vars  []*towers.Variable
	grads [][]*G.Node // [variable][tower]
	parts [][]any     // scratch: [variable][tower]
	sums  []any       // per variable, reused every step
	// apply is what the optimizer applies, per variable: sums, or with one
	// tower of weight 1 that tower's gradients themselves (no copy).
	apply []any
	sizes []int // elements of each variable; 0 for one only lookups read
	// sparse is, per variable, its embedding lookups across the towers
	// (nil for a variable no lookup reads): see sparse.go.
	sparse []*sparsePlan

	clip model.Clip // the train op's clipping (clip.go)
	// borrowed is set when apply holds gradients given to ApplyGradients:
	// clipping must not change them in place.
	borrowed bool
}

// Gradient is one variable's gradient summed over towers, as the
// optimizer will see it.
type Gradient struct {
	Variable *towers.Variable
	// Value is a []float32 or []float64 of the variable's size, or, for a
	// variable only embedding lookups read, a towers.IndexedSlices (its
	// rows the batch touched, each id once); it may be changed in place.
	Value any
}

// GradientReducer sees the tower-summed gradients of one train op before
// its optimizer runs and may change them in place: the place to all-reduce
// gradients across processes.
type GradientReducer func(ctx context.Context, grads []Gradient) error

// minimizeTowers makes the gradient nodes of every train op on every
// tower, TensorFlow's _minimize_towers: per trainable variable (or the
// variables a train op names), one gradient per tower; a variable without
// a gradient is skipped.
func (e *Engine) minimizeTowers(b *build) error {
	ops, err := e.trainOps(b.specs[0])
	if err != nil {
		return err
	}
	opNames := make([][]string, len(ops))
	for k, op0 := range ops {
		opNames[k] = op0.Vars
		if opNames[k] == nil {
			for _, name := range b.towers[0].VariableNames() {
				if v, err := e.store.Lookup(name); err == nil && v.Trainable() {
					opNames[k] = append(opNames[k], name)
				}
			}
		}
	}
	grads, lookupGrads, err := differentiateTowers(b, len(ops), opNames)
	if err != nil {
		return err
	}
	for k, op0 := range ops {
		names, per, lookups := opNames[k], grads[k], lookupGrads[k]
		if err := op0.Clip.Validate(); err != nil {
			return fmt.Errorf("train op %d: %w", k, err)
		}
		p := &trainPlan{opt: op0.Optimizer, clip: op0.Clip}
		for _, name := range names {
			g0, dense := per[0][name]
			sp, err := e.planSparse(b, k, name, lookups)
			if err != nil {
				return err
			}
			if !dense && sp == nil {
				continue // no gradient: skipped, as TensorFlow does
			}
			v, err := e.store.Lookup(name)
			if err != nil {
				return err
			}
			if !numeric.IsFloat(v.Dtype()) {
				return fmt.Errorf("train op %d: variable %q has dtype %v; only float32 and float64 variables can be trained", k, name, v.Dtype())
			}
			var gs []*G.Node
			if dense {
				gs = []*G.Node{g0}
			}
			for i := 1; i < len(b.towers) && dense; i++ {
				g, ok := per[i][name]
				if !ok {
					return fmt.Errorf("train op %d: %v has no gradient for %q, tower 0 has one: every tower must build the same model", k, b.towers[i], name)
				}
				gs = append(gs, g)
			}
			p.vars = append(p.vars, v)
			p.grads = append(p.grads, gs)
			p.apply = append(p.apply, nil)
			p.parts = append(p.parts, make([]any, len(b.towers)))
			p.sparse = append(p.sparse, sp)
			if !dense { // only lookups read it: no buffer of its size
				p.sums = append(p.sums, nil)
				p.sizes = append(p.sizes, 0)
				continue
			}
			p.sums = append(p.sums, numeric.NewSlice(v.Dtype(), v.Size()))
			p.sizes = append(p.sizes, v.Size())
		}
		b.plans = append(b.plans, p)
	}
	return nil
}

// differentiateTowers returns, for train op k of n and tower i, the
// gradients of the op's loss with respect to its variables names[k]
// (grads[k][i]) and to the outputs of their lookups (lookups[k][i]). Each
// tower's loss is differentiated once for all the train ops that minimise
// it, with respect to the union of their variables (a wide-and-deep
// model's two optimizers, TensorFlow's DNNLinearCombined, share one
// backward graph); train ops of different losses each differentiate
// their own, afresh even where the losses share nodes
// (tower.LookupGradients).
func differentiateTowers(b *build, n int, names [][]string) (grads [][]map[string]*G.Node, lookups [][][]tower.LookupGradient, err error) {
	grads = make([][]map[string]*G.Node, n)
	lookups = make([][][]tower.LookupGradient, n)
	for k := range n {
		grads[k] = make([]map[string]*G.Node, len(b.towers))
		lookups[k] = make([][]tower.LookupGradient, len(b.towers))
	}
	for i, t := range b.towers {
		losses := make([]*G.Node, n)
		for k := range n {
			losses[k] = b.specs[i].Loss
			if len(b.specs[i].TrainOps) > 0 && b.specs[i].TrainOps[k].Loss != nil {
				losses[k] = b.specs[i].TrainOps[k].Loss
			}
		}
		done := make([]bool, n)
		for k := range n {
			if done[k] {
				continue
			}
			// The train ops of this loss, and the union of their variables.
			var same []int
			var union []string
			inUnion := map[string]bool{}
			for j := k; j < n; j++ {
				if losses[j] == losses[k] {
					same, done[j] = append(same, j), true
					for _, name := range names[j] {
						if !inUnion[name] {
							inUnion[name] = true
							union = append(union, name)
						}
					}
				}
			}
			dense, lgs, err := t.LookupGradients(losses[k], union)
			if err != nil {
				return nil, nil, fmt.Errorf("train op %d: %w", k, err)
			}
			for _, j := range same {
				grads[j][i] = map[string]*G.Node{}
				for _, name := range names[j] {
					if g, ok := dense[name]; ok {
						grads[j][i][name] = g
					}
				}
				for _, l := range lgs {
					if containsName(names[j], l.Variable) {
						lookups[j][i] = append(lookups[j][i], l)
					}
				}
			}
		}
	}
	return grads, lookups, nil
}

func containsName(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// trainOps resolves a spec's train ops, filling in the default optimizer.
func (e *Engine) trainOps(spec *model.Spec) ([]model.TrainOp, error) {
	if len(spec.TrainOps) > 0 {
		return spec.TrainOps, nil
	}
	if e.defaultOpt == nil {
		opt, err := e.cfg.optimizer(e.params)
		if err != nil {
			return nil, err
		}
		e.defaultOpt = opt
	}
	return []model.TrainOp{{Loss: spec.Loss, Optimizer: e.defaultOpt, Clip: e.cfg.Clip}}, nil
}

// StepHooks are what the run loop that owns the engine (the estimator's:
// its NaN guard, its hooks' step count) does inside a training step; the
// zero value does nothing.
type StepHooks struct {
	// CheckLoss sees the reduced loss before any update; an error aborts
	// the step, leaving every variable as it was.
	CheckLoss func(loss float64) error
	// Started is called when the last tower starts: the input may read
	// ahead then (a producer woken earlier is queued ahead of a tower not
	// yet running, and delays it by the whole read).
	Started func()
}

// TrainStep runs one training step, TensorFlow's _train_spec: the towers
// compute their losses and gradients at the same time, the gradients are
// summed per variable with the loss weights, reduced further if configured,
// and every train op's optimizer is applied once on the masters; the global
// step grows by one. It returns the reduced loss. It is computeStep then
// applyStep, the two halves ComputeGradients and ApplyGradients run.
//
// Across processes (Config.Processes) the step's header follows the
// towers, the loss checked is this process's own, the loss returned the
// one over every process, and the gradients and state updates of every
// process are summed in one fused all-reduce, and the embedding tables'
// sparse gradients after it (Config.SparseAsDense), before the optimizers
// run; the header compares the processes' builds of the step, and a difference
// is a ModelMismatchError on every process, before any update.
// With Averaging the step is a local one, and every Every steps the
// processes average their variables.
func (e *Engine) TrainStep(ctx context.Context, batch sharding.Batch, hooks StepHooks) (float64, error) {
	b, loss, err := e.computeStep(ctx, batch, hooks)
	if err != nil {
		return loss, err
	}
	if err := e.applyStep(ctx, b); err != nil {
		return 0, err
	}
	return loss, nil
}

// computeStep is a training step's first half: it prepares the Train build
// for batch, runs its towers, checks the loss, sums the towers' gradients
// into the train plans (p.apply) with the loss weights, combines the state
// updates and, across processes, all-reduces both; then it hands the sums
// to Config.ReduceGradients. Nothing is written to a variable: the state
// updates stay pending in the build (e.pending) until applyStep. A
// CheckLoss error is returned with the loss.
func (e *Engine) computeStep(ctx context.Context, batch sharding.Batch, hooks StepHooks) (*build, float64, error) {
	e.pending = nil
	region := trace.StartRegion(ctx, "prepare")
	b, err := e.prepare(model.Train, batch)
	region.End()
	if err != nil {
		return nil, 0, fmt.Errorf("train step %d: %w", e.Step(), err)
	}
	for _, g := range scopes.Groups(b.towers[0].Scope) {
		g.SetWeights(b.weights)
	}
	if err := runTowers(ctx, b, hooks.Started); err != nil {
		return nil, 0, fmt.Errorf("train step %d: %w", e.Step(), err)
	}
	loss, err := b.loss()
	if err != nil {
		return nil, 0, err
	}
	e.last = b
	if hooks.CheckLoss != nil {
		if err := hooks.CheckLoss(loss); err != nil {
			return nil, loss, err
		}
	}
	scale, rowShare := 1.0, 1.0
	sync := e.x != nil && e.x.avg.Every <= 0
	xctx := ctx // the context of the step's collectives
	if sync {
		var cancel context.CancelFunc
		xctx, cancel = e.x.bound(ctx)
		defer cancel()
		if loss, scale, rowShare, err = e.stepHeader(xctx, b, loss); err != nil {
			return nil, 0, fmt.Errorf("train step %d: %w", e.Step(), err)
		}
	}
	region = trace.StartRegion(ctx, "sum gradients")
	err = sumTowerGradients(b, scale, !sync)
	region.End()
	if err != nil {
		return nil, 0, err
	}
	if err := combineUpdates(b, rowShare); err != nil {
		return nil, 0, err
	}
	if err := e.reduceSums(ctx, xctx, b, sync); err != nil {
		return nil, 0, err
	}
	e.pending = b
	return b, loss, nil
}

// reduceSums ends a step's first half once the towers' gradients are
// summed into the train plans: across processes (sync) it all-reduces the
// dense sums and state updates of b's arena and sums the tables' sparse
// gradients, on xctx; then it hands every plan's sums to
// Config.ReduceGradients.
func (e *Engine) reduceSums(ctx, xctx context.Context, b *build, sync bool) error {
	if sync {
		region := trace.StartRegion(ctx, "all-reduce")
		err := e.x.reduce(xctx, &b.arena)
		if err == nil {
			err = e.reduceSparseAcross(xctx, b)
		}
		region.End()
		if err != nil {
			return fmt.Errorf("train step %d: all-reduce across processes: %w", e.Step(), err)
		}
	}
	for _, p := range b.plans {
		if err := e.reduceGradients(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// ErrIncompleteUpdate is wrapped by the error of a training step that
// failed while it wrote the variables (TrainStep, ApplyGradients): they may
// hold part of the step, and are no state to save. Every other error of a
// step leaves them as the last completed step left them.
var ErrIncompleteUpdate = errors.New("the step's update did not complete: the variables may hold part of it")

// applyStep is a training step's second half: every train op of b applies
// its plan's gradients (p.apply) once on the masters, the state updates
// pending from computeStep (if any: gradients applied from elsewhere bring
// none) are written after them, as TensorFlow's UPDATE_OPS run after the
// train op, and the global step grows by one; with Averaging, every Every
// steps the processes then average their variables. It first clips the
// gradients of the train ops that clip (clip.go): an error there changes
// nothing; its other errors wrap ErrIncompleteUpdate.
func (e *Engine) applyStep(ctx context.Context, b *build) (err error) {
	if err := e.clipTrainOps(b); err != nil {
		return err
	}
	region := trace.StartRegion(ctx, "apply")
	defer region.End()
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w (%w)", err, ErrIncompleteUpdate)
		}
	}()
	if err := e.applyTrainOps(b); err != nil {
		return err
	}
	if p := e.pending; p != nil {
		e.pending = nil
		if err := writeUpdates(p); err != nil {
			return err
		}
	}
	e.globalStep.Data().([]int64)[0]++
	if e.x != nil && e.x.avg.Every > 0 && e.Step()%e.x.avg.Every == 0 {
		xctx, cancel := e.x.bound(ctx)
		defer cancel()
		if err := e.average(xctx); err != nil {
			return fmt.Errorf("train step %d: %w", e.Step(), err)
		}
	}
	return nil
}

// stepHeader runs a training step's header: this process's rows, towers
// and loss go in; the loss over every process, this process's scale on its
// gradients, and its share of every process's rows (the weight of its
// assigned state values, whatever the loss reduction) come out.
func (e *Engine) stepHeader(ctx context.Context, b *build, loss float64) (global, scale, rowShare float64, err error) {
	return e.updateHeader(ctx, b, sumRows(b.rows), len(b.towers), loss)
}

// updateHeader is stepHeader for an update of rows rows on towers towers
// in all (several micro-batches: TrainMicroBatches), b the last one's.
func (e *Engine) updateHeader(ctx context.Context, b *build, rows, towers int, loss float64) (global, scale, rowShare float64, err error) {
	local := header{rows: float64(rows), towers: float64(towers), loss: loss}
	local.lossRows, local.lossTowers = loss*local.rows, loss*local.towers
	g, _, err := e.x.exchange(ctx, statusOK, local, 0, model.Train, b.desc)
	if err != nil {
		return 0, 0, 0, err
	}
	return globalLoss(e.cfg.Reduction, g), processScale(e.cfg.Reduction, local, g), processScale(BatchMean, local, g), nil
}

// sumRows is the rows of a batch's shards together.
func sumRows(rows []int) int {
	n := 0
	for _, r := range rows {
		n += r
	}
	return n
}

// runTowers runs a build's towers at the same time; started, when not nil,
// is called as the last tower starts.
func runTowers(ctx context.Context, b *build, started func()) error {
	run := (*tower.Tower).Run
	if started != nil {
		last := len(b.towers) - 1
		run = func(t *tower.Tower) error {
			if t.Index() == last {
				started()
			}
			return t.Run()
		}
	}
	return tower.RunAll(ctx, b.towers, run)
}

// sumTowerGradients sums each variable's gradients over the towers with the
// loss weights, TensorFlow's _compute_sum_on_device, into the train plans'
// buffers. Every gradient is read before any optimizer writes: train ops
// see the same step's values. Gradients are summed in chunks spread over
// the cores, each element in tower order, so the result does not depend on
// scheduling. The sums are the build's arena (see arena.go), multiplied by
// scale, the process's share across processes. With direct, one tower of
// weight 1 has its gradients applied as they are: the values its ops
// computed (never a variable's or an input's memory: the tower copies a
// watched value that shares it).
func sumTowerGradients(b *build, scale float64, direct bool) error {
	direct = direct && len(b.towers) == 1 && b.weights[0] == 1
	weights := b.weights
	if scale != 1 {
		b.scaled = append(b.scaled[:0], b.weights...)
		for i := range b.scaled {
			b.scaled[i] *= scale
		}
		weights = b.scaled
	}
	for _, p := range b.plans {
		for j := range p.vars {
			if p.grads[j] == nil {
				continue // only lookups read it: sumSparse's
			}
			if err := towerGradients(b, p, j); err != nil {
				return err
			}
			p.apply[j] = p.sums[j]
			if direct {
				p.apply[j] = p.parts[j][0]
			}
		}
		if !direct {
			err := parallel.ForChunks(p.sizes, func(j, lo, hi int) error {
				if err := sumGradients(p.sums[j], p.parts[j], weights, lo, hi); err != nil {
					return fmt.Errorf("gradient of %q: %w", p.vars[j].Name(), err)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		if err := sumSparse(b, p, weights); err != nil {
			return err
		}
	}
	return nil
}

// towerGradients reads the towers' gradients of p's variable j of the
// last run into p.parts[j].
func towerGradients(b *build, p *trainPlan, j int) error {
	v, parts := p.vars[j], p.parts[j]
	for i, g := range p.grads[j] {
		gv, err := b.towers[i].Value(g)
		if err != nil {
			return err
		}
		if parts[i], err = numeric.Slice(gv); err != nil {
			return fmt.Errorf("%v: gradient of %q: %w", b.towers[i], v.Name(), err)
		}
		if n := numeric.Len(parts[i]); n != v.Size() {
			return fmt.Errorf("%v: gradient of %q has %d elements, the variable %d", b.towers[i], v.Name(), n, v.Size())
		}
	}
	return nil
}

// applyTrainOps runs each train op's optimizer once on the masters with
// its plan's gradients (p.apply).
func (e *Engine) applyTrainOps(b *build) error {
	for _, p := range b.plans {
		if err := p.opt.Apply(e.store, p.vars, p.apply); err != nil {
			return fmt.Errorf("apply %s: %w", p.opt.Name(), err)
		}
	}
	return nil
}

// reduceGradients hands a train op's tower-summed gradients to
// Config.ReduceGradients, when set: the seam for a cross-process
// all-reduce.
func (e *Engine) reduceGradients(ctx context.Context, p *trainPlan) error {
	if e.cfg.ReduceGradients == nil {
		return nil
	}
	gs := make([]Gradient, len(p.vars))
	for j, v := range p.vars {
		gs[j] = Gradient{Variable: v, Value: p.apply[j]}
	}
	if err := e.cfg.ReduceGradients(ctx, gs); err != nil {
		return fmt.Errorf("reduce gradients: %w", err)
	}
	return nil
}
