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
// on many processors. A second-moment slot that is zero and a gradient so
// small that c·g·g, its square's term, comes out subnormal give a zero slot
// (the sum is flushed); computing that product is itself the slow operation
// (it made an Adam step five times as slow, BenchmarkUpdate), so in that
// case alone the gradient is taken as zero before it is squared (tiny,
// below squareFloor(c)): the slot comes out the same zero, bit for bit. A
// slot that is not zero still gets every term, however small. Which case
// holds is a branch, not a mask: a zero slot is rare and stays zero for
// many steps, and a branch-free mask cost every element 40–75% more time.
// The weight decay factor multiplies w in the same loop; with no decay it
// is 1, which leaves w bit for bit as it is. float32 updates on amd64 with
// AVX2 run in assembly (kernels_amd64.s), eight elements at a time, with
// these loops' operations in their order, so the same bits; the loops
// here run the last few elements, float64, FTRL, and everything
// elsewhere. The assembly makes an update 8-9x as fast (BenchmarkUpdate),
// which Go's compiler, vectorizing nothing, leaves to it. Every element
// updates on its own, so any split of a variable into ranges, each run
// through the assembly and the loops, gives the same bits.
func update[T numeric.Float](c *config, w, g []T, slots [][]T, s step) {
	newKernel[T](c, s).run(w, g, slots)
}

// kernel is update for one Apply and one dtype: the configuration and the
// step's coefficients, computed once, then run over any number of element
// ranges (a dense gradient's chunks, a sparse gradient's rows). avx holds
// the float32 coefficients in vector lanes for the assembly, nil where the
// assembly does not run (float64, no AVX2, FTRL). zero is a gradient of
// zeros, read-only, for the rows a sparse gradient does not name where
// the update still runs over them.
type kernel[T numeric.Float] struct {
	c    *config
	k    coeffs[T]
	avx  *avx2Coeffs
	zero []T
}

// zeroLen is the length of the shared zero gradients.
const zeroLen = 2048

var (
	zeros32 [zeroLen]float32
	zeros64 [zeroLen]float64
)

func newKernel[T numeric.Float](c *config, s step) *kernel[T] {
	kn := &kernel[T]{c: c, k: coefficients[T](c, s)}
	if k32, ok := any(kn.k).(coeffs[float32]); ok {
		kn.zero = any(zeros32[:]).([]T)
		if useAVX2 && c.kind != kindFTRL {
			kn.avx = broadcast(&k32)
		}
	} else {
		kn.zero = any(zeros64[:]).([]T)
	}
	return kn
}

// run applies the step to w from g, slots in slotNames order, all of
// len(g) elements (w may be longer).
func (kn *kernel[T]) run(w, g []T, slots [][]T) {
	c, k := kn.c, &kn.k
	w = w[:len(g)]
	if c.kind == kindSGD && c.wd == 0 {
		numeric.Axpy(-k.lr, g, w) // w - lr·g, bit for bit
		return
	}
	if n := len(g) &^ 7; n > 0 && kn.avx != nil {
		// The assembly takes whole vectors, the loops below the rest.
		var head [maxSlots][]float32
		var rest [maxSlots][]T
		for i, slot := range slots {
			head[i], rest[i] = any(slot[:n]).([]float32), slot[n:]
		}
		updateAVX2(c, kn.avx, any(w[:n]).([]float32), any(g[:n]).([]float32), head[:len(slots)])
		w, g, slots = w[n:], g[n:], rest[:len(slots)]
	}
	// Every product is rounded by a conversion, T(…), before it is added:
	// without it Go may fuse the two into one multiply-add (GOAMD64=v3),
	// which neither the assembly nor a v1 build does.
	switch c.kind {
	case kindSGD:
		for i, gi := range g {
			w[i] = T(w[i]*k.decay) - T(k.lr*gi)
		}
	case kindMomentum:
		acc := slots[0][:len(g)]
		if c.nesterov {
			for i, gi := range g {
				a := ftz(T(k.mom*ftz(acc[i])) + gi)
				acc[i] = a
				w[i] = T(w[i]*k.decay) - T(k.lr*(gi+T(k.mom*a)))
			}
			return
		}
		for i, gi := range g {
			a := ftz(T(k.mom*ftz(acc[i])) + gi)
			acc[i] = a
			w[i] = T(w[i]*k.decay) - T(k.lr*a)
		}
	case kindAdam:
		m, v := slots[0][:len(g)], slots[1][:len(g)]
		for i, gi := range g {
			mi := ftz(T(k.b1*ftz(m[i])) + T(k.omb1*gi))
			v0, gs := ftz(v[i]), gi
			if v0 == 0 && tiny(gi, k.floor) {
				gs = 0
			}
			vi := ftz(T(k.b2*v0) + T(T(k.omb2*gs)*gs))
			m[i], v[i] = mi, vi
			mhat := mi / k.corr1
			vhat := vi / k.corr2
			w[i] = T(w[i]*k.decay) - T(k.lr*mhat)/(sqrt(vhat)+k.eps)
		}
	case kindRMSProp:
		ms := slots[0][:len(g)]
		for i, gi := range g {
			m0, gs := ftz(ms[i]), gi
			if m0 == 0 && tiny(gi, k.floor) {
				gs = 0
			}
			a := ftz(T(k.b2*m0) + T(T(k.omb2*gs)*gs))
			ms[i] = a
			w[i] = T(w[i]*k.decay) - T(k.lr*gi)/(sqrt(a)+k.eps)
		}
	case kindAdagrad:
		acc := slots[0][:len(g)]
		for i, gi := range g {
			gs := gi
			if acc[i] == 0 && tiny(gi, k.floor) {
				gs = 0
			}
			a := ftz(acc[i] + T(gs*gs))
			acc[i] = a
			w[i] = T(w[i]*k.decay) - T(k.lr*gi)/(sqrt(a)+k.eps)
		}
	case kindFTRL:
		ftrl(k, c.lrPower == -0.5, w, g, slots[0][:len(g)], slots[1][:len(g)])
	}
}

