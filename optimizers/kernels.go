package optimizers

import (
	"math"
	"unsafe"

	"github.com/towerflow/towerflow/internal/numeric"
)

// step is what one Apply's kernels need beyond the configuration: the
// learning rate of this step and Adam's step count t (from 1).
type step struct {
	lr float64
	t  int64
}

// update applies one step to w from g, in T arithmetic. slots are the
// variable's slots in slotNames order. Every slot value that comes out
// subnormal is flushed to zero (ftz), so that a slot decaying towards zero
// does not sit for thousands of steps in the range where arithmetic is slow
// on many processors; and a gradient so small that c·g·g, its square's
// term in a second-moment slot, would be subnormal is taken as zero there
// (flushUnder below squareFloor(c)): the product itself is the slow
// operation (five times as slow a step with Adam, BenchmarkUpdate), and its
// subnormal result was flushed anyway. The weight decay factor multiplies w in the same
// loop; with no decay it is 1, which leaves w bit for bit as it is.
func update[T numeric.Float](c *config, w, g []T, slots [][]T, s step) {
	lr := T(s.lr)
	decay := T(1 - s.lr*c.wd)
	switch c.kind {
	case kindSGD:
		if c.wd == 0 {
			numeric.Axpy(-lr, g, w) // w - lr·g, bit for bit
			return
		}
		for i, gi := range g {
			w[i] = w[i]*decay - lr*gi
		}
	case kindMomentum:
		mom := T(c.momentum)
		acc := slots[0][:len(g)]
		w = w[:len(g)]
		if c.nesterov {
			for i, gi := range g {
				a := ftz(mom*ftz(acc[i]) + gi)
				acc[i] = a
				w[i] = w[i]*decay - lr*(gi+mom*a)
			}
			return
		}
		for i, gi := range g {
			a := ftz(mom*ftz(acc[i]) + gi)
			acc[i] = a
			w[i] = w[i]*decay - lr*a
		}
	case kindAdam:
		b1, b2, eps := T(c.beta1), T(c.beta2), T(c.eps)
		omb1, omb2 := 1-b1, 1-b2
		// The bias corrections are computed in float64, as gorgonia does.
		corr1 := T(1 - math.Pow(c.beta1, float64(s.t)))
		corr2 := T(1 - math.Pow(c.beta2, float64(s.t)))
		m, v := slots[0][:len(g)], slots[1][:len(g)]
		w = w[:len(g)]
		floor := squareFloor(omb2)
		for i, gi := range g {
			mi := ftz(b1*ftz(m[i]) + omb1*gi)
			gs := flushUnder(gi, floor)
			vi := ftz(b2*ftz(v[i]) + omb2*gs*gs)
			m[i], v[i] = mi, vi
			mhat := mi / corr1
			vhat := vi / corr2
			w[i] = w[i]*decay - lr*mhat/(sqrt(vhat)+eps)
		}
	case kindRMSProp:
		rho, eps := T(c.rho), T(c.eps)
		omr := 1 - rho
		ms := slots[0][:len(g)]
		w = w[:len(g)]
		floor := squareFloor(omr)
		for i, gi := range g {
			gs := flushUnder(gi, floor)
			a := ftz(rho*ftz(ms[i]) + omr*gs*gs)
			ms[i] = a
			w[i] = w[i]*decay - lr*gi/(sqrt(a)+eps)
		}
	case kindAdagrad:
		eps := T(c.eps)
		acc := slots[0][:len(g)]
		w = w[:len(g)]
		floor := squareFloor(T(1))
		for i, gi := range g {
			gs := flushUnder(gi, floor)
			a := ftz(acc[i] + gs*gs)
			acc[i] = a
			w[i] = w[i]*decay - lr*gi/(sqrt(a)+eps)
		}
	}
}

// sqrt is the correctly rounded square root in T (for float32 the float64
// root rounds to the float32 one).
func sqrt[T numeric.Float](x T) T { return T(math.Sqrt(float64(x))) }

// ftz flushes a subnormal x to a zero of its sign and returns any other x
// unchanged, without a branch: the bits of x are ANDed with a mask that is
// all ones when the exponent field is non-zero (normal, infinite or NaN)
// and keeps only the sign bit when it is zero (zero or subnormal).
func ftz[T numeric.Float](x T) T {
	if unsafe.Sizeof(x) == 4 { // resolved at compile time for each dtype
		return T(ftz32(float32(x)))
	}
	return T(ftz64(float64(x)))
}

// squareFloor returns the bits of the smallest |g| for which c·g·g is a
// normal number in T (with a factor of 2 to spare for the rounding of the
// products): flushUnder's threshold.
func squareFloor[T numeric.Float](c T) uint64 {
	if unsafe.Sizeof(c) == 4 {
		return uint64(math.Float32bits(float32(math.Sqrt(2 * 0x1p-126 / float64(c)))))
	}
	return math.Float64bits(math.Sqrt(2 * 0x1p-1022 / float64(c)))
}

// flushUnder returns x, or a zero of its sign where |x| is below the
// positive number whose bits are t, without a branch, as ftz does.
func flushUnder[T numeric.Float](x T, t uint64) T {
	if unsafe.Sizeof(x) == 4 {
		return T(flushUnder32(float32(x), uint32(t)))
	}
	return T(flushUnder64(float64(x), t))
}

// flushUnder32 and flushUnder64: |x| − t on the bits is negative exactly
// when |x| < t, so its arithmetic shift right fills the mask with ones then.
func flushUnder32(x float32, t uint32) float32 {
	b := math.Float32bits(x)
	return math.Float32frombits(b &^ (uint32(int32((b&0x7fffffff)-t)>>31) & 0x7fffffff))
}

func flushUnder64(x float64, t uint64) float64 {
	b := math.Float64bits(x)
	return math.Float64frombits(b &^ (uint64(int64((b&0x7fffffffffffffff)-t)>>63) & 0x7fffffffffffffff))
}

// ftz32 and ftz64: e is the exponent field; -e is negative exactly when e
// is not zero, so its arithmetic shift right fills the mask with ones then.
func ftz32(x float32) float32 {
	b := math.Float32bits(x)
	return math.Float32frombits(b & (uint32(-int32(b&0x7f800000)>>31) | 0x80000000))
}

func ftz64(x float64) float64 {
	b := math.Float64bits(x)
	return math.Float64frombits(b & (uint64(-int64(b&0x7ff0000000000000)>>63) | 0x8000000000000000))
}
