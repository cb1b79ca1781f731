package layers

// This package's own code computes an NHWC convolution as the NCHW one:
// the per-image inputs transposed into NCHW scratch, the NCHW code run on
// them, and a per-image result transposed back. The arithmetic is the NCHW
// op's, so the results are its bits, transposed. (oneDNN, -tags dnnl,
// computes on NHWC in place: conv_onednn.go.)

// convNHWC is convGo for NHWC x and o.
func convNHWC[T float](g convGeom, x, k, b, o []T, relu bool) {
	xs, os := borrow[T](len(x)), borrow[T](len(o))
	defer giveBack(xs, os)
	transposeImages(xs, x, g.n, g.h*g.w, g.c)
	convGo(g.nchw(), xs, k, b, os, relu)
	transposeImages(o, os, g.n, g.f, g.ohw())
}

// convGradNHWC is convGradGo for NHWC x and dz: the input's gradient
// (input; a is the kernel) is NHWC too.
func convGradNHWC[T float](g convGeom, input bool, a, dz, o []T) {
	dzs := borrow[T](len(dz))
	defer giveBack(dzs)
	transposeImages(dzs, dz, g.n, g.ohw(), g.f)
	if input {
		os := borrow[T](len(o))
		defer giveBack(os)
		convGradGo(g.nchw(), true, a, dzs, os)
		transposeImages(o, os, g.n, g.c, g.h*g.w)
		return
	}
	xs := borrow[T](len(a))
	defer giveBack(xs)
	transposeImages(xs, a, g.n, g.h*g.w, g.c)
	convGradGo(g.nchw(), false, xs, dzs, o)
}

// nchw returns g in NCHW order.
func (g convGeom) nchw() convGeom {
	g.format = NCHW
	return g
}

// transposeImages writes the n images of src, each a rows×cols row-major
// matrix, to dst transposed (cols×rows each): NHWC to NCHW with (rows,
// cols) = (H·W, C), NCHW to NHWC with (C, H·W). A tall matrix (NHWC to
// NCHW) is read a block of rows at a time, as many as stay in the L1
// cache, and written one contiguous run of each of its columns per block:
// square tiles would write C rows 4·H·W bytes apart, which crowd into one
// set of the cache. A wide one is walked in square tiles, which keep both
// sides in cache.
func transposeImages[T float](dst, src []T, n, rows, cols int) {
	const tile = 32
	per := rows * cols
	if per == 0 {
		return // no values: an empty image
	}
	block := max(tile, (16<<10)/(cols*sizeOf[T]()))
	for i := range n {
		s, d := src[i*per:(i+1)*per], dst[i*per:(i+1)*per]
		if cols < rows {
			for r0 := 0; r0 < rows; r0 += block {
				r1 := min(r0+block, rows)
				for c := range cols {
					out := d[c*rows+r0 : c*rows+r1]
					for r := range out {
						out[r] = s[(r0+r)*cols+c]
					}
				}
			}
			continue
		}
		for r0 := 0; r0 < rows; r0 += tile {
			r1 := min(r0+tile, rows)
			for c0 := 0; c0 < cols; c0 += tile {
				c1 := min(c0+tile, cols)
				for r := r0; r < r1; r++ {
					row := s[r*cols : (r+1)*cols]
					for c := c0; c < c1; c++ {
						d[c*rows+r] = row[c]
					}
				}
			}
		}
	}
}
