package layers

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/bf16"
	"github.com/towerflow/towerflow/internal/dnnl"
	"github.com/towerflow/towerflow/towers"
)

// The bfloat16 tolerance. bfloat16 keeps 8 significant bits, so rounding
// to it changes a value by a factor (1+δ), |δ| ≤ u = 2⁻⁸; a product of two
// rounded inputs by at most 2u + u². A sum of n such products, accumulated
// in float32 (unit roundoff 2⁻²⁴), is then within
//
//	(2u + u² + n·2⁻²³) · Σ|a_i·b_i|
//
// of the float32 inputs' exact sum (n·2⁻²³ is twice the first-order bound
// n·2⁻²⁴ of float32 summation, for the order oneDNN and the BLAS choose).
// Against the exact sum of the rounded inputs only the float32 summation
// remains: n·2⁻²³ · Σ|a_i·b_i|. Both are checked element by element, with
// Σ|a_i·b_i| computed in float64.
const bf16U = 1.0 / 256

// withinBF16 describes the elements of got that are further than
// tol·abs[i] from want (at most 5), "" if none.
func withinBF16(got []float32, want, abs []float64, tol float64) string {
	var bad []string
	for i := range got {
		if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol*abs[i]+1e-30) && len(bad) < 5 {
			bad = append(bad, fmt.Sprintf("[%d] got %g, want %g ± %.3g", i, got[i], want[i], tol*abs[i]))
		}
	}
	return strings.Join(bad, "; ")
}

// roundAll returns s's float32 values rounded to bfloat16, and s's float32
// values, both in float64.
func roundAll(s []float64) (rounded, f32 []float64) {
	rounded, f32 = make([]float64, len(s)), make([]float64, len(s))
	for i, v := range s {
		f32[i] = float64(float32(v))
		rounded[i] = float64(bf16.Round(float32(v)))
	}
	return rounded, f32
}

func absAll(s []float64) []float64 {
	a := make([]float64, len(s))
	for i, v := range s {
		a[i] = math.Abs(v)
	}
	return a
}

