package layers

import (
	"fmt"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// BenchmarkBatchNorm times batch normalization's forward op (statistics
// and output) and input gradient in training with the fused ReLU, float32,
// on one tower's share of ResNet-20's batches (64 images) at each stage's
// channels and size, channels first and channels last: the same values in
// the two orders. Its MB/s is the input tensor's bytes per second.
func BenchmarkBatchNorm(b *testing.B) {
	for _, st := range []struct{ c, hw int }{{16, 32}, {32, 16}, {64, 8}} {
		const n = 64
		size := n * st.c * st.hw * st.hw
		vals := make([]float32, size)
		for i := range vals {
			vals[i] = float32(i%13)*0.25 - 1
		}
		for _, f := range []Format{NCHW, NHWC} {
			shape := f.shape(n, st.c, st.hw, st.hw)
			bn := &batchNorm{name: "bn", training: true, eps: 1e-3, act: ReLU, dims: 4, last: f == NHWC}
			x := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float32(nil), vals...)))
			g := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float32(nil), vals...)))
			param := func(v float32) *tensor.Dense {
				p := make([]float32, st.c)
				for i := range p {
					p[i] = v
				}
				return tensor.New(tensor.WithShape(st.c), tensor.WithBacking(p))
			}
			gamma, beta, mean := param(1.5), param(0.25), param(0.5)
			fwd := &batchNormOp{bn: bn}
			y, err := fwd.Do(x, gamma, beta, mean)
			if err != nil {
				b.Fatal(err)
			}
			grad := &batchNormGradOp{bn: bn, which: gradX}
			for _, pass := range []struct {
				name string
				run  func() (G.Value, error)
			}{
				{"forward", func() (G.Value, error) { return fwd.Do(x, gamma, beta, mean) }},
				{"backward", func() (G.Value, error) { return grad.Do(y, g, gamma, x) }},
			} {
				b.Run(fmt.Sprintf("c=%d/hw=%d/%s/%v", st.c, st.hw, pass.name, f), func(b *testing.B) {
					b.SetBytes(int64(4 * size))
					for b.Loop() {
						if _, err := pass.run(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
