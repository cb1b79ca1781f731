package replicate

import (
	"fmt"
	"math"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/towers"
)

// Gradient clipping (model.Clip, per train op; Config.Clip for the
// default one). The engine clips in the second half of a step (applyStep,
// so ApplyGradients clips too), once per update: after the towers' sum,
// the cross-process all-reduce, Config.ReduceGradients and any
// accumulation over micro-batches, so that N towers × M processes clip as
// one device on the combined batch does. Clipping allocates nothing for
// dense gradients; a sparse one is deduplicated first (its rows, never a
// buffer of the variable's size).

// GlobalNorm returns the global norm of grads, TensorFlow's global_norm:
// the square root of the sum of the squares of every element of every
// gradient, summed in float64 in order. Each gradient is as the optimizers
// take it: a []float32, a []float64 or a towers.IndexedSlices, whose norm
// is that of its densified value (its repeated indices summed first, by
// Deduplicate); a nil one counts nothing. The norm may be NaN or +Inf.
func GlobalNorm(grads []any) (float64, error) {
	sq := 0.0
	for i, g := range grads {
		s, err := sumSquares(g, true)
		if err != nil {
			return 0, fmt.Errorf("global norm: gradient %d: %w", i, err)
		}
		sq += s
	}
	return math.Sqrt(sq), nil
}

// ClipGradients clips grads in place as c says and returns their global
// norm before clipping (0 when c.GlobalNorm is 0: it is not computed).
// With c.GlobalNorm, every gradient is scaled by GlobalNorm / max(norm,
// GlobalNorm); with c.Value, every element is then clipped into [-Value,
// Value]. A towers.IndexedSlices is replaced in grads by its deduplicated
// form (new memory: the values given are not changed) before its norm is
// taken and its values scaled, so that a sparse gradient clips exactly as
// its densified value does. A global norm that is NaN or infinite is an
// error naming the first gradient that makes it so, and scales nothing.
func ClipGradients(grads []any, c model.Clip) (float64, error) {
	return clipGradients(grads, c, func(i int) string { return fmt.Sprintf("gradient %d", i) })
}

// clipGradients is ClipGradients with the name of gradient i for errors.
func clipGradients(grads []any, c model.Clip, name func(int) string) (float64, error) {
	if err := c.Validate(); err != nil {
		return 0, err
	}
	if !c.Enabled() {
		return 0, nil
	}
	for i, g := range grads {
		if s, ok := g.(towers.IndexedSlices); ok {
			if err := s.Validate(); err != nil {
				return 0, fmt.Errorf("clip gradients: %s: %w", name(i), err)
			}
			grads[i] = s.Deduplicate()
		}
	}
	norm, scale := 0.0, 1.0
	if c.GlobalNorm > 0 {
		sq := 0.0
		for i, g := range grads {
			s, err := sumSquares(g, false)
			if err != nil {
				return 0, fmt.Errorf("clip gradients: %s: %w", name(i), err)
			}
			if sq += s; math.IsNaN(sq) || math.IsInf(sq, 0) {
				return 0, fmt.Errorf("clip gradients: the global norm is %v: %s is not finite (or too large)", math.Sqrt(sq), name(i))
			}
		}
		norm = math.Sqrt(sq)
		if norm > c.GlobalNorm {
			scale = c.GlobalNorm / norm
		}
	}
	for _, g := range grads {
		clipValues(values(g), scale, c.Value)
	}
	return norm, nil
}

// values is the elements of a gradient: a dense one's, or an
// IndexedSlices' Values.
func values(g any) any {
	if s, ok := g.(towers.IndexedSlices); ok {
		return s.Values
	}
	return g
}

// sumSquares is the sum of the squares of g's elements in float64; an
// IndexedSlices is deduplicated first when dedup is set (otherwise it must
// have no repeated index).
func sumSquares(g any, dedup bool) (float64, error) {
	if s, ok := g.(towers.IndexedSlices); ok {
		if err := s.Validate(); err != nil {
			return 0, err
		}
		if dedup {
			s = s.Deduplicate()
		}
		g = s.Values
	}
	switch v := g.(type) {
	case nil:
		return 0, nil
	case []float32:
		return squares(v), nil
	case []float64:
		return squares(v), nil
	}
	return 0, fmt.Errorf("a gradient is a []float32, []float64 or towers.IndexedSlices, not a %T", g)
}

func squares[T numeric.Float](v []T) float64 {
	s := 0.0
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return s
}

// clipValues multiplies v (a []float32 or []float64; anything else is
// left alone) by scale, unless it is 1, then clips it into [-bound,
// bound] when bound is positive.
func clipValues(v any, scale, bound float64) {
	switch v := v.(type) {
	case []float32:
		clipSlice(v, scale, bound)
	case []float64:
		clipSlice(v, scale, bound)
	}
}

func clipSlice[T numeric.Float](v []T, scale, bound float64) {
	if scale != 1 {
		s := T(scale)
		for i := range v {
			v[i] *= s
		}
	}
	if bound > 0 {
		hi := T(bound)
		for i, x := range v {
			v[i] = max(min(x, hi), -hi)
		}
	}
}

// clipTrainOps clips the gradients of every train op of b that clips
// (trainPlan.clip) in place, before any optimizer runs, and keeps the
// global norm for GradientNorm. Dense gradients the engine does not own
// (given to ApplyGradients) are first copied into the plan's sums, so the
// caller's are never changed. An error leaves every variable as it was.
func (e *Engine) clipTrainOps(b *build) error {
	e.gradNorm, e.hasGradNorm = 0, false
	sq := 0.0
	for k, p := range b.plans {
		borrowed := p.borrowed
		p.borrowed = false
		if !p.clip.Enabled() {
			continue
		}
		for j, g := range p.apply {
			if _, sparse := g.(towers.IndexedSlices); borrowed && !sparse {
				if err := numeric.CopyInto(p.sums[j], g); err != nil {
					return fmt.Errorf("clip gradients of train op %d: %q: %w", k, p.vars[j].Name(), err)
				}
				p.apply[j] = p.sums[j]
			}
		}
		norm, err := clipGradients(p.apply, p.clip, func(j int) string { return fmt.Sprintf("the gradient of %q", p.vars[j].Name()) })
		if err != nil {
			return fmt.Errorf("train step %d: train op %d (%s): %w", e.Step(), k, p.opt.Name(), err)
		}
		if p.clip.GlobalNorm > 0 {
			sq += norm * norm
			e.hasGradNorm = true
		}
	}
	e.gradNorm = math.Sqrt(sq)
	return nil
}

// GradientNorm returns the global norm, before clipping, of the gradients
// of the last update (TrainStep, TrainMicroBatches, ApplyGradients) over
// the train ops that clip by global norm (model.Clip.GlobalNorm): one
// op's norm, or with several the square root of the sum of their squares.
// ok is false when no train op of that update clipped by global norm.
func (e *Engine) GradientNorm() (norm float64, ok bool) {
	return e.gradNorm, e.hasGradNorm
}
