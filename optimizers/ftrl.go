package optimizers

import "math"

// FTRL returns FTRL-Proximal (McMahan et al., "Ad Click Prediction: a View
// from the Trenches"), TensorFlow's default optimizer for linear models,
// as TensorFlow applies it (tf.keras.optimizers.Ftrl, FtrlOptimizer; the
// ApplyFtrlV2 kernel). With n(a) = a^-lrPower:
//
//	gs = g + 2*l2_shrinkage*w
//	acc' = acc + g*g
//	linear += gs - (n(acc') - n(acc))/lr * w
//	w = (sign(linear)*l1 - linear) / (n(acc')/lr + 2*l2) if |linear| > l1, else 0
//	acc = acc'
//
// with acc in the slot "<var>/<Name>/accumulator", starting at the initial
// accumulator value, and linear in "<var>/<Name>/linear", starting at
// zero; the default name is "Ftrl". Defaults: learning-rate power -0.5,
// initial accumulator 0.1, no l1, l2 or l2 shrinkage (options
// LearningRatePower, InitialAccumulator, L1, L2, L2Shrinkage). l2 is the
// stabilizing penalty of the paper; l2 shrinkage is an L2 penalty on the
// loss, entering through the gradient. lr must be positive (a schedule's
// rate too, at every step it is applied). The weights are a function of
// the slots: a row's update sets them, whatever they were. WeightDecay
// does not apply.
//
// A sparse gradient updates its rows alone, as TensorFlow's
// SparseApplyFtrlV2: they get what the dense apply of the densified
// gradient gives them; the dense apply of a zero row would recompute that
// row's weights from its slots.
func FTRL(lr float64, opts ...Option) Optimizer {
	return build(config{kind: kindFTRL, lr: lr, lrPower: -0.5, initAcc: 0.1}, opts)
}

// LearningRatePower sets FTRL's learning-rate power (default -0.5): how
// the per-coordinate learning rate lr/acc^-p falls as the accumulator
// grows; 0 keeps it fixed at lr. It must be finite and not positive.
func LearningRatePower(p float64) Option {
	return func(c *config) {
		if c.kind != kindFTRL {
			c.fail("option LearningRatePower applies to FTRL only, not %v", c.kind)
			return
		}
		if !(p <= 0) || math.IsInf(p, 0) {
			c.fail("learning rate power %v is not finite and at most 0", p)
		}
		c.lrPower = p
	}
}

// L1 sets FTRL's L1 regularization strength (default 0), finite and
// non-negative: a weight whose linear slot stays within ±l1 is zero.
func L1(l float64) Option {
	return ftrlStrength("L1", "l1 regularization strength", l, func(c *config) { c.l1 = l })
}

// L2 sets FTRL's L2 regularization strength (default 0), finite and
// non-negative: the paper's stabilizing L2 penalty.
func L2(l float64) Option {
	return ftrlStrength("L2", "l2 regularization strength", l, func(c *config) { c.l2 = l })
}

// L2Shrinkage sets FTRL's L2 shrinkage regularization strength (default
// 0), finite and non-negative: an L2 penalty on the loss, the gradient
// becoming g + 2*l2_shrinkage*w (TensorFlow's
// l2_shrinkage_regularization_strength).
func L2Shrinkage(l float64) Option {
	return ftrlStrength("L2Shrinkage", "l2 shrinkage regularization strength", l, func(c *config) { c.shrinkage = l })
}

func ftrlStrength(option, name string, l float64, set func(*config)) Option {
	return func(c *config) {
		if c.kind != kindFTRL {
			c.fail("option %s applies to FTRL only, not %v", option, c.kind)
			return
		}
		if !finiteNonNegative(l) {
			c.fail("%s %v is not finite and non-negative", name, l)
		}
		set(c)
	}
}
