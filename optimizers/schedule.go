package optimizers

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Schedule gives the learning rate of each training step, as TensorFlow's
// learning-rate schedules do. An optimizer built with LearningRateSchedule
// uses Rate(step) for the update of step, where step is the global step
// before the update (0 for the first). String describes the schedule and
// its parameters; two schedules with equal String must give equal rates.
// (Across processes both the optimizer's Config, which holds String, and
// its rates at a few fixed steps are compared with rank 0's: see
// Optimizer.Config.)
type Schedule interface {
	Rate(step int64) float64
	String() string
}

// validator is implemented by this package's schedules: a schedule built
// with invalid parameters makes the optimizer using it invalid.
type validator interface{ validate() error }

func validate(s Schedule) error {
	if s == nil {
		return errors.New("nil schedule")
	}
	if v, ok := s.(validator); ok {
		return v.validate()
	}
	return nil
}

func checkRate(what string, lr float64) error {
	if !(lr >= 0) || math.IsInf(lr, 0) {
		return fmt.Errorf("%s %v is not finite and non-negative", what, lr)
	}
	return nil
}

type constantRate float64

// ConstantRate returns the schedule whose rate is lr at every step.
func ConstantRate(lr float64) Schedule { return constantRate(lr) }

func (c constantRate) Rate(int64) float64 { return float64(c) }
func (c constantRate) String() string     { return "Constant(" + ftoa(float64(c)) + ")" }
func (c constantRate) validate() error {
	return checkRate("ConstantRate: learning rate", float64(c))
}

type piecewise struct {
	boundaries []int64
	values     []float64
}

// PiecewiseConstant returns TensorFlow's piecewise_constant schedule:
// values[0] for steps up to boundaries[0] included, values[i] for steps in
// (boundaries[i-1], boundaries[i]], and the last value for steps after the
// last boundary. It needs one more value than boundaries, boundaries
// strictly increasing and values finite and non-negative; otherwise the
// optimizer built with it is invalid.
func PiecewiseConstant(boundaries []int64, values []float64) Schedule {
	return &piecewise{boundaries: append([]int64(nil), boundaries...), values: append([]float64(nil), values...)}
}

func (p *piecewise) Rate(step int64) float64 {
	if len(p.values) != len(p.boundaries)+1 {
		return math.NaN()
	}
	// The first boundary at or after step: step <= boundaries[i].
	i := sort.Search(len(p.boundaries), func(i int) bool { return p.boundaries[i] >= step })
	return p.values[i]
}

func (p *piecewise) String() string {
	b := make([]string, len(p.boundaries))
	for i, x := range p.boundaries {
		b[i] = fmt.Sprint(x)
	}
	v := make([]string, len(p.values))
	for i, x := range p.values {
		v[i] = ftoa(x)
	}
	return "PiecewiseConstant(boundaries=[" + strings.Join(b, " ") + "],values=[" + strings.Join(v, " ") + "])"
}

func (p *piecewise) validate() error {
	if len(p.values) != len(p.boundaries)+1 {
		return fmt.Errorf("PiecewiseConstant: %d values for %d boundaries, want %d", len(p.values), len(p.boundaries), len(p.boundaries)+1)
	}
	for i := 1; i < len(p.boundaries); i++ {
		if p.boundaries[i] <= p.boundaries[i-1] {
			return fmt.Errorf("PiecewiseConstant: boundaries %v are not strictly increasing", p.boundaries)
		}
	}
	for _, v := range p.values {
		if err := checkRate("PiecewiseConstant: value", v); err != nil {
			return err
		}
	}
	return nil
}

type exponential struct {
	lr         float64
	decaySteps int64
	rate       float64
	staircase  bool
}

// ExponentialDecay returns TensorFlow's exponential_decay schedule:
// lr*rate^(step/decaySteps), with step/decaySteps rounded down when
// staircase. decaySteps must be positive, lr and rate finite and
// non-negative.
func ExponentialDecay(lr float64, decaySteps int64, rate float64, staircase bool) Schedule {
	return &exponential{lr: lr, decaySteps: decaySteps, rate: rate, staircase: staircase}
}

func (e *exponential) Rate(step int64) float64 {
	p := float64(step) / float64(e.decaySteps)
	if e.staircase {
		p = math.Floor(p)
	}
	return e.lr * math.Pow(e.rate, p)
}

func (e *exponential) String() string {
	return fmt.Sprintf("ExponentialDecay(lr=%s,decay_steps=%d,rate=%s,staircase=%t)", ftoa(e.lr), e.decaySteps, ftoa(e.rate), e.staircase)
}

func (e *exponential) validate() error {
	if err := checkRate("ExponentialDecay: learning rate", e.lr); err != nil {
		return err
	}
	if e.decaySteps <= 0 {
		return fmt.Errorf("ExponentialDecay: decay steps %d is not positive", e.decaySteps)
	}
	return checkRate("ExponentialDecay: decay rate", e.rate)
}

type cosine struct {
	lr         float64
	decaySteps int64
	alpha      float64
}

// CosineDecay returns TensorFlow's CosineDecay schedule (without warm-up):
// lr*((1-alpha)*c + alpha) with c = 0.5*(1+cos(pi*min(step,decaySteps)/decaySteps)),
// falling from lr at step 0 to alpha*lr at decaySteps and staying there.
// decaySteps must be positive, lr finite and non-negative, alpha in [0, 1].
func CosineDecay(lr float64, decaySteps int64, alpha float64) Schedule {
	return &cosine{lr: lr, decaySteps: decaySteps, alpha: alpha}
}

func (c *cosine) Rate(step int64) float64 {
	p := float64(min(step, c.decaySteps)) / float64(c.decaySteps)
	cos := 0.5 * (1 + math.Cos(math.Pi*p))
	return c.lr * ((1-c.alpha)*cos + c.alpha)
}

func (c *cosine) String() string {
	return fmt.Sprintf("CosineDecay(lr=%s,decay_steps=%d,alpha=%s)", ftoa(c.lr), c.decaySteps, ftoa(c.alpha))
}

func (c *cosine) validate() error {
	if err := checkRate("CosineDecay: learning rate", c.lr); err != nil {
		return err
	}
	if c.decaySteps <= 0 {
		return fmt.Errorf("CosineDecay: decay steps %d is not positive", c.decaySteps)
	}
	if !(c.alpha >= 0 && c.alpha <= 1) {
		return fmt.Errorf("CosineDecay: alpha %v is not in [0, 1]", c.alpha)
	}
	return nil
}

type warmup struct {
	steps int64
	then  Schedule
}

// LinearWarmup returns a schedule that ramps up linearly over the first
// steps steps to then: then.Rate(step)*(step+1)/steps for step < steps,
// then.Rate(step) afterwards. steps must be non-negative (0: no warm-up)
// and then a valid schedule.
func LinearWarmup(steps int64, then Schedule) Schedule {
	return &warmup{steps: steps, then: then}
}

func (w *warmup) Rate(step int64) float64 {
	r := w.then.Rate(step)
	if step < w.steps {
		return r * float64(step+1) / float64(w.steps)
	}
	return r
}

func (w *warmup) String() string {
	then := "<nil>"
	if w.then != nil {
		then = w.then.String()
	}
	return fmt.Sprintf("LinearWarmup(steps=%d,then=%s)", w.steps, then)
}

func (w *warmup) validate() error {
	if w.steps < 0 {
		return fmt.Errorf("LinearWarmup: steps %d is negative", w.steps)
	}
	if err := validate(w.then); err != nil {
		return fmt.Errorf("LinearWarmup: %w", err)
	}
	return nil
}