// ftrl is update's FTRL-Proximal, TensorFlow's ApplyFtrlV2 (ApplyFtrl
// without l2 shrinkage), in T arithmetic, with n = acc^-lrPower (a square
// root when lrPower is -0.5):
//
//	gs = g + 2·l2_shrinkage·w
//	acc' = acc + g·g
//	lin += gs - (n(acc') - n(acc))/lr · w
//	w = (sign(lin)·l1 - lin) / (n(acc')/lr + 2·l2) if |lin| > l1, else 0
//
// acc' and lin are flushed of subnormals, and acc' takes a tiny g as zero
// when acc is zero, as Adagrad's accumulator.
func ftrl[T numeric.Float](k *coeffs[T], half bool, w, g, acc, lin []T) {
	for i, gi := range g {
		w0, a0 := w[i], acc[i]
		gs, gq := gi, gi
		if k.shrink2 != 0 {
			gs = gi + T(k.shrink2*w0)
		}
		if a0 == 0 && tiny(gi, k.floor) {
			gq = 0
		}
		a := ftz(a0 + T(gq*gq))
		var n0, n1 T
		if half {
			n0, n1 = sqrt(a0), sqrt(a)
		} else {
			n0, n1 = pow(a0, k.power), pow(a, k.power)
		}
		l := ftz(lin[i] + (gs - T((n1-n0)/k.lr*w0)))
		acc[i], lin[i] = a, l
		switch {
		case l > k.l1:
			w[i] = (k.l1 - l) / (n1/k.lr + k.l2x2)
		case l < -k.l1:
			w[i] = (-k.l1 - l) / (n1/k.lr + k.l2x2)
		default:
			w[i] = 0
		}
	}
}

// coeffs are the scalars of one update in T, computed once for the loops
// in Go and in assembly alike. b2 and omb2 are Adam's β2 or RMSProp's ρ,
// and one less it; floor is squareFloor of the factor of g·g.
type coeffs[T numeric.Float] struct {
	lr, decay, mom, b1, omb1, b2, omb2, corr1, corr2, eps, floor T
	// FTRL's: l1, twice l2 and twice the l2 shrinkage, -lrPower.
	l1, l2x2, shrink2, power T
}

func coefficients[T numeric.Float](c *config, s step) coeffs[T] {
	k := coeffs[T]{lr: T(s.lr), decay: T(1 - s.lr*c.wd), mom: T(c.momentum), eps: T(c.eps)}
	switch c.kind {
	case kindAdam:
		k.b1, k.b2 = T(c.beta1), T(c.beta2)
		k.omb1, k.omb2 = 1-k.b1, 1-k.b2
		// The bias corrections are computed in float64, as gorgonia does.
		k.corr1 = T(1 - math.Pow(c.beta1, float64(s.t)))
		k.corr2 = T(1 - math.Pow(c.beta2, float64(s.t)))
		k.floor = squareFloor(k.omb2)
	case kindRMSProp:
		k.b2 = T(c.rho)
		k.omb2 = 1 - k.b2
		k.floor = squareFloor(k.omb2)
	case kindAdagrad:
		k.floor = squareFloor(T(1))
	case kindFTRL:
		k.floor = squareFloor(T(1))
		k.l1, k.l2x2, k.shrink2, k.power = T(c.l1), T(2*c.l2), T(2*c.shrinkage), T(-c.lrPower)
	}
	return k
}

// sqrt is the correctly rounded square root in T (for float32 the float64
// root rounds to the float32 one).
func sqrt[T numeric.Float](x T) T { return T(math.Sqrt(float64(x))) }

// pow is x^y in T.
func pow[T numeric.Float](x, y T) T { return T(math.Pow(float64(x), float64(y))) }

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

// squareFloor returns a bound below which |g| makes c·g·g, computed in T,
// subnormal or zero: √(smallest normal / c), less 2^-20 of it for the
// rounding of the two products (each off by at most 2^-24 of the result in
// float32).
func squareFloor[T numeric.Float](c T) T {
	const margin = 1 - 0x1p-20
	tiny := 0x1p-1022
	if unsafe.Sizeof(c) == 4 {
		tiny = 0x1p-126
	}
	return T(math.Sqrt(tiny/float64(c)) * margin)
}

// tiny reports whether |g| < floor.
func tiny[T numeric.Float](g, floor T) bool { return g < floor && g > -floor }

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
