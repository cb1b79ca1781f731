package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sameBits compares floats bit for bit: −0 and +0 differ, and so do NaNs
// of other signs or payloads.
var sameBits = cmp.Comparer(func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) })

// nanAlike is sameBits except that any two NaNs are equal: where both
// operands of an addition can be NaNs, x86 returns the first operand's,
// and which is first in the Go loop is the register allocator's choice.
var nanAlike = cmp.Comparer(func(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
})

// withGo runs f with the assembly turned off.
func withGo(f func()) {
	saved := useAVX2
	useAVX2 = false
	defer func() { useAVX2 = saved }()
	f()
}

var negZero = float32(math.Copysign(0, -1))

// specials are the values the assembly and the Go loops could disagree on.
var specials = []float32{
	0, negZero, 1, -1, math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
	float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), -float32(math.NaN()),
	math.Float32frombits(0x7f800001), math.Float32frombits(0xff812345), // signalling NaNs
	math.MaxFloat32, -math.MaxFloat32, 0.5, 1e-30, -1e-30,
}

// data returns n values: random ones of either sign with specials mixed in
// when special is set.
func data(r *rand.Rand, n int, special bool) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
		if special && r.IntN(3) == 0 {
			x[i] = specials[r.IntN(len(specials))]
		}
	}
	return x
}

// lengths covers the empty slice, the Go tail alone, whole vectors, whole
// vectors with a tail, and rows the size of ResNet's.
var lengths = []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 256, 1024, 1031}

// TestElementwiseMatchesGo: the assembly gives the Go loops' bits, on every
// length, at an unaligned start, with the specials mixed in, and writes
// nothing past the end.
func TestElementwiseMatchesGo(t *testing.T) {
	if !useAVX2 {
		t.Log("no AVX2 on this machine: the Go loops are compared with themselves")
	}
	// same is sameBits where one input alone can be a NaN, nanAlike where
	// two can meet in one operation.
	funcs := []struct {
		name string
		run  func(o, x, y []float32)
		same cmp.Option
	}{
		{"Affine", func(o, x, _ []float32) { Affine(o, x, 0.25, 1.5, -0.75, 0.125, false) }, sameBits},
		{"Affine relu", func(o, x, _ []float32) { Affine(o, x, 0.25, 1.5, -0.75, 0.125, true) }, sameBits},
		// −0 out of the arithmetic, which ReLU makes +0.
		{"Affine relu -0", func(o, x, _ []float32) { Affine(o, fill(len(x), negZero), 0, 1, 1, negZero, true) }, sameBits},
		{"Project", func(o, x, y []float32) { copy(o, y); Project(o[:len(x)], x, 1.5, 0.25, -0.5, 0.75) }, nanAlike},
		{"Mask", func(o, x, y []float32) { Mask(o[:len(x)], x, y) }, sameBits},
		{"Add", func(o, x, y []float32) { Add(o, x, y, false) }, nanAlike},
		{"Add relu", func(o, x, y []float32) { Add(o, x, y, true) }, nanAlike},
		{"ReLU", func(o, x, _ []float32) { ReLU(o, x) }, sameBits},
		{"ReLU -0", func(o, x, _ []float32) { ReLU(o, fill(len(x), negZero)) }, sameBits},
		{"Add relu -0", func(o, x, _ []float32) { Add(o, fill(len(x), negZero), fill(len(x), negZero), true) }, sameBits},
		// A NaN from one operand alone keeps its payload; ReLU clears its sign.
		{"Add relu NaN", func(o, x, _ []float32) { Add(o, x, fill(len(x), float32(1)), true) }, sameBits},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, f := range funcs {
		for _, n := range lengths {
			for _, special := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/n=%d/special=%v", f.name, n, special), func(t *testing.T) {
					// Inputs start one element in, so the loads are unaligned.
					x, y := data(r, n+1, special)[1:], data(r, n+1, special)[1:]
					got, want := make([]float32, n+3), make([]float32, n+3)
					for i := range got {
						got[i], want[i] = 42, 42
					}
					f.run(got[1:], x, y)
					withGo(func() { f.run(want[1:], x, y) })
					if diff := cmp.Diff(want, got, f.same); diff != "" {
						t.Errorf("(-go +assembly)\n%s", diff)
					}
				})
			}
		}
	}
}

