// Package dnnl runs towerflow's float32 convolutions in oneDNN (Intel's
// deep-learning kernels, Debian's libdnnl-dev) when towerflow is built with
// -tags dnnl; without the tag it is a stub that says so, and package layers
// computes every convolution itself.
//
// A convolution's three passes (forward, the input's gradient, the
// kernel's gradient) take and return the plain row-major layouts the rest
// of towerflow uses (NCHW or NHWC batches, OIHW kernels). Each run
// reorders an NCHW batch into the blocked layout oneDNN's fastest kernels
// want (nChw16c on AVX-512) and its result back, and the kernel into its
// own, in a workspace the caller lends, so primitives are shared by every
// tower and hold no memory of their own between runs; an NHWC batch is
// computed on in place (Geom.NHWC), with no reorder in float32. oneDNN runs each pass on the calling thread alone: towers
// are what use the cores. A geometry with BF16 set runs in bfloat16 with
// float32 sums (mixed precision), on CPUs where BF16 reports that oneDNN
// has native kernels for it; MatMul is a bfloat16 matrix product of the
// same kind, for package layers' products where the BLAS has none. A
// forward or input gradient pass run with RunShared is open to other
// threads (Share.Help) while it runs: each takes the next chunk of images
// no one has taken, which is how a tower waiting for a late one computes
// part of the late one's convolution.
package dnnl

import "errors"

// ErrNotBuilt is the error of asking for oneDNN in a build without it.
var ErrNotBuilt = errors.New("towerflow was built without oneDNN (build with -tags dnnl; Debian: apt-get install libdnnl-dev)")

// Geom is one convolution: the input's N, C, H, W; the kernel's F, KH, KW;
// stride and zero padding; the output's OH, OW; whether the forward pass
// adds a bias (shape F) and applies a ReLU; how many images oneDNN takes
// at a time (Chunk, at least 1): the batch goes through a chunk at a time,
// so that a chunk's reordered copies stay in cache; BF16, whether each
// pass computes in bfloat16 (see BF16); and NHWC, the images' order.
type Geom struct {
	N, C, H, W, F, KH, KW, SH, SW, PH, PW, OH, OW int
	Bias, ReLU                                    bool
	Chunk                                         int
	// NHWC says the images (the input, the output and their gradients)
	// are (N, H, W, C) and (N, OH, OW, F) rather than NCHW; the kernel
	// is (F, C, KH, KW) either way. oneDNN computes on NHWC images in
	// place, with no reorder in float32 (a bfloat16 pass still converts
	// its inputs' data type).
	NHWC bool
	// BF16 makes each pass round its two inputs to bfloat16 (to nearest,
	// ties to even, as bf16.FromFloat32 does, bit for bit, in the
	// primitive's layout; where that layout is padded, oneDNN's reorder
	// does it, flushing float32 subnormals to zero) and multiply them in
	// bfloat16 (oneDNN's products treat bfloat16 subnormals as zero),
	// summing the products and writing its output in float32: the
	// caller's arrays stay float32. The bias is added in float32.
	BF16 bool
}

// Pass is one of a convolution's passes.
type Pass int

// The passes: with (in0, in1) = (x, kernel) Forward sets out to the
// convolution of x (plus bias, ReLU); with (dy, kernel) InputGrad sets out
// to the gradient of x; with (x, dy) KernelGrad sets out to the kernel's.
const (
	Forward Pass = iota
	InputGrad
	KernelGrad
)

func (p Pass) String() string {
	switch p {
	case Forward:
		return "forward"
	case InputGrad:
		return "input gradient"
	case KernelGrad:
		return "kernel gradient"
	}
	return "pass?"
}
