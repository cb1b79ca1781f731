//go:build dnnl

package dnnl

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	bfloat "github.com/towerflow/towerflow/internal/bf16"
)

// specialBits are float32s of every class the conversion to bfloat16
// treats apart: zeros, infinities, NaNs with payloads (quiet, signalling,
// payload only in the low half), subnormals (rounding down, up, to the
// smallest normal), ties to even both ways and either side of a tie,
// the largest finite value and values rounding up to infinity.
var specialBits = []uint32{
	0x00000000, 0x80000000, 0x7f800000, 0xff800000, // ±0, ±Inf
	0x7fc00000, 0xffc00000, 0x7fa00001, 0xff800001, 0x7f800001, 0x7fffffff, 0xffffffff, 0x7fbfffff, // NaNs
	0x00000001, 0x80000001, 0x00008000, 0x00018000, 0x00017fff, 0x00400000, 0x007f7fff, 0x007f8000, 0x807fffff, // subnormals
	0x3f808000, 0x3f818000, 0xbf808000, 0xbf818000, 0x3f807fff, 0x3f808001, 0x3f80ffff, // ties and their neighbours
	0x7f7fffff, 0xff7fffff, 0x7f7f7fff, 0x7f7f8000, 0xff7f8000, 0x7f7f0000, // largest finite, rounding to ±Inf
	0x00800000, 0x80800000, 0x3f800000, 0x4b7fffff, // smallest normals, one, 2^24-1
}

// TestToBF16MatchesFromFloat32: the conversion bfloat16 passes use on
// dense inputs gives bf16.FromFloat32's bits on every special class of
// float32 and on random bits, at every position of a 16-float step, on
// lengths that are and are not multiples of 16 and 32 (both vector
// steps and the scalar tail), from unaligned starts.
func TestToBF16MatchesFromFloat32(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 48, 49, 64, 1000, 4099} {
		for _, skip := range []int{0, 1, 3} {
			src := make([]float32, n+skip)
			for i := range src {
				if i%3 == 0 {
					src[i] = math.Float32frombits(rng.Uint32())
					continue
				}
				src[i] = math.Float32frombits(specialBits[(i+n)%len(specialBits)])
			}
			src = src[skip:]
			want, got := make([]uint16, n), make([]uint16, n+1)
			bfloat.Convert(want, src)
			got[n] = 0xbeef
			toBF16(got, src)
			if diff := cmp.Diff(want, got[:n]); diff != "" {
				t.Errorf("%d floats from element %d (-bf16.FromFloat32 +toBF16):\n%s", n, skip, diff)
			}
			if got[n] != 0xbeef {
				t.Errorf("%d floats: wrote past the end", n)
			}
		}
	}
	// Each special value in every lane of both vector steps and the tail.
	for _, b := range specialBits {
		src := make([]float32, 32+16+3)
		for i := range src {
			src[i] = math.Float32frombits(b)
		}
		want, got := make([]uint16, len(src)), make([]uint16, len(src))
		bfloat.Convert(want, src)
		toBF16(got, src)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%#08x (-bf16.FromFloat32 +toBF16):\n%s", b, diff)
		}
	}
}

// TestBF16ConvRoundsAsFromFloat32: a bfloat16 convolution with an
// identity kernel returns its inputs rounded as bf16.FromFloat32 rounds
// them, on NHWC and dense NCHW batches (converted by towerflow, not
// oneDNN's reorder, which flushes float32 subnormals to zero): a float32
// subnormal that rounds up to the smallest normal bfloat16 comes out as
// it. Other subnormals come out as +0, as ±0 do: oneDNN's bfloat16
// products treat bfloat16 subnormals as zero.
func TestBF16ConvRoundsAsFromFloat32(t *testing.T) {
	if !BF16() {
		t.Skip("no native bfloat16 convolutions on this CPU")
	}
	var vals []uint32
	for _, b := range specialBits {
		// Infinities and NaNs times the kernel's zeros are NaNs: they
		// would hide the other channels.
		if b&0x7fffffff < 0x7f7f8000 {
			vals = append(vals, b)
		}
	}
	for len(vals)%16 != 0 {
		vals = append(vals, 0x3f818000)
	}
	for _, nhwc := range []bool{true, false} {
		g := Geom{N: len(vals) / 16, C: 16, H: 1, W: 1, F: 16, KH: 1, KW: 1, SH: 1, SW: 1, OH: 1, OW: 1, Chunk: 1, BF16: true, NHWC: nhwc}
		x, k := make([]float32, len(vals)), make([]float32, 16*16)
		want := make([]uint32, len(vals))
		for i, b := range vals {
			x[i] = math.Float32frombits(b)
			r := bfloat.FromFloat32(x[i])
			if r&0x7f80 == 0 {
				r = 0 // ±0 or subnormal: a sum of zeros, +0
			}
			want[i] = math.Float32bits(bfloat.ToFloat32(r))
		}
		for i := range 16 {
			k[i*16+i] = 1
		}
		c, err := Lookup(g)
		if err != nil {
			t.Fatal(err)
		}
		y := make([]float32, len(vals))
		if err := c.Run(Forward, x, k, nil, y, make([]float32, c.Workspace(Forward))); err != nil {
			t.Fatal(err)
		}
		got := make([]uint32, len(y))
		for i, v := range y {
			got[i] = math.Float32bits(v)
		}
		if diff := cmp.Diff(hexes(want), hexes(got)); diff != "" {
			t.Errorf("NHWC %t: identity convolution of %x (-rounded +got):\n%s", nhwc, vals, diff)
		}
	}
}

func hexes(b []uint32) []string {
	s := make([]string, len(b))
	for i, v := range b {
		s[i] = fmt.Sprintf("%#08x", v)
	}
	return s
}

// BenchmarkToBF16 converts a chunk of a bfloat16 pass's input, 4 NHWC
// images of 32×32×16, reporting bytes read and written.
func BenchmarkToBF16(b *testing.B) {
	src := make([]float32, 4*32*32*16)
	dst := make([]uint16, len(src))
	for i := range src {
		src[i] = float32(i) * 0.37
	}
	b.SetBytes(int64(len(src) * 6))
	for range b.N {
		toBF16(dst, src)
	}
}
