package replicate

import (
	"context"
	"fmt"
	"strings"

	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// Gradients as values: a training step cut in two, the Ray/TensorFlow
// worker API (compute_gradients, apply_gradients). ComputeGradients is
// the step up to the optimizers, ApplyGradients the rest, and TrainStep
// runs the same two halves (computeStep, applyStep): computing then
// applying the gradients of a batch equals one TrainStep on it bit for
// bit.
//
// Gradients are per variable: a model whose train ops minimize the same
// variable twice has no single gradient for it, and both methods return
// an error naming it (TrainStep still trains such a model).
//
// State updates (batch norm's moving statistics): ComputeGradients
// combines them over the towers as TrainStep does and keeps them pending
// in the engine, unwritten; the next ApplyGradients writes them after the
// optimizers, as TrainStep does. Computing again (or a TrainStep) first
// drops the pending ones, so what is written is the latest computed
// batch's. Gradients computed elsewhere and applied here bring no state
// updates with them.
//
// Across processes (Config.Processes) both are an error: the step's
// header and all-reduce would need every process to call them in step,
// which Train arranges; workers that exchange gradients by hand (the
// weightavg example) run engines of their own and all-reduce over their
// own collective.Comm.

// ComputeGradients runs the towers of a training step on batch and sums
// their gradients with the loss weights, as TrainStep does, without
// applying them: no variable, optimizer slot or global step changes. It
// returns the reduced loss and one Gradient per variable a train op
// minimizes (those with a gradient), in train op order, each op's in its
// own order. Values are the engine's buffers, valid until its next step;
// a caller that keeps them copies them. hooks are TrainStep's; a
// CheckLoss error is returned with the loss and no gradients. They are not
// clipped: ApplyGradients clips what it is given (model.Clip), on a copy.
func (e *Engine) ComputeGradients(ctx context.Context, batch sharding.Batch, hooks StepHooks) (float64, []Gradient, error) {
	if err := e.alone("compute gradients"); err != nil {
		return 0, nil, err
	}
	b, loss, err := e.computeStep(ctx, batch, hooks)
	if err != nil {
		return loss, nil, fmt.Errorf("compute gradients: %w", err)
	}
	if err := distinctVariables(b); err != nil {
		e.pending = nil
		return 0, nil, fmt.Errorf("compute gradients: %w", err)
	}
	var grads []Gradient
	for _, p := range b.plans {
		for j, v := range p.vars {
			grads = append(grads, Gradient{Variable: v, Value: p.apply[j]})
		}
	}
	return loss, grads, nil
}

// ApplyGradients applies grads once with the model's train ops, then the
// state updates pending from ComputeGradients, if any, and increments the
// global step: TrainStep's second half. grads must hold exactly one
// gradient for every variable ComputeGradients returns one for, in any
// order, each a []float32 or []float64 of its variable's dtype and size or
// a valid towers.IndexedSlices of the variable (its optimizer must apply
// those); otherwise the error lists what was expected and nothing changes. The
// train ops are those of the latest training build, so the engine must
// have computed gradients (or trained, or built Train towers) before.
func (e *Engine) ApplyGradients(ctx context.Context, grads []Gradient) error {
	if err := e.alone("apply gradients"); err != nil {
		return err
	}
	if err := e.mismatched(); err != nil {
		return fmt.Errorf("apply gradients: %w", err)
	}
	b := e.trainBuild()
	if b == nil {
		return fmt.Errorf("apply gradients: no training towers yet: the train ops and their variables are the model function's, known once it has built them (compute gradients, train or build a Train step first)")
	}
	if err := distinctVariables(b); err != nil {
		return fmt.Errorf("apply gradients: %w", err)
	}
	if err := setGradients(b, grads); err != nil {
		return fmt.Errorf("apply gradients at step %d: %w", e.Step(), err)
	}
	if err := e.applyStep(ctx, b); err != nil {
		return fmt.Errorf("apply gradients: %w", err)
	}
	return nil
}

// alone is an error across processes (see above).
func (e *Engine) alone(what string) error {
	if e.x != nil {
		return fmt.Errorf("%s: not supported across processes (Config.Processes): Train all-reduces gradients itself; workers that exchange gradients run an engine each and all-reduce over their own collective.Comm", what)
	}
	return nil
}

// trainBuild is the latest training build: the last computed step's, else
// the most recently used Train build; nil when there is none.
func (e *Engine) trainBuild() *build {
	if e.last != nil {
		return e.last
	}
	var out *build
	for _, b := range e.builds {
		if b.mode == model.Train && (out == nil || b.used > out.used) {
			out = b
		}
	}
	return out
}

// distinctVariables is an error when two train ops minimize one variable:
// it would have two gradients.
func distinctVariables(b *build) error {
	seen := map[string]int{}
	for k, p := range b.plans {
		for _, v := range p.vars {
			if first, ok := seen[v.Name()]; ok {
				return fmt.Errorf("variable %q is minimized by train ops %d and %d: gradients by variable would be ambiguous (train such a model with Train)", v.Name(), first, k)
			}
			seen[v.Name()] = k
		}
	}
	return nil
}

// GradientVariables returns the variables ComputeGradients returns
// gradients of, in its order: what ApplyGradients expects. It is nil before
// the engine has training towers.
func (e *Engine) GradientVariables() []*towers.Variable {
	if b := e.trainBuild(); b != nil {
		return planVariables(b)
	}
	return nil
}

// planVariables are the variables of b's train plans, in plan order.
func planVariables(b *build) []*towers.Variable {
	var out []*towers.Variable
	for _, p := range b.plans {
		out = append(out, p.vars...)
	}
	return out
}

// DescribeVariables lists variables as "name shape dtype", comma
// separated: what an error about gradients or weights expected.
func DescribeVariables(vs []*towers.Variable) string {
	if len(vs) == 0 {
		return "none"
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf("%s %v %v", v.Name(), v.Shape(), v.Dtype())
	}
	return strings.Join(out, ", ")
}

// setGradients points b's plans at grads, after checking them all.
func setGradients(b *build, grads []Gradient) error {
	want := func() string { return DescribeVariables(planVariables(b)) }
	byName := make(map[string]any, len(grads))
	for i, g := range grads {
		if g.Variable == nil {
			return fmt.Errorf("gradient %d has no variable; want gradients of %s", i, want())
		}
		name := g.Variable.Name()
		if _, ok := byName[name]; ok {
			return fmt.Errorf("two gradients of %q; want one each of %s", name, want())
		}
		byName[name] = g.Value
	}
	n := 0
	for _, p := range b.plans {
		for _, v := range p.vars {
			g, ok := byName[v.Name()]
			if !ok {
				return fmt.Errorf("no gradient of %q; want gradients of %s", v.Name(), want())
			}
			if err := optimizers.CheckGradient(v, g); err != nil {
				return fmt.Errorf("%w; want gradients of %s", err, want())
			}
			n++
		}
	}
	if n != len(byName) {
		minimized := map[string]bool{}
		for _, v := range planVariables(b) {
			minimized[v.Name()] = true
		}
		for _, g := range grads {
			if !minimized[g.Variable.Name()] {
				return fmt.Errorf("gradient of %q, which no train op minimizes; want gradients of %s", g.Variable.Name(), want())
			}
		}
	}
	for _, p := range b.plans {
		for j, v := range p.vars {
			p.apply[j] = byName[v.Name()]
		}
		p.borrowed = true
	}
	return nil
}
