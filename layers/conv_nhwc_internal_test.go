package layers

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTransposeImages: every element of every image lands at its
// transposed place, for tall, wide and square images, several tiles and
// blocks long and with partial ones, in float32 and float64 (whose blocks
// differ).
func TestTransposeImages(t *testing.T) {
	for _, s := range []struct{ n, rows, cols int }{
		{1, 1, 1}, {3, 1024, 16}, {3, 16, 1024}, {2, 1000, 3}, {2, 3, 1000}, {2, 64, 64},
		{2, 33, 65}, {2, 65, 33}, {1, 4097, 5}, {1, 5, 4097}, {4, 7, 1},
		{2, 4, 0}, {2, 0, 4}, {0, 3, 3}, // empty images, or none
	} {
		t.Run(fmt.Sprintf("%dx%dx%d", s.n, s.rows, s.cols), func(t *testing.T) {
			transposeCheck[float32](t, s.n, s.rows, s.cols)
			transposeCheck[float64](t, s.n, s.rows, s.cols)
		})
	}
}

func transposeCheck[T float](t *testing.T, n, rows, cols int) {
	t.Helper()
	per := rows * cols
	src, want, got := make([]T, n*per), make([]T, n*per), make([]T, n*per)
	for i := range src {
		src[i] = T(i)
	}
	for i := range n {
		for r := range rows {
			for c := range cols {
				want[i*per+c*rows+r] = src[i*per+r*cols+c]
			}
		}
	}
	transposeImages(got, src, n, rows, cols)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%T (-want +got):\n%s", src, diff)
	}
}