// TestBF16ConvAgainstFloat32 (built with -tags dnnl, on a CPU with
// AVX512_BF16): the three passes of a bfloat16 convolution, as Conv2D
// calls them, equal the exact sums of their inputs rounded to bfloat16
// (bf16.Round: oneDNN rounds as it does) to float32 summation's precision,
// and the float32 inputs' exact sums within the bfloat16 tolerance above,
// for ResNet-20's geometries and random ones, whole and in chunks, on NCHW
// and NHWC batches.
func TestBF16ConvAgainstFloat32(t *testing.T) {
	if !dnnl.Built || !dnnl.BF16() {
		t.Skipf("needs oneDNN (-tags dnnl: %t) with AVX512_BF16 (%t)", dnnl.Built, dnnl.BF16())
	}
	type geometry struct {
		n, c, h, f, k, stride, pad int
		bias, relu                 bool
	}
	geoms := []geometry{
		{4, 3, 32, 16, 3, 1, 1, false, false},
		{4, 16, 32, 16, 3, 1, 1, true, true},
		{4, 16, 32, 32, 3, 2, 1, false, false},
		{4, 16, 32, 32, 1, 2, 0, false, false},
		{4, 64, 8, 64, 3, 1, 1, true, false},
		{7, 1, 8, 8, 3, 1, 1, true, true}, // one input channel
		{4, 1, 8, 8, 3, 1, 1, true, true},
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 12 {
		k := 1 + rng.IntN(5)
		geoms = append(geoms, geometry{1 + rng.IntN(4), 1 + rng.IntN(20), k + rng.IntN(12), 1 + rng.IntN(20), k,
			1 + rng.IntN(3), rng.IntN(min(k, 4)), rng.IntN(2) == 0, rng.IntN(2) == 0})
	}
	// oneDNN's own kernels, not its reference code, run them.
	c, err := dnnl.Lookup(dnnl.Geom{N: 4, C: 16, H: 32, W: 32, F: 16, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, OH: 32, OW: 32, Chunk: 4, BF16: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []dnnl.Pass{dnnl.Forward, dnnl.InputGrad, dnnl.KernelGrad} {
		if impl := c.Impl(p); !strings.Contains(impl, "bf16") || strings.HasPrefix(impl, "ref") {
			t.Errorf("ResNet-20's 16-channel convolution in bfloat16, %v: implementation %q, want oneDNN's bf16 kernels", p, impl)
		}
	}
	defer func(n int) { dnnlChunkImages = n }(dnnlChunkImages)
	for i, ge := range geoms {
		dnnlChunkImages = 0
		if i%3 == 1 {
			ge.n += 3
			dnnlChunkImages = 1 + i%4
		}
		g, err := newConvGeom(tensor.Shape{ge.n, ge.c, ge.h, ge.h + i%3}, tensor.Shape{ge.f, ge.c, ge.k, ge.k},
			Conv{Stride: [2]int{ge.stride, ge.stride}, Padding: [2]int{ge.pad, ge.pad}})
		if err != nil {
			t.Fatal(err)
		}
		x, k, dz, b := randoms(rng, g.n*g.c*g.h*g.w), randoms(rng, g.f*g.ckk()), randoms(rng, g.n*g.f*g.ohw()), randoms(rng, g.f)
		xr, x32 := roundAll(x)
		kr, k32 := roundAll(k)
		dzr, dz32 := roundAll(dz)
		_, b32 := roundAll(b)
		yR, dkR, dxR := directConv(g, xr, kr, dzr)
		y32, dk32, dx32 := directConv(g, x32, k32, dz32)
		yA, dkA, dxA := directConv(g, absAll(x32), absAll(k32), absAll(dz32))
		// The bias is added in float32 after the sum, the ReLU clips: both
		// keep the sums' error bounds; the bias's own rounding is in abs.
		for j := range yR {
			if ge.bias {
				bj := b32[j/g.ohw()%g.f]
				yR[j] += bj
				y32[j] += bj
				yA[j] += math.Abs(bj)
			}
			if ge.relu {
				yR[j], y32[j] = max(yR[j], 0), max(y32[j], 0)
			}
		}
		var bias []float32
		if ge.bias {
			bias = float32s(b)
		}
		for _, f := range []Format{NCHW, NHWC} {
			g := g.withFormat(f)
			// The input's and the output's images, and their gradients.
			in := func(s []float64) []float64 { return g.images(s, g.c, g.h, g.w) }
			out := func(s []float64) []float64 { return g.images(s, g.f, g.oh, g.ow) }
			for _, r := range []struct {
				pass          dnnl.Pass
				in0, in1      []float64
				rounded, want []float64
				abs           []float64
				terms         int
			}{
				{dnnl.Forward, in(x32), k32, out(yR), out(y32), out(yA), g.ckk() + 1},
				{dnnl.InputGrad, out(dz32), k32, in(dxR), in(dx32), in(dxA), g.f * g.kh * g.kw},
				{dnnl.KernelGrad, in(x32), out(dz32), dkR, dk32, dkA, g.n * g.ohw()},
			} {
				poisonScratch32()
				got := make([]float32, len(r.want))
				for j := range got {
					got[j] = float32(math.NaN())
				}
				done, err := convOneDNN(g, r.pass, ge.bias, ge.relu, true, nil, float32s(r.in0), float32s(r.in1), bias, got)
				if !done || err != nil {
					t.Fatalf("%v, %v: ran in oneDNN %t, error %v", g, r.pass, done, err)
				}
				sum := float64(r.terms) / (1 << 23)
				if bad := withinBF16(got, r.rounded, r.abs, sum); bad != "" {
					t.Errorf("%v (bias %t, ReLU %t, %d a chunk), %v: not the sums of the bfloat16-rounded inputs: %s", g, ge.bias, ge.relu, dnnlChunk(g), r.pass, bad)
				}
				if bad := withinBF16(got, r.want, r.abs, 2*bf16U+bf16U*bf16U+sum); bad != "" {
					t.Errorf("%v (bias %t, ReLU %t, %d a chunk), %v: beyond bfloat16's tolerance of the float32 sums: %s", g, ge.bias, ge.relu, dnnlChunk(g), r.pass, bad)
				}
			}
		}
	}
}

// TestBF16MatMulAgainstFloat32 (where the BLAS has cblas_sbgemm, or
// oneDNN runs bfloat16: whichever gemmPrec takes): Dense's
// product and its two gradient products, in bfloat16, equal the exact
// products of the inputs rounded to bfloat16 to float32 summation's
// precision, and the float32 inputs' products within the bfloat16
// tolerance, for every transpose.
func TestBF16MatMulAgainstFloat32(t *testing.T) {
	if _, ok, _, why := BF16Support(); !ok {
		t.Skip(why)
	}
	if !bf16.HasGemm() { // oneDNN's own kernels, not its reference code
		mm, err := dnnl.LookupMatMul(50, 10, 128)
		if err != nil {
			t.Fatal(err)
		}
		if impl := mm.Impl(); !strings.Contains(impl, "bf16") || strings.HasPrefix(impl, "ref") {
			t.Errorf("oneDNN's bfloat16 matrix product: implementation %q, want its bf16 kernels", impl)
		}
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []struct {
		m, n, k        int
		transA, transB bool
	}{
		{50, 10, 128, false, false}, // Dense's forward
		{50, 128, 10, false, true},  // its input's gradient dz·kernelᵀ
		{128, 10, 50, true, false},  // its kernel's gradient xᵀ·dz
		{7, 9, 333, true, true},
		{1, 1, 1, false, false},
	} {
		a := randoms(rng, tc.m*tc.k)
		b := randoms(rng, tc.k*tc.n)
		ar, a32 := roundAll(a)
		br, b32 := roundAll(b)
		at := func(s []float64, trans bool, cols, i, j int) float64 { // op(s)[i][j], s with cols columns
			if trans {
				return s[j*cols+i]
			}
			return s[i*cols+j]
		}
		acols, bcols := tc.k, tc.n
		if tc.transA {
			acols = tc.m
		}
		if tc.transB {
			bcols = tc.k
		}
		want, wantR, abs := make([]float64, tc.m*tc.n), make([]float64, tc.m*tc.n), make([]float64, tc.m*tc.n)
		for i := range tc.m {
			for j := range tc.n {
				for l := range tc.k {
					x, y := at(a32, tc.transA, acols, i, l), at(b32, tc.transB, bcols, l, j)
					want[i*tc.n+j] += x * y
					wantR[i*tc.n+j] += at(ar, tc.transA, acols, i, l) * at(br, tc.transB, bcols, l, j)
					abs[i*tc.n+j] += math.Abs(x * y)
				}
			}
		}
		got := make([]float32, tc.m*tc.n)
		if err := gemmPrec(true, tc.transA, tc.transB, tc.m, tc.n, tc.k, float32s(a), float32s(b), 0, got); err != nil {
			t.Fatal(err)
		}
		sum := float64(tc.k) / (1 << 23)
		if bad := withinBF16(got, wantR, abs, sum); bad != "" {
			t.Errorf("%+v: not the products of the bfloat16-rounded inputs: %s", tc, bad)
		}
		if bad := withinBF16(got, want, abs, 2*bf16U+bf16U*bf16U+sum); bad != "" {
			t.Errorf("%+v: beyond bfloat16's tolerance of the float32 products: %s", tc, bad)
		}
	}
}

// TestBF16Plan: which kinds of op run in bfloat16, and the reason given
// for each that does not, for every capability missing; SetPrecision on
// the ops follows the plan of the (injected) capabilities and reports the
// precision and reason the engine logs.
func TestBF16Plan(t *testing.T) {
	all := bf16Caps{cpu: true, oneDNN: true, oneDNNISA: true, sbgemm: true}
	type plan struct {
		Conv, MatMul       bool
		WhyConv, WhyMatMul string // a part of the reason
	}
	tests := []struct {
		name string
		caps func(bf16Caps) bf16Caps
		want plan
	}{
		{"everything", func(c bf16Caps) bf16Caps { return c }, plan{Conv: dnnl.Built, MatMul: true}},
		{"no AVX512_BF16", func(c bf16Caps) bf16Caps { c.cpu, c.oneDNNISA = false, false; return c },
			plan{WhyConv: "lacks AVX512_BF16", WhyMatMul: "lacks AVX512_BF16"}},
		{"oneDNN's ISA capped", func(c bf16Caps) bf16Caps { c.oneDNNISA = false; return c },
			plan{MatMul: true, WhyConv: "oneDNN: false"}},
		{"oneDNN turned off", func(c bf16Caps) bf16Caps { c.oneDNN = false; return c },
			plan{MatMul: true, WhyConv: "UseOneDNN(false)"}},
		{"no sbgemm: oneDNN's products", func(c bf16Caps) bf16Caps { c.sbgemm = false; return c },
			plan{Conv: dnnl.Built, MatMul: dnnl.Built}},
		{"neither sbgemm nor oneDNN", func(c bf16Caps) bf16Caps { c.sbgemm, c.oneDNN = false, false; return c },
			plan{WhyConv: "UseOneDNN(false)", WhyMatMul: "or oneDNN's bfloat16 matrix product, and oneDNN is turned off by layers.UseOneDNN(false)"}},
		{"no sbgemm, oneDNN's ISA capped", func(c bf16Caps) bf16Caps { c.sbgemm, c.oneDNNISA = false, false; return c },
			plan{WhyConv: "oneDNN: false", WhyMatMul: "and oneDNN's effective ISA lacks AVX512_BF16"}},
	}
	defer func(f func() bf16Caps) { bf16Detect = f }(bf16Detect)
	for _, tc := range tests {
		caps := tc.caps(all)
		if !dnnl.Built {
			tc.want.WhyConv = "built without oneDNN"
			if !tc.want.MatMul && caps.cpu && !caps.sbgemm {
				tc.want.WhyMatMul = "or oneDNN's bfloat16 matrix product, and towerflow was built without oneDNN"
			}
		}
		conv, mm, wc, wm := bf16Plan(caps)
		got := plan{conv, mm, tc.want.WhyConv, tc.want.WhyMatMul}
		if !strings.Contains(wc, tc.want.WhyConv) || (tc.want.WhyConv == "") != (wc == "") {
			got.WhyConv = wc
		}
		if !strings.Contains(wm, tc.want.WhyMatMul) || (tc.want.WhyMatMul == "") != (wm == "") {
			got.WhyMatMul = wm
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: bf16Plan(%+v) (-want +got):\n%s", tc.name, caps, diff)
		}
		bf16Detect = func() bf16Caps { return caps }
		for _, op := range []struct {
			op   towers.MixedPrecision
			on   func() bool
			want bool
			why  string
		}{
			{&convOp{}, nil, tc.want.Conv, wc},
			{&convGradOp{}, nil, tc.want.Conv, wc},
			{&denseOp{}, nil, tc.want.MatMul, wm},
			{&matMulOp{}, nil, tc.want.MatMul, wm},
		} {
			p, why := op.op.SetPrecision(towers.BFloat16)
			wantP, wantWhy := towers.FullPrecision, op.why
			if op.want {
				wantP, wantWhy = towers.BFloat16, ""
			}
			if p != wantP || why != wantWhy || opBF16(op.op) != op.want {
				t.Errorf("%s: %T.SetPrecision(bfloat16) = %v, %q, runs in bfloat16 %t; want %v, %q, %t", tc.name, op.op, p, why, opBF16(op.op), wantP, wantWhy, op.want)
			}
			if p, why := op.op.SetPrecision(towers.FullPrecision); p != towers.FullPrecision || why != "" || opBF16(op.op) {
				t.Errorf("%s: %T.SetPrecision(float32) = %v, %q, runs in bfloat16 %t", tc.name, op.op, p, why, opBF16(op.op))
			}
		}
	}
}

// opBF16 says whether op is set to run in bfloat16.
func opBF16(op towers.MixedPrecision) bool {
	switch op := op.(type) {
	case *convOp:
		return op.bf16
	case *convGradOp:
		return op.bf16
	case *denseOp:
		return op.bf16
	case *matMulOp:
		return op.bf16
	}
	return false
}
