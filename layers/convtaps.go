package layers

import (
	"unsafe"
)

// A convolution with stride 1 is computed here without unfolding the input
// (im2col), as one matrix product per kernel tap over the whole batch.
//
// Every channel of the batch is laid out as one long zero-padded row: the
// images' rows one after another, wp elements apart, rows images apart,
// where wp − W and rows − H are at least the padding and the padding
// columns and rows are shared by neighbours (the right padding of one row is
// the left padding of the next; the bottom padding of one image the top of
// the next). Output position (n, y, x) is then column q = (n·rows + y)·wp + x
// of the output's row, and the input element that kernel tap (i, j) sees
// there is column q + i·wp + j of the input's (the rows start base elements
// early, at row −ph and column −pw of the first image). So for every tap the
// output's rows are the tap's F×C weights times the C input rows shifted by
// the tap's offset: KH·KW products of F×C by C×(N·rows·wp), each read
// straight from the padded input, where im2col writes the input out KH·KW
// times before one product reads it. Columns with x ≥ OW or y ≥ OH are
// computed and thrown away (6% of them for 32×32 images and a 3×3 kernel,
// 21% for 8×8).
//
// The gradients are the same products turned around: the kernel's, for tap
// (i, j), is dz times the shifted input transposed (dz laid out like the
// output, zero where the output's columns are thrown away); the input's
// adds every tap's weights transposed times dz into the padded input's
// layout, shifted back, which is the convolution's adjoint.

// taps is the padded layout of a stride-1 convolution's batch.
type taps struct {
	wp, rows int // row stride; rows per image
	base     int // offset of image 0's element (0, 0) in a channel's row
	nq       int // output columns: through the last image's last output
	l        int // length of a channel's row, output or input
}

func (g convGeom) taps() taps {
	t := taps{wp: max(g.w+g.pw, g.ow), rows: max(g.h+g.ph, g.oh)}
	t.base = g.ph*t.wp + g.pw
	t.nq = ((g.n-1)*t.rows+g.oh-1)*t.wp + g.ow
	t.l = max(t.nq+(g.kh-1)*t.wp+g.kw-1, t.base+g.n*t.rows*t.wp)
	return t
}

// offset is the shift of tap number k (row-major over KH×KW).
func (t taps) offset(g convGeom, k int) int { return k/g.kw*t.wp + k%g.kw }

// pack writes n images of ch channels of h×w (image-major, as x of shape
// (N, C, H, W)) into xp, ch rows of l, in the padded layout with image 0 at
// base: every element through the last image's rows, the padding zero (no
// product reads further: the last output's taps end in its image's padding).
// The input is packed at t.base, the output's gradient at 0 (its extra
// columns, x ≥ OW or y ≥ OH, are then zero).
func pack[T float](t taps, n, ch, h, w, base int, x, xp []T) {
	plane, block := h*w, t.rows*t.wp
	for c := range ch {
		row := xp[c*t.l : (c+1)*t.l]
		clear(row[:base])
		for i := range n {
			img := row[base+i*block : base+(i+1)*block]
			src := x[(i*ch+c)*plane : (i*ch+c+1)*plane]
			for y := range h {
				r := img[y*t.wp : (y+1)*t.wp]
				copy(r, src[y*w:(y+1)*w])
				clear(r[w:])
			}
			clear(img[h*t.wp:])
		}
	}
}

// unpack is pack's inverse: it writes act(xp + bias) of the n images of ch
// channels of h×w at base in xp into out (N×C×H×W); b is the bias or nil.
func unpack[T float](t taps, n, ch, h, w, base int, xp, b, out []T, relu bool) {
	plane, block := h*w, t.rows*t.wp
	for c := range ch {
		var bc T
		if b != nil {
			bc = b[c]
		}
		row := xp[c*t.l+base:]
		for i := range n {
			img := row[i*block:]
			dst := out[(i*ch+c)*plane : (i*ch+c+1)*plane]
			for y := range h {
				d, s := dst[y*w:(y+1)*w], img[y*t.wp:y*t.wp+w]
				if b != nil || relu {
					addConst(d, s, bc, relu)
				} else {
					copy(d, s)
				}
			}
		}
	}
}

// tapWeights writes kernel k (F×C×KH×KW) as KH·KW matrices F×C, one per
// tap, into w; tapGrads is its inverse.
func tapWeights[T float](g convGeom, k, w []T) {
	kk := g.kh * g.kw
	for f := range g.f {
		for c := range g.c {
			src := k[(f*g.c+c)*kk : (f*g.c+c+1)*kk]
			for tap, v := range src {
				w[(tap*g.f+f)*g.c+c] = v
			}
		}
	}
}

