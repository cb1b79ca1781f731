package optimizers

import (
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/numeric"
)

// TestFlushes: ftz zeroes subnormals, keeping the sign, and leaves other
// values (infinities and NaNs included) as they are; tiny holds strictly
// inside its bound, and not for NaN.
func TestFlushes(t *testing.T) {
	type row struct {
		name string
		x    float64
		want float64
	}
	check := func(t *testing.T, what string, f func(float64) float64, rows []row) {
		t.Helper()
		for _, r := range rows {
			if got := f(r.x); !cmp.Equal(got, r.want, cmp.Comparer(sameFloat)) {
				t.Errorf("%s(%s = %v) = %v, want %v", what, r.name, r.x, got, r.want)
			}
		}
	}
	negZero := math.Copysign(0, -1)
	t.Run("float32", func(t *testing.T) {
		const bound = float32(1e-20)
		under := float64(math.Nextafter32(bound, 0))
		check(t, "tiny", func(x float64) float64 { return b2f(tiny(float32(x), bound)) }, []row{
			{"bound", float64(bound), 0}, {"-bound", -float64(bound), 0},
			{"under", under, 1}, {"-under", -under, 1}, {"zero", 0, 1},
			{"one", 1, 0}, {"+Inf", math.Inf(1), 0}, {"-Inf", math.Inf(-1), 0}, {"NaN", math.NaN(), 0},
		})
		check(t, "ftz", func(x float64) float64 { return float64(ftz(float32(x))) }, []row{
			{"smallest normal", 0x1p-126, 0x1p-126},
			{"largest subnormal", float64(math.Nextafter32(0x1p-126, 0)), 0},
			{"-subnormal", -0x1p-130, negZero}, {"NaN", math.NaN(), math.NaN()}, {"-Inf", math.Inf(-1), math.Inf(-1)},
		})
	})
	t.Run("float64", func(t *testing.T) {
		const bound = 1e-200
		under := math.Nextafter(bound, 0)
		check(t, "tiny", func(x float64) float64 { return b2f(tiny(x, bound)) }, []row{
			{"bound", bound, 0}, {"-bound", -bound, 0},
			{"under", under, 1}, {"-under", -under, 1}, {"zero", 0, 1},
			{"one", 1, 0}, {"+Inf", math.Inf(1), 0}, {"-Inf", math.Inf(-1), 0}, {"NaN", math.NaN(), 0},
		})
		check(t, "ftz", func(x float64) float64 { return ftz(x) }, []row{
			{"smallest normal", 0x1p-1022, 0x1p-1022},
			{"largest subnormal", math.Nextafter(0x1p-1022, 0), 0},
			{"-subnormal", -0x1p-1030, negZero}, {"NaN", math.NaN(), math.NaN()}, {"-Inf", math.Inf(-1), math.Inf(-1)},
		})
	})
}

// TestSquareFloorKeepsSlotsExact: Adam's, RMSProp's and Adagrad's updates,
// which take a tiny gradient as zero before squaring it when the
// second-moment slot is zero, give the slots and the weights of the
// updates that square every gradient, bit for bit: for gradients swept
// across squareFloor's bound (2^-8 below it to 2^8 above, and the 4096
// floats nearest it) and slots that are zero or a small normal number.
func TestSquareFloorKeepsSlotsExact(t *testing.T) {
	for _, c := range []config{
		{kind: kindAdam, beta1: 0.9, beta2: 0.999, eps: 1e-7},
		{kind: kindRMSProp, rho: 0.9, eps: 1e-7},
		{kind: kindAdagrad, eps: 1e-7},
	} {
		t.Run(c.kind.String()+"/float32", func(t *testing.T) { slotsExact[float32](t, c, 0x1p-120) })
		t.Run(c.kind.String()+"/float64", func(t *testing.T) { slotsExact[float64](t, c, 0x1p-1000) })
	}
}

func slotsExact[T numeric.Float](t *testing.T, c config, small T) {
	cs := map[kind]T{kindAdam: T(1 - c.beta2), kindRMSProp: T(1 - c.rho), kindAdagrad: 1}[c.kind]
	bound := squareFloor(cs)
	var g []T
	for k := -2048; k < 2048; k++ {
		g = append(g, bound*T(math.Exp2(float64(k)/256)), nextAfter(bound, k))
	}
	st := step{lr: 0.01, t: 3}
	for _, s0 := range []T{0, small} {
		w, slots := make([]T, len(g)), [][]T{make([]T, len(g)), make([]T, len(g))}
		for i := range w {
			w[i] = 1
			slots[0][i], slots[1][i] = s0, s0
		}
		wantW, wantS := slices.Clone(w), [][]T{slices.Clone(slots[0]), slices.Clone(slots[1])}
		squareAll(c, wantW, g, wantS, st)
		update(&c, w, g, slots, st)
		if diff := cmp.Diff(wantW, w); diff != "" {
			t.Errorf("slots %v: weights (-squaring every gradient +update):\n%s", s0, diff)
		}
		if diff := cmp.Diff(wantS, slots); diff != "" {
			t.Errorf("slots %v: slots (-squaring every gradient +update):\n%s", s0, diff)
		}
	}
}

// squareAll is update's Adam, RMSProp and Adagrad without the flush of tiny
// gradients before squaring (the slots are flushed after, as in update).
func squareAll[T numeric.Float](c config, w, g []T, slots [][]T, s step) {
	lr, eps := T(s.lr), T(c.eps)
	for i, gi := range g {
		switch c.kind {
		case kindAdam:
			b1, b2 := T(c.beta1), T(c.beta2)
			m := ftz(b1*ftz(slots[0][i]) + (1-b1)*gi)
			v := ftz(b2*ftz(slots[1][i]) + (1-b2)*gi*gi)
			slots[0][i], slots[1][i] = m, v
			corr1, corr2 := T(1-math.Pow(c.beta1, float64(s.t))), T(1-math.Pow(c.beta2, float64(s.t)))
			w[i] -= lr * (m / corr1) / (sqrt(v/corr2) + eps)
		case kindRMSProp:
			rho := T(c.rho)
			a := ftz(rho*ftz(slots[0][i]) + (1-rho)*gi*gi)
			slots[0][i] = a
			w[i] -= lr * gi / (sqrt(a) + eps)
		case kindAdagrad:
			a := ftz(slots[0][i] + gi*gi)
			slots[0][i] = a
			w[i] -= lr * gi / (sqrt(a) + eps)
		}
	}
}

// nextAfter returns the float k steps from x (towards zero for k < 0).
func nextAfter[T numeric.Float](x T, k int) T {
	if f, ok := any(x).(float32); ok {
		return T(math.Float32frombits(uint32(int64(math.Float32bits(f)) + int64(k))))
	}
	return T(math.Float64frombits(uint64(int64(math.Float64bits(float64(x))) + int64(k))))
}

// b2f is 1 for true, 0 for false.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// sameFloat: equal bits, so that the zeros' signs count, or both NaN.
func sameFloat(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (math.IsNaN(a) && math.IsNaN(b))
}
