package layers

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMask: the ReLU's gradient passes g where y > 0 and is 0 elsewhere,
// on the values a comparison and a bit trick could disagree on: both
// zeros, the smallest subnormals, infinities and NaNs of either sign.
func TestMask(t *testing.T) {
	nan32, nan64 := float32(math.NaN()), math.NaN()
	tests := []struct {
		y    float64
		pass bool
	}{
		{y: 1, pass: true},
		{y: -1},
		{y: 0},
		{y: math.Copysign(0, -1)},
		{y: math.SmallestNonzeroFloat64, pass: true},
		{y: -math.SmallestNonzeroFloat64},
		{y: math.Inf(1), pass: true},
		{y: math.Inf(-1)},
		{y: math.MaxFloat32, pass: true},
	}
	for _, tt := range tests {
		y32 := float32(tt.y)
		if tt.y == math.SmallestNonzeroFloat64 || tt.y == -math.SmallestNonzeroFloat64 {
			y32 = float32(math.Copysign(math.SmallestNonzeroFloat32, tt.y))
		}
		want32, want64 := float32(0), 0.0
		if tt.pass {
			want32, want64 = 3, 3
		}
		o32, o64 := []float32{7}, []float64{7}
		mask(o32, []float32{y32}, []float32{3})
		mask(o64, []float64{tt.y}, []float64{3})
		if diff := cmp.Diff([]float32{want32}, o32); diff != "" {
			t.Errorf("float32 y = %v: (-want +got)\n%s", y32, diff)
		}
		if diff := cmp.Diff([]float64{want64}, o64); diff != "" {
			t.Errorf("float64 y = %v: (-want +got)\n%s", tt.y, diff)
		}
	}
	// A NaN passes g when its sign bit is clear (y's bits as an integer
	// are positive), as documented.
	o32, o64 := make([]float32, 2), make([]float64, 2)
	mask(o32, []float32{nan32, -nan32}, []float32{3, 3})
	mask(o64, []float64{nan64, -nan64}, []float64{3, 3})
	if math.Signbit(float64(nan32)) || math.Signbit(nan64) {
		o32[0], o32[1], o64[0], o64[1] = o32[1], o32[0], o64[1], o64[0]
	}
	if diff := cmp.Diff([]float32{3, 0}, o32); diff != "" {
		t.Errorf("float32 NaNs: (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff([]float64{3, 0}, o64); diff != "" {
		t.Errorf("float64 NaNs: (-want +got)\n%s", diff)
	}
}
