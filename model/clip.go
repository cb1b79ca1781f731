package model

import (
	"fmt"
	"math"
)

// Clip limits a train op's gradients before its optimizer applies them,
// as Keras's global_clipnorm and clipvalue and PyTorch's
// clip_grad_norm_ and clip_grad_value_. Its zero value clips nothing.
//
// The replication engine clips once per update, after the gradients are
// summed over the towers and across processes (and accumulated over
// micro-batches): N towers × M processes clip exactly as one device on the
// combined batch does (PyTorch's order; TensorFlow 1 clipped each tower's
// gradients before summing them, which is why tf.distribute disabled
// clipnorm).
type Clip struct {
	// GlobalNorm, when positive, scales every gradient of the train op by
	// GlobalNorm / max(norm, GlobalNorm), norm being the global norm: the
	// square root of the sum of the squares of every element of every
	// gradient (TensorFlow's clip_by_global_norm). A sparse gradient's
	// norm is taken after its repeated indices are summed.
	GlobalNorm float64
	// Value, when positive, clips every element of every gradient into
	// [-Value, Value], after any GlobalNorm scaling (for a sparse
	// gradient, after its repeated indices are summed).
	Value float64
}

// Enabled reports whether c clips anything.
func (c Clip) Enabled() bool { return c.GlobalNorm > 0 || c.Value > 0 }

// Validate reports a negative, NaN or infinite bound.
func (c Clip) Validate() error {
	for _, b := range []struct {
		name string
		v    float64
	}{{"GlobalNorm", c.GlobalNorm}, {"Value", c.Value}} {
		if !(b.v >= 0) || math.IsInf(b.v, 0) {
			return fmt.Errorf("clip %s %v: want a finite bound >= 0 (0: no clipping)", b.name, b.v)
		}
	}
	return nil
}
