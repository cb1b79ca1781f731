package layers

import (
	"fmt"
	"sync"

	"golang.org/x/sys/cpu"

	"github.com/towerflow/towerflow/internal/bf16"
	"github.com/towerflow/towerflow/internal/dnnl"
	"github.com/towerflow/towerflow/towers"
)

// Mixed precision (towers.BFloat16): Conv2D's three passes run in oneDNN's
// bfloat16 primitives and Dense's products (forward and gradients) in
// OpenBLAS's cblas_sbgemm, or where the BLAS lacks it in oneDNN's bfloat16
// matrix product, each with float32 inputs rounded to bfloat16 on the way
// in and float32 sums and results; the ops set it through
// towers.MixedPrecision, which the engine calls. Where the CPU or the build
// lacks what a kind of op needs, those ops stay in float32 and say why.

// bf16Caps is what bfloat16 needs, as found on this machine and build.
type bf16Caps struct {
	cpu       bool // AVX512_BF16 by cpuid
	oneDNN    bool // built with oneDNN and UseOneDNN on
	oneDNNISA bool // oneDNN's effective ISA has AVX512_BF16
	sbgemm    bool // the BLAS has cblas_sbgemm
}

// bf16Detect returns this machine's capabilities; tests replace it.
var bf16Detect = func() bf16Caps {
	return bf16Caps{
		cpu:       cpu.X86.HasAVX512BF16,
		oneDNN:    oneDNN.Load(),
		oneDNNISA: dnnl.BF16(),
		sbgemm:    bf16.HasGemm(),
	}
}

// bf16Plan says whether convolutions and matrix products can run in
// bfloat16 with caps, and why not where they cannot.
func bf16Plan(c bf16Caps) (conv, matmul bool, whyConv, whyMatmul string) {
	switch {
	case !dnnl.Built:
		whyConv = "convolutions need oneDNN: " + dnnl.ErrNotBuilt.Error()
	case !c.oneDNN:
		whyConv = "convolutions need oneDNN, turned off by layers.UseOneDNN(false)"
	case !c.oneDNNISA || !c.cpu:
		whyConv = fmt.Sprintf("this CPU lacks AVX512_BF16 for oneDNN's bfloat16 convolutions (cpuid: %t, oneDNN: %t)", c.cpu, c.oneDNNISA)
	default:
		conv = true
	}
	switch {
	case !c.cpu:
		whyMatmul = "this CPU lacks AVX512_BF16 for bfloat16 matrix products"
	case c.sbgemm, conv:
		matmul = true // cblas_sbgemm, else oneDNN's matrix product
	default:
		var noOneDNN string
		switch {
		case !dnnl.Built:
			noOneDNN = dnnl.ErrNotBuilt.Error()
		case !c.oneDNN:
			noOneDNN = "oneDNN is turned off by layers.UseOneDNN(false)"
		default:
			noOneDNN = "oneDNN's effective ISA lacks AVX512_BF16 (ONEDNN_MAX_CPU_ISA can lower it)"
		}
		whyMatmul = "matrix products need OpenBLAS's cblas_sbgemm (-tags openblas, an OpenBLAS built with BUILD_BFLOAT16=1; Debian's 0.3.21 has none) or oneDNN's bfloat16 matrix product, and " + noOneDNN
	}
	return conv, matmul, whyConv, whyMatmul
}

// convPrecision makes a convolution's op a towers.MixedPrecision: bf16
// says it runs in oneDNN's bfloat16 primitives.
type convPrecision struct{ bf16 bool }

// SetPrecision (towers.MixedPrecision): bfloat16 where oneDNN runs and
// the CPU has AVX512_BF16.
func (o *convPrecision) SetPrecision(p towers.Precision) (towers.Precision, string) {
	var got towers.Precision
	var why string
	o.bf16, got, why = setPrecision(p, true)
	return got, why
}

// matMulPrecision makes a matrix product's op a towers.MixedPrecision:
// bf16 says it runs in bfloat16 (gemmPrec).
type matMulPrecision struct{ bf16 bool }

