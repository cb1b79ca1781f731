package replicate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSumGradients(t *testing.T) {
	dst := []float64{9, 9}
	if err := sumGradients(dst, []any{[]float64{1, 2}, nil, []float64{3, 4}}, []float64{1, 5, 0.5}, 0, 2); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float64{2.5, 4}, dst); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := sumGradients(dst, []any{[]float32{1, 2}}, []float64{1}, 0, 2); err == nil || !strings.Contains(err.Error(), "tower 0") {
		t.Errorf("dtype mismatch: %v", err)
	}
}
