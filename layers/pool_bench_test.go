package layers

import (
	"fmt"
	"testing"

	"gorgonia.org/tensor"
)

// BenchmarkGlobalAvgPool times the global average pooling before
// ResNet-20's classifier, forward and backward, float32, on one tower's
// share of a batch (64 images of 64 channels of 8×8), channels first and
// channels last. Its MB/s is the input tensor's bytes per second.
func BenchmarkGlobalAvgPool(b *testing.B) {
	const n, c, hw = 64, 64, 8
	for _, f := range []Format{NCHW, NHWC} {
		geo := avgPoolGeom{n: n, c: c, h: hw, w: hw, kh: hw, kw: hw, sh: 1, sw: 1, oh: 1, ow: 1, global: true, f: f}
		x := tensor.New(tensor.WithShape(geo.in()...), tensor.WithBacking(make([]float32, n*c*hw*hw)))
		dy := tensor.New(tensor.WithShape(n, c), tensor.WithBacking(make([]float32, n*c)))
		fwd, grad := &avgPoolOp{geo: geo}, &avgPoolGradOp{geo: geo}
		for _, pass := range []struct {
			name string
			run  func() error
		}{
			{"forward", func() error { _, err := fwd.Do(x); return err }},
			{"backward", func() error { _, err := grad.Do(dy); return err }},
		} {
			b.Run(fmt.Sprintf("%s/%v", pass.name, f), func(b *testing.B) {
				b.SetBytes(4 * n * c * hw * hw)
				for b.Loop() {
					if err := pass.run(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
