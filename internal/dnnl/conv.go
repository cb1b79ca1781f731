//go:build dnnl

package dnnl

/*
#cgo LDFLAGS: -ldnnl -lgomp
#include "conv.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// Built says whether towerflow was built with oneDNN.
const Built = true

var version = sync.OnceValue(func() string { return C.GoString(C.tf_version()) })

// Version names the oneDNN library and its CPU runtime.
func Version() string { return version() }

var bf16 = sync.OnceValue(func() bool { return C.tf_bf16() != 0 })

// BF16 says whether oneDNN has native bfloat16 convolutions on this CPU:
// its effective instruction set (dnnl_get_effective_cpu_isa, which
// ONEDNN_MAX_CPU_ISA can lower) includes AVX512_BF16. Elsewhere oneDNN
// would run bfloat16 geometries in slow reference code.
func BF16() bool { return bf16() }

// avx512 says whether oneDNN's effective instruction set includes
// AVX-512 (avx512_core).
var avx512 = sync.OnceValue(func() bool { return C.tf_avx512() != 0 })

// Conv is a convolution's oneDNN primitives, made once per geometry and
// kept for the life of the process (a model has a handful of geometries).
type Conv struct {
	g Geom
	c *C.tf_conv
}

var cache struct {
	sync.Mutex
	convs map[Geom]made
}

// made is what Lookup made of a geometry: its primitives, or why none.
type made struct {
	c   *Conv
	err error
}

// Lookup returns the primitives of geometry g, making them on first use;
// a geometry oneDNN has no implementation for is an error, every time.
func Lookup(g Geom) (*Conv, error) {
	cache.Lock()
	defer cache.Unlock()
	if m, ok := cache.convs[g]; ok {
		return m.c, m.err
	}
	if cache.convs == nil {
		cache.convs = map[Geom]made{}
	}
	c, err := create(g, false)
	cache.convs[g] = made{c, err}
	return c, err
}

// create makes g's primitives. oneStep makes a bfloat16 pass convert each
// input into the primitive's layout in one oneDNN reorder, layout and data
// type at once, instead of the faster two (see conv.c's arg): the
// conversion the tests hold the two-step one to, bit for bit.
func create(g Geom, oneStep bool) (*Conv, error) {
	cg := C.tf_geom{
		n: C.long(g.N), c: C.long(g.C), h: C.long(g.H), w: C.long(g.W),
		f: C.long(g.F), kh: C.long(g.KH), kw: C.long(g.KW),
		sh: C.long(g.SH), sw: C.long(g.SW), ph: C.long(g.PH), pw: C.long(g.PW),
		oh: C.long(g.OH), ow: C.long(g.OW), chunk: C.long(g.Chunk),
	}
	if g.Bias {
		cg.bias = 1
	}
	if g.ReLU {
		cg.relu = 1
	}
	if g.BF16 {
		cg.bf16 = 1
	}
	if g.NHWC {
		cg.nhwc = 1
	}
	if oneStep {
		cg.one_step = 1
	}
	var c *C.tf_conv
	var step *C.char
	if s := C.tf_conv_create(&cg, &c, &step); s != 0 {
		return nil, fmt.Errorf("oneDNN convolution %+v: %s: %s", g, C.GoString(step), status(s))
	}
	return &Conv{g: g, c: c}, nil
}

// Workspace returns the float32 elements Run needs in its workspace for
// pass p.
func (c *Conv) Workspace(p Pass) int {
	return int((C.tf_conv_workspace(c.c, C.int(p)) + 3) / 4)
}

// Impl names the oneDNN implementation that runs pass p, e.g.
// "jit:avx512_core".
func (c *Conv) Impl(p Pass) string { return C.GoString(C.tf_conv_impl(c.c, C.int(p))) }

// Run runs pass p (see Pass) with the workspace ws, at least Workspace(p)
// elements; bias is read by the forward pass of a geometry with a bias.
func (c *Conv) Run(p Pass, in0, in1, bias, out, ws []float32) error {
	if err := c.check(p, in0, in1, bias, out, ws); err != nil {
		return err
	}
	var step *C.char
	s := C.tf_conv_run(c.c, C.int(p), ptr(in0), ptr(in1), c.bias(p, bias), ptr(out), unsafe.Pointer(&ws[0]), &step)
	return c.failed(p, s, step)
}

// bias returns the bias pass p reads: nil but in the forward pass of a
// geometry with a bias.
func (c *Conv) bias(p Pass, bias []float32) *C.float {
	if p == Forward && c.g.Bias {
		return ptr(bias)
	}
	return nil
}

// failed returns the error of pass p's status s, failed at step; nil for
// success.
func (c *Conv) failed(p Pass, s C.int, step *C.char) error {
	if s == 0 {
		return nil
	}
	return fmt.Errorf("oneDNN convolution %+v, %v: %s: %s", c.g, p, C.GoString(step), status(s))
}

// reorderImpl names the oneDNN implementation that reorders input arg (0
// or 1) of pass p into the primitive's layout: "" where it needs none.
func (c *Conv) reorderImpl(p Pass, arg int) string {
	return C.GoString(C.tf_conv_reorder_impl(c.c, C.int(p), C.int(arg)))
}

func ptr(s []float32) *C.float { return (*C.float)(unsafe.Pointer(&s[0])) }

// status names a dnnl_status_t.
func status(s C.int) string {
	names := map[C.int]string{
		1: "out of memory", 2: "invalid arguments", 3: "unimplemented",
		4: "iterator ends", 5: "runtime error", 6: "not required",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("status %d", int(s))
}

// convertImpl names what converts input arg (0 or 1) of pass p to
// bfloat16: convertOurs where toBF16's C side does, the oneDNN reorder's
// implementation where oneDNN does, "" where the input is not converted.
func (c *Conv) convertImpl(p Pass, arg int) string {
	return C.GoString(C.tf_conv_convert_impl(c.c, C.int(p), C.int(arg)))
}

// convertOurs is convertImpl's name for towerflow's own conversion.
const convertOurs = C.TF_CONVERT_IMPL

// toBF16 sets dst[i] to src[i] rounded to bfloat16, for i < len(src), with
// the conversion a bfloat16 pass uses on dense inputs (bf16.FromFloat32's
// rounding, bit for bit); dst must be at least as long as src.
func toBF16(dst []uint16, src []float32) {
	if len(src) == 0 {
		return
	}
	dst = dst[:len(src)]
	C.tf_f32_to_bf16((*C.uint16_t)(unsafe.Pointer(&dst[0])), ptr(src), C.long(len(src)))
}
