package layers

import "unsafe"

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

// packInput writes x (N×C×H×W) into xp (C rows of l) in the padded layout,
// every element: the padding zero.
func packInput[T float](g convGeom, t taps, x, xp []T) {
	plane, block := g.h*g.w, t.rows*t.wp
	for c := range g.c {
		row := xp[c*t.l : (c+1)*t.l]
		clear(row[:t.base])
		for n := range g.n {
			img := row[t.base+n*block : t.base+(n+1)*block]
			src := x[(n*g.c+c)*plane : (n*g.c+c+1)*plane]
			for y := range g.h {
				r := img[y*t.wp : (y+1)*t.wp]
				copy(r, src[y*g.w:(y+1)*g.w])
				clear(r[g.w:])
			}
			clear(img[g.h*t.wp:])
		}
		clear(row[t.base+g.n*block:])
	}
}

// unpackInput reads the input's gradient out of its padded layout dxp into
// dx (N×C×H×W).
func unpackInput[T float](g convGeom, t taps, dxp, dx []T) {
	plane, block := g.h*g.w, t.rows*t.wp
	for c := range g.c {
		row := dxp[c*t.l+t.base : (c+1)*t.l]
		for n := range g.n {
			img := row[n*block:]
			dst := dx[(n*g.c+c)*plane : (n*g.c+c+1)*plane]
			for y := range g.h {
				copy(dst[y*g.w:(y+1)*g.w], img[y*t.wp:y*t.wp+g.w])
			}
		}
	}
}

// packOutput writes dz (N×F×OH×OW) into dzp (F rows of l) in the output's
// layout, zero in the columns thrown away, through column N·rows·wp.
func packOutput[T float](g convGeom, t taps, dz, dzp []T) {
	plane, block := g.ohw(), t.rows*t.wp
	for f := range g.f {
		row := dzp[f*t.l : f*t.l+g.n*block]
		for n := range g.n {
			img := row[n*block : (n+1)*block]
			src := dz[(n*g.f+f)*plane : (n*g.f+f+1)*plane]
			for y := range g.oh {
				r := img[y*t.wp : (y+1)*t.wp]
				copy(r, src[y*g.ow:(y+1)*g.ow])
				clear(r[g.ow:])
			}
			clear(img[g.oh*t.wp:])
		}
	}
}

// unpackOutput writes act(yp + bias) from the output's layout into out
// (N×F×OH×OW); b is the bias or nil.
func unpackOutput[T float](g convGeom, t taps, yp, b, out []T, relu bool) {
	plane, block := g.ohw(), t.rows*t.wp
	for f := range g.f {
		var bf T
		if b != nil {
			bf = b[f]
		}
		row := yp[f*t.l:]
		for n := range g.n {
			img := row[n*block:]
			dst := out[(n*g.f+f)*plane : (n*g.f+f+1)*plane]
			for y := range g.oh {
				d, s := dst[y*g.ow:(y+1)*g.ow], img[y*t.wp:y*t.wp+g.ow]
				switch {
				case relu:
					for i, v := range s {
						d[i] = max(v+bf, 0)
					}
				case b != nil:
					for i, v := range s {
						d[i] = v + bf
					}
				default:
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

// chunks calls do for each chunk of images: its first image, and the
// geometry and layout of the chunk.
func (g convGeom) chunks(size int, do func(n0 int, gc convGeom, t taps)) {
	per := g.chunk(size)
	for n0 := 0; n0 < g.n; n0 += per {
		gc := g
		gc.n = min(per, g.n-n0)
		do(n0, gc, gc.taps())
	}
}

// buffers returns the lengths of a chunk's padded buffers of the input
// (C rows) and of the output (F rows).
func (g convGeom) buffers(size int) (in, out int) {
	gc := g
	gc.n = g.chunk(size)
	t := gc.taps()
	return g.c * t.l, g.f * t.l
}

// convTaps sets out = act(x ⋆ k + b) for a stride-1 convolution.
func convTaps[T float](g convGeom, x, k, b, out []T, relu bool) {
	kk, size := g.kh*g.kw, int(unsafe.Sizeof(T(0)))
	li, lo := g.buffers(size)
	w, xp, yp := borrow[T](kk*g.f*g.c), borrow[T](li), borrow[T](lo)
	defer giveBack(w, xp, yp)
	tapWeights(g, k, w)
	in, o := g.c*g.h*g.w, g.f*g.ohw()
	g.chunks(size, func(n0 int, g convGeom, t taps) {
		packInput(g, t, x[n0*in:], xp)
		for tap := range kk {
			var beta T
			if tap > 0 {
				beta = 1
			}
			gemmLD(false, false, g.f, t.nq, g.c, w[tap*g.f*g.c:], g.c, xp[t.offset(g, tap):], t.l, beta, yp, t.l)
		}
		unpackOutput(g, t, yp, b, out[n0*o:], relu)
	})
}

// convTapsKernelGrad sets dk to the kernel's gradient Σ dz ⋆ x.
func convTapsKernelGrad[T float](g convGeom, x, dz, dk []T) {
	kk, size := g.kh*g.kw, int(unsafe.Sizeof(T(0)))
	li, lo := g.buffers(size)
	w, xp, dzp := borrow[T](kk*g.f*g.c), borrow[T](li), borrow[T](lo)
	defer giveBack(w, xp, dzp)
	in, o := g.c*g.h*g.w, g.f*g.ohw()
	g.chunks(size, func(n0 int, g convGeom, t taps) {
		packInput(g, t, x[n0*in:], xp)
		packOutput(g, t, dz[n0*o:], dzp)
		var beta T
		if n0 > 0 {
			beta = 1
		}
		for tap := range kk {
			gemmLD(false, true, g.f, g.c, t.nq, dzp, t.l, xp[t.offset(g, tap):], t.l, beta, w[tap*g.f*g.c:], g.c)
		}
	})
	tapGrads(g, w, dk)
}

// convTapsInputGrad sets dx to the input's gradient, the convolution's
// adjoint applied to dz.
func convTapsInputGrad[T float](g convGeom, k, dz, dx []T) {
	kk, size := g.kh*g.kw, int(unsafe.Sizeof(T(0)))
	li, lo := g.buffers(size)
	w, dxp, dzp := borrow[T](kk*g.f*g.c), borrow[T](li), borrow[T](lo)
	defer giveBack(w, dxp, dzp)
	tapWeights(g, k, w)
	in, o := g.c*g.h*g.w, g.f*g.ohw()
	g.chunks(size, func(n0 int, g convGeom, t taps) {
		packOutput(g, t, dz[n0*o:], dzp)
		clear(dxp[:g.c*t.l])
		for tap := range kk {
			gemmLD(true, false, g.c, t.nq, g.f, w[tap*g.f*g.c:], g.c, dzp, t.l, 1, dxp[t.offset(g, tap):], t.l)
		}
		unpackInput(g, t, dxp, dx[n0*in:])
	})
}
