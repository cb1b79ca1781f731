package layers

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/dnnl"
	"github.com/towerflow/towerflow/towers"
)

// TestOneDNNAgainstDirectSums (built with -tags dnnl): oneDNN's three
// passes, as Conv2D calls them, equal the convolution's sums written out
// term by term to float32's precision (the margin growing with the terms
// of a sum), for ResNet-20's geometries and
// random ones (strides 1 to 3, padding up to 3, kernels up to 5, with and
// without bias and ReLU; the batch whole and in chunks), on NCHW and NHWC
// batches, with the shared scratch and the outputs full of
// NaNs before each run: an element read before it is written would show.
func TestOneDNNAgainstDirectSums(t *testing.T) {
	if !dnnl.Built {
		t.Skip("built without oneDNN: go test -tags dnnl (CI runs it)")
	}
	type geometry struct {
		n, c, h, f, k, stride, pad int
		bias, relu                 bool
	}
	geoms := []geometry{ // ResNet-20 on CIFAR-10, 4 images
		{4, 3, 32, 16, 3, 1, 1, false, false},
		{4, 16, 32, 16, 3, 1, 1, false, false},
		{4, 16, 32, 32, 3, 2, 1, false, false},
		{4, 16, 32, 32, 1, 2, 0, false, false},
		{4, 32, 16, 32, 3, 1, 1, true, true},
		{4, 64, 8, 64, 3, 1, 1, true, false},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 30 {
		k := 1 + rng.IntN(5)
		geoms = append(geoms, geometry{1 + rng.IntN(4), 1 + rng.IntN(20), k + rng.IntN(12), 1 + rng.IntN(20), k,
			1 + rng.IntN(3), rng.IntN(min(k, 4)), rng.IntN(2) == 0, rng.IntN(2) == 0})
	}
	defer func(n int) { dnnlChunkImages = n }(dnnlChunkImages)
	for i, ge := range geoms {
		// Every third geometry runs a few images at a time, with a smaller
		// last chunk where the batch allows.
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
		wantY, wantDK, wantDX := directConv(g, x, k, dz)
		for j := range wantY {
			if ge.bias {
				wantY[j] += b[j/g.ohw()%g.f]
			}
			if ge.relu {
				wantY[j] = max(wantY[j], 0)
			}
		}
		var bias []float32
		if ge.bias {
			bias = float32s(b)
		}
		for _, f := range []Format{NCHW, NHWC} {
			g := g.withFormat(f)
			// Each result is a sum of terms float32 rounds: the margin
			// grows with their number.
			for _, r := range []struct {
				pass     dnnl.Pass
				in0, in1 []float64
				want     []float64
				terms    int
			}{
				{dnnl.Forward, g.images(x, g.c, g.h, g.w), k, g.images(wantY, g.f, g.oh, g.ow), g.ckk()},
				{dnnl.InputGrad, g.images(dz, g.f, g.oh, g.ow), k, g.images(wantDX, g.c, g.h, g.w), g.f * g.kh * g.kw},
				{dnnl.KernelGrad, g.images(x, g.c, g.h, g.w), g.images(dz, g.f, g.oh, g.ow), wantDK, g.n * g.ohw()},
			} {
				poisonScratch32()
				got := float32s(r.want)
				for j := range got {
					got[j] = float32(math.NaN())
				}
				done, err := convOneDNN(g, r.pass, ge.bias, ge.relu, false, nil, float32s(r.in0), float32s(r.in1), bias, got)
				if !done || err != nil {
					t.Fatalf("%v, %v: ran in oneDNN %t, error %v", g, r.pass, done, err)
				}
				if diff := cmp.Diff(float32s(r.want), got, cmpopts.EquateApprox(1e-4, max(1e-4, 2e-6*float64(r.terms)))); diff != "" {
					t.Errorf("%v (bias %t, ReLU %t, %d images a chunk): %v (-direct +oneDNN):\n%s", g, ge.bias, ge.relu, dnnlChunk(g), r.pass, diff)
				}
			}
		}
	}
}

// withFormat returns g in order f.
func (g convGeom) withFormat(f Format) convGeom {
	g.format = f
	return g
}

// images returns s, g.n NCHW images of c channels of h×w, in g's order:
// transposed index by index for NHWC (not with the code under test).
func (g convGeom) images(s []float64, c, h, w int) []float64 {
	if g.format == NCHW {
		return s
	}
	d := make([]float64, len(s))
	for i := range g.n {
		for ch := range c {
			for y := range h {
				for x := range w {
					d[((i*h+y)*w+x)*c+ch] = s[((i*c+ch)*h+y)*w+x]
				}
			}
		}
	}
	return d
}

// TestUseOneDNN: oneDNN is on by default exactly in a build with it, can be
// turned off and on there, and asking for it elsewhere is an error.
func TestUseOneDNN(t *testing.T) {
	defer func() { oneDNN.Store(dnnl.Built) }()
	for _, tc := range []struct {
		on          bool
		wantErr     bool
		wantBackend string
	}{
		{on: false, wantBackend: "towerflow (BLAS)"},
		{on: true, wantErr: !dnnl.Built, wantBackend: map[bool]string{true: dnnl.Version(), false: "towerflow (BLAS)"}[dnnl.Built]},
	} {
		err := UseOneDNN(tc.on)
		got := struct {
			Err     bool
			Backend string
		}{err != nil, ConvBackend()}
		want := struct {
			Err     bool
			Backend string
		}{tc.wantErr, tc.wantBackend}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("UseOneDNN(%t): (-want +got):\n%s", tc.on, diff)
		}
	}
}

func float32s(s []float64) []float32 {
	f := make([]float32, len(s))
	for i, v := range s {
		f[i] = float32(v)
	}
	return f
}

// poisonScratch32 fills every free float32 scratch buffer with NaNs.
func poisonScratch32() {
	scratch32.mu.Lock()
	defer scratch32.mu.Unlock()
	for _, s := range scratch32.free {
		s = s[:cap(s)]
		for i := range s {
			s[i] = float32(math.NaN())
		}
	}
}

// TestConvOpsShare: given its build's board (towers.Sharing), a
// convolution's forward op and its input's gradient op keep it and, with
// oneDNN, a dnnl.Share to run on; the kernel's gradient, whose chunks add
// up in order, does not share.
func TestConvOpsShare(t *testing.T) {
	s0 := towers.NewScope(0, 2, towers.CPU(0), towers.NewStore(towers.StoreConfig{}), nil)
	b := s0.Board()
	type got struct {
		Board bool
		Tower int
		Share bool
	}
	for _, c := range []struct {
		name string
		op   interface {
			towers.Sharing
			sharing() *convSharing
		}
		want got
	}{
		{"forward", &convOp{}, got{true, 1, dnnl.Built}},
		{"input gradient", &convGradOp{input: true}, got{true, 1, dnnl.Built}},
		{"kernel gradient", &convGradOp{}, got{false, 0, false}},
	} {
		c.op.ShareOn(b, 1)
		s := c.op.sharing()
		if diff := cmp.Diff(c.want, got{s.board == b, s.tower, s.share != nil}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}

func (o *convSharing) sharing() *convSharing { return o }