// SetPrecision (towers.MixedPrecision): bfloat16 where the CPU has
// AVX512_BF16 and the BLAS cblas_sbgemm, or oneDNN runs.
func (o *matMulPrecision) SetPrecision(p towers.Precision) (towers.Precision, string) {
	var got towers.Precision
	var why string
	o.bf16, got, why = setPrecision(p, false)
	return got, why
}

// setPrecision is SetPrecision of an op of kind conv (else a matrix
// product): whether it runs in bfloat16, the precision it will use, and
// why not p.
func setPrecision(p towers.Precision, conv bool) (on bool, got towers.Precision, why string) {
	if p != towers.BFloat16 {
		return false, towers.FullPrecision, ""
	}
	c, m, wc, wm := bf16Plan(bf16Detect())
	if conv {
		on, why = c, wc
	} else {
		on, why = m, wm
	}
	if !on {
		return false, towers.FullPrecision, why
	}
	return true, towers.BFloat16, ""
}

// bf16Pool lends the bfloat16 copies of a product's operands.
var bf16Pool = sync.Pool{New: func() any { return new([]uint16) }}

// gemmPrec is gemm, in bfloat16 when bf16On is set, T is float32 and beta
// is 0 (the layers' products): on operands rounded to bfloat16, with
// float32 sums and result, in cblas_sbgemm where the BLAS has it, else in
// oneDNN (the op's SetPrecision checked that one of them runs here).
func gemmPrec[T float](bf16On bool, transA, transB bool, m, n, k int, a, b []T, beta T, c []T) error {
	a32, ok := any(a).([]float32)
	if !bf16On || !ok || m == 0 || n == 0 || k == 0 || beta != 0 {
		gemm(transA, transB, m, n, k, a, b, beta, c)
		return nil
	}
	b32, c32 := any(b).([]float32), any(c).([]float32)
	pa, pb := bf16Pool.Get().(*[]uint16), bf16Pool.Get().(*[]uint16)
	defer bf16Pool.Put(pa)
	defer bf16Pool.Put(pb)
	ab, bb := grow16(pa, len(a)), grow16(pb, len(b))
	if bf16.HasGemm() {
		lda, ldb := k, n
		if transA {
			lda = m
		}
		if transB {
			ldb = k
		}
		bf16.Convert(ab, a32)
		bf16.Convert(bb, b32)
		bf16.Gemm(transA, transB, m, n, k, ab, lda, bb, ldb, float32(beta), c32, n)
		return nil
	}
	// oneDNN's product takes plain row-major operands: a transposed one
	// is transposed while it is rounded.
	if transA {
		bf16.ConvertTransposed(ab, a32, k, m)
	} else {
		bf16.Convert(ab, a32)
	}
	if transB {
		bf16.ConvertTransposed(bb, b32, n, k)
	} else {
		bf16.Convert(bb, b32)
	}
	mm, err := dnnl.LookupMatMul(m, n, k)
	if err != nil {
		return err
	}
	ws := borrow[float32](mm.Workspace())
	defer giveBack(ws)
	return mm.Run(ab, bb, c32, ws)
}

// grow16 returns *p with n elements, growing it when short.
func grow16(p *[]uint16, n int) []uint16 {
	if cap(*p) < n {
		*p = make([]uint16, n)
	}
	return (*p)[:n]
}

// BF16Support says whether, in this build on this CPU, convolutions and
// matrix products run in bfloat16 when asked to (towers.BFloat16, through
// replicate.Config.Precision), and why not where they do not: convolutions
// need oneDNN (-tags dnnl, UseOneDNN on) and AVX512_BF16; matrix products
// AVX512_BF16 and OpenBLAS's cblas_sbgemm (-tags openblas, an OpenBLAS
// built with it), or else oneDNN as convolutions do.
func BF16Support() (conv, matmul bool, whyConv, whyMatmul string) {
	return bf16Plan(bf16Detect())
}
