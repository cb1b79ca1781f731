package layers

import (
	"fmt"
	"sync/atomic"

	"github.com/towerflow/towerflow/internal/dnnl"
	"github.com/towerflow/towerflow/towers"
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

// noSharing turns sharing off (ShareConvolutions).
var noSharing atomic.Bool

// ShareConvolutions says whether a convolution in oneDNN a tower runs
// while another tower waits for it at a rendezvous (a synchronized batch
// normalization's) takes the waiting tower's help: it does by default
// (towers.Board). The results are the same bits either way; turning it off
// is for measuring what it gives (towerbench -alternate share).
func ShareConvolutions(on bool) { noSharing.Store(!on) }

// SharesConvolutions reports ShareConvolutions' setting.
func SharesConvolutions() bool { return !noSharing.Load() }

// convSharing makes a convolution's op a towers.Sharing: once the engine
// has given it its build's board, the op posts its oneDNN runs there for
// the towers that wait for this one (dnnl.Share).
type convSharing struct {
	board *towers.Board
	tower int
	share *dnnl.Share
	post  towers.Posting // of this op
}

// ShareOn (towers.Sharing): post oneDNN runs on b as tower.
func (o *convSharing) ShareOn(b *towers.Board, tower int) {
	o.board, o.tower = b, tower
	if o.share == nil {
		o.share = dnnl.NewShare()
	}
	o.post.Helper = o
}

// Help (towers.Helper): run chunks of the pass this op is running, with
// workspaces from the scratch buffers.
func (o *convSharing) Help() bool {
	return o.share.Help(borrow[float32], func(ws []float32) { giveBack(ws) })
}

// run runs pass p of c, open to the other towers' help when the op shares
// its runs (which a kernel gradient's op never does, and RunShared would
// not open).
func (o *convSharing) run(c *dnnl.Conv, p dnnl.Pass, in0, in1, b, out, ws []float32) error {
	if o == nil || o.board == nil || o.share == nil || noSharing.Load() {
		return c.Run(p, in0, in1, b, out, ws)
	}
	o.board.Post(o.tower, &o.post)
	defer o.board.Post(o.tower, nil)
	return c.RunShared(o.share, p, in0, in1, b, out, ws)
}

// convOneDNN runs pass p of the convolution g in oneDNN, if it is a
// float32 convolution and oneDNN is on and implements g; done says it ran.
// The backward passes ignore bias and relu (they act on the forward's
// output only), so they share one geometry. sh, if not nil, opens the run
// to the other towers (convSharing).
//
// With bf16, the pass runs in bfloat16 (dnnl.Geom's BF16).
func convOneDNN[T float](g convGeom, p dnnl.Pass, bias, relu, bf16 bool, sh *convSharing, in0, in1, b, out []T) (done bool, err error) {
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
	return true, sh.run(c, p, a, any(in1).([]float32), bs, any(out).([]float32), ws)
}
