package optimizers

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFlushes: ftz zeroes subnormals and flushUnder everything below
// squareFloor(c), keeping the sign, and leave other values (infinities and
// NaNs included) as they are; at the floor, c·g·g is a normal number.
func TestFlushes(t *testing.T) {
	type row struct {
		name string
		x    float64
		want float64 // NaN: the same NaN
	}
	for _, c := range []float64{1e-3, 0.1, 1} {
		floor64 := math.Float64frombits(squareFloor(c))
		floor32 := float64(math.Float32frombits(uint32(squareFloor(float32(c)))))
		for _, tc := range []struct {
			dtype string
			floor float64
			tiny  float64 // the smallest normal number
			flush func(x float64) float64
			ftz   func(x float64) float64
		}{
			{"float32", floor32, 0x1p-126,
				func(x float64) float64 { return float64(flushUnder(float32(x), squareFloor(float32(c)))) },
				func(x float64) float64 { return float64(ftz(float32(x))) }},
			{"float64", floor64, 0x1p-1022,
				func(x float64) float64 { return flushUnder(x, squareFloor(c)) },
				func(x float64) float64 { return ftz(x) }},
		} {
			if p := c * tc.floor * tc.floor; p < tc.tiny {
				t.Errorf("%s, c = %v: c·floor² = %v, below the smallest normal %v", tc.dtype, c, p, tc.tiny)
			}
			under := math.Nextafter(tc.floor, 0)
			if tc.dtype == "float32" {
				under = float64(math.Nextafter32(float32(tc.floor), 0))
			}
			rows := []row{
				{"floor", tc.floor, tc.floor},
				{"-floor", -tc.floor, -tc.floor},
				{"under the floor", under, 0},
				{"-under the floor", -under, math.Copysign(0, -1)},
				{"one", 1, 1},
				{"zero", 0, 0},
				{"+Inf", math.Inf(1), math.Inf(1)},
				{"-Inf", math.Inf(-1), math.Inf(-1)},
				{"NaN", math.NaN(), math.NaN()},
			}
			for _, r := range rows {
				got := tc.flush(r.x)
				if !cmp.Equal(got, r.want, cmp.Comparer(sameFloat)) {
					t.Errorf("%s, c = %v: flushUnder(%s = %v) = %v, want %v", tc.dtype, c, r.name, r.x, got, r.want)
				}
			}
			for _, r := range []row{
				{"smallest normal", tc.tiny, tc.tiny},
				{"largest subnormal", math.Nextafter(tc.tiny, 0), 0},
				{"-subnormal", -tc.tiny / 4, math.Copysign(0, -1)},
				{"NaN", math.NaN(), math.NaN()},
			} {
				x := r.x
				if tc.dtype == "float32" && r.name == "largest subnormal" {
					x = float64(math.Nextafter32(float32(tc.tiny), 0))
				}
				if got := tc.ftz(x); !cmp.Equal(got, r.want, cmp.Comparer(sameFloat)) {
					t.Errorf("%s: ftz(%s = %v) = %v, want %v", tc.dtype, r.name, x, got, r.want)
				}
			}
		}
	}
}

// sameFloat: equal bits, so that the zeros' signs count, or both NaN.
func sameFloat(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (math.IsNaN(a) && math.IsNaN(b))
}