// TestSums: the sums in assembly against float64 sums of the same terms,
// within float32's rounding of that many terms, and bit for bit against
// the Go loops on small integers, whose sums are exact in any order.
func TestSums(t *testing.T) {
	// sums are a function's two sums, or the sums of their terms' sizes.
	type sums struct{ S, Q float64 }
	funcs := []struct {
		name string
		run  func(x, y []float32, m float32) (float32, float32)
		// terms returns the i-th terms of the two sums.
		terms func(x, y []float32, m float32, i int) (float64, float64)
	}{
		{
			"SumsAbout",
			func(x, _ []float32, m float32) (float32, float32) { return SumsAbout(x, m) },
			func(x, _ []float32, m float32, i int) (float64, float64) {
				d := float64(x[i]) - float64(m)
				return d, d * d
			},
		},
		{
			"SumAndDotAbout",
			func(x, y []float32, m float32) (float32, float32) { return SumAndDotAbout(x, y, m) },
			func(x, y []float32, m float32, i int) (float64, float64) {
				return float64(x[i]), float64(x[i]) * (float64(y[i]) - float64(m))
			},
		},
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, f := range funcs {
		ref := func(x, y []float32, m float32) (want, size sums) {
			for i := range x {
				s, q := f.terms(x, y, m, i)
				want.S, want.Q = want.S+s, want.Q+q
				size.S, size.Q = size.S+math.Abs(s), size.Q+math.Abs(q)
			}
			return want, size
		}
		for _, n := range lengths {
			t.Run(fmt.Sprintf("%s/n=%d", f.name, n), func(t *testing.T) {
				x, y := data(r, n+1, false)[1:], data(r, n+1, false)[1:]
				s, q := f.run(x, y, 0.375)
				want, size := ref(x, y, 0.375)
				// float32's rounding, for each of up to n additions and the
				// terms' own roundings, of the terms' sizes.
				eps := float64(n+2) * 0x1p-24
				tol := cmp.Comparer(func(a, b sums) bool {
					return math.Abs(a.S-b.S) <= eps*size.S && math.Abs(a.Q-b.Q) <= eps*size.Q
				})
				if diff := cmp.Diff(want, sums{float64(s), float64(q)}, tol); diff != "" {
					t.Errorf("random values: (-float64 +float32)\n%s", diff)
				}

				// Small integers: every partial sum is exact.
				for i := range x {
					x[i], y[i] = float32(r.IntN(17)-8), float32(r.IntN(17)-8)
				}
				var gs, gq float32
				s, q = f.run(x, y, 3)
				withGo(func() { gs, gq = f.run(x, y, 3) })
				if diff := cmp.Diff([2]float32{gs, gq}, [2]float32{s, q}); diff != "" {
					t.Errorf("integers: (-go +assembly)\n%s", diff)
				}
				want, _ = ref(x, y, 3)
				if diff := cmp.Diff([2]float32{float32(want.S), float32(want.Q)}, [2]float32{s, q}); diff != "" {
					t.Errorf("integers: (-float64 +float32)\n%s", diff)
				}
			})
		}
	}
}

// TestMask: the ReLU's gradient passes g where y > 0 and is 0 elsewhere,
// on the values a comparison and a bit trick could disagree on: both
// zeros, the smallest subnormals, infinities and NaNs of either sign (a NaN
// passes g when its sign bit is clear, as documented). Each value fills a
// row long enough for the assembly and the Go tail.
func TestMask(t *testing.T) {
	tests := []struct {
		y32  float32
		y64  float64
		pass bool
	}{
		{y32: 1, y64: 1, pass: true},
		{y32: -1, y64: -1},
		{y32: 0, y64: 0},
		{y32: float32(math.Copysign(0, -1)), y64: math.Copysign(0, -1)},
		{y32: math.SmallestNonzeroFloat32, y64: math.SmallestNonzeroFloat64, pass: true},
		{y32: -math.SmallestNonzeroFloat32, y64: -math.SmallestNonzeroFloat64},
		{y32: float32(math.Inf(1)), y64: math.Inf(1), pass: true},
		{y32: float32(math.Inf(-1)), y64: math.Inf(-1)},
		{y32: math.MaxFloat32, y64: math.MaxFloat64, pass: true},
		{y32: math.Float32frombits(0x7fc00000), y64: math.Float64frombits(0x7ff8000000000000), pass: true},
		{y32: math.Float32frombits(0xffc00000), y64: math.Float64frombits(0xfff8000000000000)},
	}
	const n = 11
	for _, tt := range tests {
		want32, want64 := fill[float32](n, 0), fill[float64](n, 0)
		if tt.pass {
			want32, want64 = fill[float32](n, 3), fill[float64](n, 3)
		}
		o32, o64 := fill[float32](n, 7), fill[float64](n, 7)
		Mask(o32, fill(n, tt.y32), fill[float32](n, 3))
		Mask(o64, fill(n, tt.y64), fill[float64](n, 3))
		if diff := cmp.Diff(want32, o32); diff != "" {
			t.Errorf("float32 y = %v: (-want +got)\n%s", tt.y32, diff)
		}
		if diff := cmp.Diff(want64, o64); diff != "" {
			t.Errorf("float64 y = %v: (-want +got)\n%s", tt.y64, diff)
		}
	}
}

func fill[T Float](n int, v T) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = v
	}
	return s
}
