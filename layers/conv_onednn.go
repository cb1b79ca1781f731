package layers

import (
	"fmt"
	"sync/atomic"

	"github.com/towerflow/towerflow/internal/dnnl"
)

// oneDNN says whether float32 convolutions run in oneDNN: in a build with
// -tags dnnl, unless UseOneDNN(false) turned it off.
var oneDNN atomic.Bool

func init() { oneDNN.Store(dnnl.Built) }

// dnnlChunkBytes bounds the images oneDNN takes at a time: a chunk's input
// and output, plain and reordered. ResNet-20 with two towers, on the
// development VM: 256 KiB and 2 MiB the same, the whole batch at once 10%
// slower (README, Performance). NHWC batches have no reordered copies;
// chunked by the same bound they run as fast as in chunks of 4 images or
// as the whole batch of 64 (ResNet-20's stride-1 passes, float32 and
// bfloat16, one and two at once: go test -tags dnnl -bench Conv
// ./internal/dnnl with Chunk varied), so the bound serves both orders.
const dnnlChunkBytes = 2 << 20

// dnnlChunkImages, when positive, overrides the chunk (tests).
var dnnlChunkImages int

// dnnlChunk returns how many images of g oneDNN takes at a time.
func dnnlChunk(g convGeom) int {
	if dnnlChunkImages > 0 {
		return dnnlChunkImages
	}
	return max(1, dnnlChunkBytes/(8*(g.c*g.h*g.w+g.f*g.ohw())))
}

// UseOneDNN says whether float32 convolutions (Conv2D and its gradients)
// run in oneDNN, in a build with -tags dnnl, where they do by default; it
// is an error to ask for oneDNN in a build without it. float64
// convolutions, and geometries oneDNN has no implementation for, always
// run in this package's own code. Both give the same results up to
// float32 rounding (the order of the sums differs).
func UseOneDNN(on bool) error {
	if on && !dnnl.Built {
		return fmt.Errorf("layers.UseOneDNN: %w", dnnl.ErrNotBuilt)
	}
	oneDNN.Store(on)
	return nil
}

// ConvBackend names what computes float32 convolutions: oneDNN with its
// version, or this package's own code over the BLAS.
func ConvBackend() string {
	if oneDNN.Load() {
		return dnnl.Version()
	}
	return "towerflow (BLAS)"
}

// convOneDNN runs pass p of the convolution g in oneDNN, if it is a
// float32 convolution and oneDNN is on and implements g; done says it ran.
// The backward passes ignore bias and relu (they act on the forward's
// output only), so they share one geometry.
//
// With bf16, the pass runs in bfloat16 (dnnl.Geom's BF16).
func convOneDNN[T float](g convGeom, p dnnl.Pass, bias, relu, bf16 bool, in0, in1, b, out []T) (done bool, err error) {
	if !oneDNN.Load() {
		return false, nil
	}
	a, ok := any(in0).([]float32)
	if !ok {
		return false, nil
	}
	geo := dnnl.Geom{
		N: g.n, C: g.c, H: g.h, W: g.w, F: g.f, KH: g.kh, KW: g.kw,
		SH: g.sh, SW: g.sw, PH: g.ph, PW: g.pw, OH: g.oh, OW: g.ow,
		Chunk: dnnlChunk(g), BF16: bf16, NHWC: g.format == NHWC,
	}
	if p == dnnl.Forward {
		geo.Bias, geo.ReLU = bias, relu
	}
	c, err := dnnl.Lookup(geo)
	if err != nil {
		return false, nil // no oneDNN implementation: this package's own code
	}
	ws := borrow[float32](c.Workspace(p))
	defer giveBack(ws)
	bs, _ := any(b).([]float32)
	return true, c.Run(p, a, any(in1).([]float32), bs, any(out).([]float32), ws)
}
