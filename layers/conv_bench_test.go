package layers

import (
	"fmt"
	"testing"
)

// BenchmarkConv times the three products of ResNet-20's stride-1
// convolutions on CIFAR-10 (batch 64, a tower's half of 128), stage by
// stage, and reports their useful GFLOP/s (2·N·F·C·KH·KW·OH·OW a pass).
//
//	go test -tags openblas -run - -bench Conv ./layers
func BenchmarkConv(b *testing.B) {
	for _, s := range []struct{ c, f, hw int }{{3, 16, 32}, {16, 16, 32}, {32, 32, 16}, {64, 64, 8}} {
		g, err := newConvGeom([]int{64, s.c, s.hw, s.hw}, []int{s.f, s.c, 3, 3}, Conv{Padding: [2]int{1, 1}})
		if err != nil {
			b.Fatal(err)
		}
		x := make([]float32, g.n*g.c*g.h*g.w)
		k := make([]float32, g.f*g.ckk())
		y := make([]float32, g.n*g.f*g.ohw())
		for i := range x {
			x[i] = float32(i%13) - 6
		}
		for i := range k {
			k[i] = float32(i%7) - 3
		}
		for i := range y {
			y[i] = float32(i%5) - 2
		}
		flops := 2 * float64(g.n*g.f*g.ckk()*g.ohw())
		for _, p := range []struct {
			name string
			run  func()
		}{
			{"forward", func() { convTaps(g, x, k, nil, y, false) }},
			{"kernel", func() { convTapsKernelGrad(g, x, y, k) }},
			{"input", func() { convTapsInputGrad(g, k, y, x) }},
		} {
			b.Run(fmt.Sprintf("%dx%dx%d→%d/%s", s.c, s.hw, s.hw, s.f, p.name), func(b *testing.B) {
				for range b.N {
					p.run()
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