func tapGrads[T float](g convGeom, w, k []T) {
	kk := g.kh * g.kw
	for f := range g.f {
		for c := range g.c {
			dst := k[(f*g.c+c)*kk : (f*g.c+c+1)*kk]
			for tap := range dst {
				dst[tap] = w[(tap*g.f+f)*g.c+c]
			}
		}
	}
}

// chunk is how many images a stride-1 convolution lays out and multiplies
// at a time: as many as keep a chunk's two padded buffers within
// chunkBytes, so that they stay in the core's cache from packing through
// the products to unpacking.
func (g convGeom) chunk(size int) int {
	one := g
	one.n = 1
	t := one.taps()
	return max(1, min(g.n, chunkBytes/((g.c+g.f)*t.rows*t.wp*size)))
}

// chunkBytes: ResNet-20 on one tower trained at the same speed with chunks
// of 32 KiB to 256 KiB (one to twelve images, by stage), 13% slower with
// 1 MiB, and 29% slower with the whole batch at once (README, Performance).
const chunkBytes = 128 << 10

// chunks calls do for each chunk of images: the chunk's geometry and
// layout, and the offsets of its first image in the input batch and in the
// output batch.
func (g convGeom) chunks(size int, do func(gc convGeom, t taps, in, out int)) {
	per := g.chunk(size)
	for n0 := 0; n0 < g.n; n0 += per {
		gc := g
		gc.n = min(per, g.n-n0)
		do(gc, gc.taps(), n0*g.c*g.h*g.w, n0*g.f*g.ohw())
	}
}

// tapBuffers is what a stride-1 convolution borrows: the kernel as one F×C
// matrix per tap (w), and a chunk's padded input (C rows) and output (F
// rows).
type tapBuffers[T float] struct{ w, in, out []T }

func borrowTaps[T float](g convGeom) tapBuffers[T] {
	gc := g
	gc.n = g.chunk(sizeOf[T]())
	t := gc.taps()
	return tapBuffers[T]{borrow[T](g.kh * g.kw * g.f * g.c), borrow[T](g.c * t.l), borrow[T](g.f * t.l)}
}

func (b tapBuffers[T]) giveBack() { giveBack(b.w, b.in, b.out) }

func sizeOf[T float]() int { return int(unsafe.Sizeof(T(0))) }

// convTaps sets out = act(x ⋆ k + b) for a stride-1 convolution.
func convTaps[T float](g convGeom, x, k, b, out []T, relu bool) {
	buf := borrowTaps[T](g)
	defer buf.giveBack()
	tapWeights(g, k, buf.w)
	g.chunks(sizeOf[T](), func(g convGeom, t taps, in, o int) {
		pack(t, g.n, g.c, g.h, g.w, t.base, x[in:], buf.in)
		for tap := range g.kh * g.kw {
			var beta T
			if tap > 0 {
				beta = 1
			}
			gemmLD(false, false, g.f, t.nq, g.c, buf.w[tap*g.f*g.c:], g.c, buf.in[t.offset(g, tap):], t.l, beta, buf.out, t.l)
		}
		unpack(t, g.n, g.f, g.oh, g.ow, 0, buf.out, b, out[o:], relu)
	})
}

// convTapsKernelGrad sets dk to the kernel's gradient Σ dz ⋆ x.
func convTapsKernelGrad[T float](g convGeom, x, dz, dk []T) {
	buf := borrowTaps[T](g)
	defer buf.giveBack()
	g.chunks(sizeOf[T](), func(g convGeom, t taps, in, o int) {
		pack(t, g.n, g.c, g.h, g.w, t.base, x[in:], buf.in)
		pack(t, g.n, g.f, g.oh, g.ow, 0, dz[o:], buf.out)
		var beta T
		if in > 0 { // the chunks' gradients add up
			beta = 1
		}
		for tap := range g.kh * g.kw {
			gemmLD(false, true, g.f, g.c, t.nq, buf.out, t.l, buf.in[t.offset(g, tap):], t.l, beta, buf.w[tap*g.f*g.c:], g.c)
		}
	})
	tapGrads(g, buf.w, dk)
}

// convTapsInputGrad sets dx to the input's gradient, the convolution's
// adjoint applied to dz.
func convTapsInputGrad[T float](g convGeom, k, dz, dx []T) {
	buf := borrowTaps[T](g)
	defer buf.giveBack()
	tapWeights(g, k, buf.w)
	g.chunks(sizeOf[T](), func(g convGeom, t taps, in, o int) {
		pack(t, g.n, g.f, g.oh, g.ow, 0, dz[o:], buf.out)
		clear(buf.in[:g.c*t.l])
		for tap := range g.kh * g.kw {
			gemmLD(true, false, g.c, t.nq, g.f, buf.w[tap*g.f*g.c:], g.c, buf.out, t.l, 1, buf.in[t.offset(g, tap):], t.l)
		}
		unpack(t, g.n, g.c, g.h, g.w, t.base, buf.in, nil, dx[in:], false)
	})
}
