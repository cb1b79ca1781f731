package estimator

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestRounding(t *testing.T) {
	tests := []struct {
		name       string
		x          float64
		rate, metr float64
	}{
		{"fast", 11276.687973592701, 11277, 11277},
		{"hundred", 99.96, 100, 99.96},
		{"tens", 12.3456, 12.3, 12.346},
		{"slow", 0.35249, 0.352, 0.35249},
		{"small loss", 0.000123456789, 0.000123, 0.00012346},
		{"large", 1234567.891, 1234568, 1.2346e6},
		{"negative", -0.0123456, -0.0123, -0.012346},
		{"zero", 0, 0, 0},
		{"NaN", math.NaN(), math.NaN(), math.NaN()},
		{"infinite", math.Inf(1), math.Inf(1), math.Inf(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := []float64{roundRate(tt.x), roundMetric(tt.x)}
			if diff := cmp.Diff([]float64{tt.rate, tt.metr}, got, cmpopts.EquateNaNs()); diff != "" {
				t.Errorf("rate, metric of %v (-want +got):\n%s", tt.x, diff)
			}
		})
	}
}
