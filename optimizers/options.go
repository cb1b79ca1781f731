package optimizers

import (
	"math"
	"regexp"
	"strings"
)

// Option configures an optimizer. An option that does not apply to the
// optimizer it is given to (Beta1 to SGD, say) makes it invalid.
type Option func(*config)

// nameRE is TensorFlow's rule for op names, which slot names build on.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9.][A-Za-z0-9_.\-/]*$`)

// Named sets the optimizer's name, the prefix of its slot variables: two
// optimizers on one store need different names. The name must be a
// TensorFlow op name ([A-Za-z0-9.][A-Za-z0-9_.-/]*) not ending in "/".
func Named(name string) Option {
	return func(c *config) {
		if !nameRE.MatchString(name) || strings.HasSuffix(name, "/") {
			c.fail("name %q is not a valid name (letters, digits, '_', '.', '-', '/'; not starting with '_', '-' or '/' nor ending with '/')", name)
			return
		}
		c.name = name
	}
}

// UseNesterov makes Momentum use Nesterov momentum, as TensorFlow's
// MomentumOptimizer(use_nesterov=True): accum = momentum*accum + g;
// w -= lr*(g + momentum*accum).
func UseNesterov() Option {
	return func(c *config) {
		if c.kind != kindMomentum {
			c.fail("option UseNesterov applies to Momentum only, not %v", c.kind)
			return
		}
		c.nesterov = true
	}
}

// Beta1 sets Adam's exponential decay rate of the first moment, in [0, 1).
func Beta1(b float64) Option {
	return decayRate("Beta1", "beta1", b, kindAdam, func(c *config) { c.beta1 = b })
}

// Beta2 sets Adam's exponential decay rate of the second moment, in [0, 1).
func Beta2(b float64) Option {
	return decayRate("Beta2", "beta2", b, kindAdam, func(c *config) { c.beta2 = b })
}

// Rho sets RMSProp's decay rate of the mean square, in [0, 1).
func Rho(r float64) Option {
	return decayRate("Rho", "rho", r, kindRMSProp, func(c *config) { c.rho = r })
}

func decayRate(option, name string, b float64, k kind, set func(*config)) Option {
	return func(c *config) {
		if c.kind != k {
			c.fail("option %s applies to %v only, not %v", option, k, c.kind)
			return
		}
		if !(b >= 0 && b < 1) {
			c.fail("%s %v is not in [0, 1)", name, b)
		}
		set(c)
	}
}

// Epsilon sets the epsilon of Adam, RMSProp and Adagrad, added to the
// square root in the denominator; it must be finite and non-negative.
func Epsilon(eps float64) Option {
	return func(c *config) {
		if c.kind != kindAdam && c.kind != kindRMSProp && c.kind != kindAdagrad {
			c.fail("option Epsilon applies to Adam, RMSProp and Adagrad only, not %v", c.kind)
			return
		}
		if !finiteNonNegative(eps) {
			c.fail("epsilon %v is not finite and non-negative", eps)
		}
		c.eps = eps
	}
}

// InitialAccumulator sets the value Adagrad's and FTRL's accumulators
// start from (default 0.1); it must be finite and non-negative.
func InitialAccumulator(v float64) Option {
	return func(c *config) {
		if c.kind != kindAdagrad && c.kind != kindFTRL {
			c.fail("option InitialAccumulator applies to Adagrad and FTRL only, not %v", c.kind)
			return
		}
		if !finiteNonNegative(v) {
			c.fail("initial accumulator %v is not finite and non-negative", v)
		}
		c.initAcc = v
	}
}

// WeightDecay adds decoupled weight decay to any optimizer but FTRL, as
// PyTorch's AdamW and Loshchilov & Hutter's "Decoupled Weight Decay
// Regularization": each step first scales the weights, w = w*(1 - lr_t*wd)
// with lr_t the step's learning rate, then applies the gradient step; the
// decay never enters the slots. It scales the weights the step updates: a
// dense gradient's every weight, a sparse gradient's rows alone where only
// they update (SGD, Adagrad, Lazy; TensorFlow Addons' decoupled weight
// decay in its sparse apply), every row where all update (Momentum, Adam
// and RMSProp without Lazy). wd must be finite and non-negative; 0 (the
// default) is no decay. FTRL computes its weights from its slots and has
// its own L2 and L2Shrinkage instead.
func WeightDecay(wd float64) Option {
	return func(c *config) {
		if c.kind == kindFTRL {
			c.fail("option WeightDecay does not apply to FTRL (use L2 or L2Shrinkage)")
			return
		}
		if !finiteNonNegative(wd) {
			c.fail("weight decay %v is not finite and non-negative", wd)
		}
		c.wd = wd
	}
}

// LearningRateSchedule makes the learning rate of each Apply s.Rate(step),
// with step the global step before the update: the int64 scalar variable
// towers.GlobalStepName of the store, which the engine increments after
// every training step. Apply with a store holding no global step is an
// error. The learning rate given to the constructor is then unused. A
// schedule this package built with invalid parameters makes the optimizer
// invalid.
func LearningRateSchedule(s Schedule) Option {
	return func(c *config) {
		if err := validate(s); err != nil {
			c.fail("learning rate schedule: %v", err)
			return
		}
		c.sched = s
	}
}

func finiteNonNegative(x float64) bool { return x >= 0 && !math.IsInf(x, 0) }
