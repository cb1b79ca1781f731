//go:build dnnl

package dnnl

import (
	"fmt"
	"testing"
)

// BenchmarkConv times the three passes on ResNet-20's stride-1 shapes (a
// tower's 64 CIFAR-10 images), reorders included, in useful GFLOP/s, in
// float32 and, where oneDNN has native kernels for it, bfloat16
// (Geom.BF16), on NCHW and NHWC batches (Geom.NHWC), e.g.
// f32/nhwc/16x32x32/forward; with -cpu 2 two goroutines run them at once,
// as two towers do.
func BenchmarkConv(b *testing.B) {
	for _, s := range []struct{ c, hw int }{{16, 32}, {32, 16}, {64, 8}} {
		for _, bf16 := range []bool{false, true} {
			if bf16 && !BF16() {
				continue
			}
			for _, nhwc := range []bool{false, true} {
				benchConv(b, s.c, s.hw, bf16, nhwc)
			}
		}
	}
}

func benchConv(b *testing.B, ch, hw int, bf16, nhwc bool) {
	g := Geom{N: 64, C: ch, H: hw, W: hw, F: ch, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, OH: hw, OW: hw, Chunk: 4, BF16: bf16, NHWC: nhwc}
	c, err := Lookup(g)
	if err != nil {
		b.Fatal(err)
	}
	prec := map[bool]string{false: "f32", true: "bf16"}[bf16]
	order := map[bool]string{false: "nchw", true: "nhwc"}[nhwc]
	for _, p := range []Pass{Forward, InputGrad, KernelGrad} {
		b.Run(fmt.Sprintf("%s/%s/%dx%dx%d/%v", prec, order, ch, hw, hw, p), func(b *testing.B) {
			n := g.sizes(p)
			b.RunParallel(func(pb *testing.PB) {
				in0, in1, out := make([]float32, n[0]), make([]float32, n[1]), make([]float32, n[2])
				ws := make([]float32, c.Workspace(p))
				for pb.Next() {
					if err := c.Run(p, in0, in1, nil, out, ws); err != nil {
						b.Error(err)
						return
					}
				}
			})
			flops := 2.0 * float64(g.N*g.F*g.C*g.KH*g.KW*g.OH*g.OW)
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
