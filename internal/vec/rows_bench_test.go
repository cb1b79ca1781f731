package vec

import (
	"fmt"
	"testing"
)

// BenchmarkRows times each channels-last loop against its per-plane twin
// on the same number of values: ResNet-20's first stage for one tower (64
// images of 16 channels of 32×32, 4 MiB per operand) and 1024 values, in
// the core's cache; the planes are 1024 values, the rows 16 channels.
func BenchmarkRows(b *testing.B) {
	const c = 16
	m := make([]float32, c)
	for i := range m {
		m[i] = 0.25
	}
	s, ss := make([]float32, c), make([]float32, c)
	funcs := []struct {
		name        string
		bytes       int
		plane, rows func(o, x, y []float32)
	}{
		{"Affine", 8,
			func(o, x, _ []float32) { Affine(o, x, 0.25, 1.5, -0.75, 0.125, true) },
			func(o, x, _ []float32) { AffineRows(o, x, m, m, m, m, true) }},
		{"SumsAbout", 4,
			func(_, x, _ []float32) { SumsAbout(x, 0.25) },
			func(_, x, _ []float32) { SumsAboutRows(x, m, s, ss) }},
		{"SumAndDotAbout", 8,
			func(_, x, y []float32) { SumAndDotAbout(x, y, 0.25) },
			func(_, x, y []float32) { SumAndDotAboutRows(x, y, m, s, ss) }},
		{"Project", 12,
			func(o, x, _ []float32) { Project(o, x, 1.5, 0.25, -0.5, 0.75) },
			func(o, x, _ []float32) { ProjectRows(o, x, m, m, m, m) }},
	}
	for _, f := range funcs {
		for _, total := range []int{1024, 64 * c * 1024} {
			x, y, o := make([]float32, total), make([]float32, total), make([]float32, total)
			for i := range x {
				x[i], y[i] = float32(i%7)-3, float32(i%5)-2
			}
			b.Run(fmt.Sprintf("%s/elems=%d/planes", f.name, total), func(b *testing.B) {
				b.SetBytes(int64(f.bytes * total))
				for b.Loop() {
					for lo := 0; lo < total; lo += 1024 {
						f.plane(o[lo:lo+1024], x[lo:lo+1024], y[lo:lo+1024])
					}
				}
			})
			b.Run(fmt.Sprintf("%s/elems=%d/rows", f.name, total), func(b *testing.B) {
				b.SetBytes(int64(f.bytes * total))
				for b.Loop() {
					f.rows(o, x, y)
				}
			})
		}
	}
}
