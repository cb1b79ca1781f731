package towers_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/towers"
)

// TestTruncatedNormal: every draw lies within two standard deviations of
// the mean, and the draws have the truncated normal's mean and standard
// deviation (stddev·0.8796 for a normal cut at ±2σ).
func TestTruncatedNormal(t *testing.T) {
	const mean, stddev = 1.0, 0.5
	vals := make([]float32, 100000)
	if err := towers.TruncatedNormal(mean, stddev)(rand.New(rand.NewPCG(3, 4)), tensor.Float32, tensor.Shape{len(vals)}, vals); err != nil {
		t.Fatal(err)
	}
	var sum, ss float64
	for i, v := range vals {
		if math.Abs(float64(v)-mean) > 2*stddev+1e-6 {
			t.Fatalf("draw %d is %v, beyond two standard deviations of %v", i, v, mean)
		}
		sum += float64(v)
	}
	m := sum / float64(len(vals))
	for _, v := range vals {
		ss += (float64(v) - m) * (float64(v) - m)
	}
	got := []float64{m, math.Sqrt(ss / float64(len(vals)))}
	if diff := cmp.Diff([]float64{mean, stddev * 0.8796}, got, cmpopts.EquateApprox(0.01, 0)); diff != "" {
		t.Errorf("mean and standard deviation (-want +got):\n%s", diff)
	}
}
