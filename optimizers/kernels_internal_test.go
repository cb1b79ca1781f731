package optimizers

import (
	"fmt"
	"math"
	"math/rand/v2"
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
// gradients before squaring (the slots are flushed after, as in update),
// its products rounded before they are added, as update's.
func squareAll[T numeric.Float](c config, w, g []T, slots [][]T, s step) {
	lr, eps := T(s.lr), T(c.eps)
	for i, gi := range g {
		switch c.kind {
		case kindAdam:
			b1, b2 := T(c.beta1), T(c.beta2)
			m := ftz(T(b1*ftz(slots[0][i])) + T((1-b1)*gi))
			v := ftz(T(b2*ftz(slots[1][i])) + T((1-b2)*gi*gi))
			slots[0][i], slots[1][i] = m, v
			corr1, corr2 := T(1-math.Pow(c.beta1, float64(s.t))), T(1-math.Pow(c.beta2, float64(s.t)))
			w[i] -= lr * (m / corr1) / (sqrt(v/corr2) + eps)
		case kindRMSProp:
			rho := T(c.rho)
			a := ftz(T(rho*ftz(slots[0][i])) + T((1-rho)*gi*gi))
			slots[0][i] = a
			w[i] -= lr * gi / (sqrt(a) + eps)
		case kindAdagrad:
			a := ftz(slots[0][i] + T(gi*gi))
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

// TestAssemblyMatchesGo: the float32 updates in assembly give the Go
// loops' weights and slots bit for bit (any two NaNs equal), for every
// kind, on lengths with and without a tail, with values the two could
// disagree on mixed in: zeros of both signs, subnormals, gradients either
// side of squareFloor's bound with zero slots, infinities, NaNs.
func TestAssemblyMatchesGo(t *testing.T) {
	if !useAVX2 {
		t.Log("no AVX2 assembly here: the Go loops are compared with themselves")
	}
	configs := []config{
		{kind: kindSGD, wd: 0.01},
		{kind: kindMomentum, momentum: 0.9},
		{kind: kindMomentum, momentum: 0.9, nesterov: true, wd: 0.01},
		{kind: kindAdam, beta1: 0.9, beta2: 0.999, eps: 1e-7},
		{kind: kindAdam, beta1: 0.8, beta2: 0.99, eps: 1e-3, wd: 0.1},
		{kind: kindRMSProp, rho: 0.9, eps: 1e-7},
		{kind: kindAdagrad, eps: 1e-7, wd: 0.01},
	}
	bits := cmp.Comparer(func(a, b float32) bool {
		return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
	})
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range configs {
		floor := coefficients[float32](&c, step{lr: 0.01, t: 3}).floor
		specials := []float32{0, float32(math.Copysign(0, -1)), 0x1p-130, -0x1p-140, floor / 2, -floor / 2, floor * 2,
			floor, 0x1p-64, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 3e38}
		value := func() float32 {
			if r.IntN(4) == 0 {
				return specials[r.IntN(len(specials))]
			}
			return float32(r.NormFloat64())
		}
		for _, n := range []int{8, 13, 64, 1031} {
			t.Run(fmt.Sprintf("%v/wd=%v/nesterov=%v/n=%d", c.kind, c.wd, c.nesterov, n), func(t *testing.T) {
				w, g, slots := make([]float32, n), make([]float32, n), [][]float32{make([]float32, n), make([]float32, n)}
				for i := range w {
					w[i], g[i], slots[0][i], slots[1][i] = value(), value(), value(), value()
					if r.IntN(4) == 0 { // a zero slot, for the tiny gradients
						slots[0][i], slots[1][i] = 0, 0
					}
				}
				wantW, wantS := slices.Clone(w), [][]float32{slices.Clone(slots[0]), slices.Clone(slots[1])}
				st := step{lr: 0.01, t: 3}
				saved := useAVX2
				useAVX2 = false
				update(&c, wantW, g, wantS, st)
				useAVX2 = saved
				update(&c, w, g, slots, st)
				if diff := cmp.Diff(wantW, w, bits); diff != "" {
					t.Errorf("weights (-go +assembly):\n%s", diff)
				}
				if diff := cmp.Diff(wantS, slots, bits); diff != "" {
					t.Errorf("slots (-go +assembly):\n%s", diff)
				}
			})
		}
	}
}
