package vec

import (
	"fmt"
	"testing"
)

// BenchmarkKernels times each loop over rows of ResNet-20's sizes, in
// assembly and in Go, on 64 images' worth of rows (4 MiB per operand in
// the first stage) and on one row alone, whose operands stay in the
// core's cache.
func BenchmarkKernels(b *testing.B) {
	funcs := []struct {
		name  string
		bytes int // per element
		run   func(o, x, y []float32)
	}{
		{"Affine", 8, func(o, x, _ []float32) { Affine(o, x, 0.25, 1.5, -0.75, 0.125, true) }},
		{"SumsAbout", 4, func(_, x, _ []float32) { SumsAbout(x, 0.25) }},
		{"SumAndDotAbout", 8, func(_, x, y []float32) { SumAndDotAbout(x, y, 0.25) }},
		{"Project", 12, func(o, x, _ []float32) { Project(o, x, 1.5, 0.25, -0.5, 0.75) }},
		{"Mask", 12, func(o, x, y []float32) { Mask(o, x, y) }},
		{"Add", 12, func(o, x, y []float32) { Add(o, x, y, true) }},
	}
	for _, f := range funcs {
		for _, total := range []int{1024, 64 * 16 * 1024} {
			x, y, o := make([]float32, total), make([]float32, total), make([]float32, total)
			for i := range x {
				x[i], y[i] = float32(i%7)-3, float32(i%5)-2
			}
			for _, impl := range []string{"avx2", "go"} {
				b.Run(fmt.Sprintf("%s/elems=%d/%s", f.name, total, impl), func(b *testing.B) {
					saved := useAVX2
					useAVX2 = useAVX2 && impl == "avx2"
					defer func() { useAVX2 = saved }()
					b.SetBytes(int64(f.bytes * total))
					for b.Loop() {
						for lo := 0; lo < total; lo += 1024 {
							f.run(o[lo:lo+1024], x[lo:lo+1024], y[lo:lo+1024])
						}
					}
				})
			}
		}
	}
}
