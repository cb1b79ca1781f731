package vec

// The Rows functions are the per-channel passes over channels-last data:
// x holds rows of C values, one per channel (an NHWC batch is N·H·W rows),
// and each channel has its parameters, or gets its sums, at its index in
// slices of C values. The assembly runs the float32 loops eight channels
// at a time across a row; the channels past the last multiple of eight
// run in Go. x's length is a multiple of C; the slices of parameters and
// sums hold at least C values, C being the length of the first of them.
//
// Each channel's sums add its rows one after another, in order, in both
// the assembly and the Go loops: the two give the same bits, and a
// channel's sum is the one a loop over its own contiguous values in order
// gives.

// SumsAboutRows sets s[c] = Σ (x[r·C+c] − m[c]) and ss[c] =
// Σ (x[r·C+c] − m[c])² over the rows r of x, for the C = len(m) channels.
func SumsAboutRows[T Float](x, m, s, ss []T) {
	c := len(m)
	if c == 0 {
		return
	}
	rows := len(x) / c
	s, ss = s[:c], ss[:c]
	clear(s)
	clear(ss)
	ch := 0
	if x32, ok := any(x).([]float32); ok && useAVX2 && rows > 0 {
		m32, s32, ss32 := any(m).([]float32), any(s).([]float32), any(ss).([]float32)
		ch = c &^ 7
		for lo, n := 0, BlockRows(c); lo < rows; lo += n {
			n = min(n, rows-lo)
			for k := 0; k < ch; k += 32 {
				sumsRowsAVX2(&x32[lo*c+k], n, c, &m32[k], min(4, (ch-k)/8), &s32[k], &ss32[k])
			}
		}
	}
	if ch == c {
		return
	}
	for r := range rows {
		row := x[r*c : (r+1)*c : (r+1)*c]
		for k := ch; k < c; k++ {
			d := row[k] - m[k]
			s[k] += d
			ss[k] += T(d * d) // T(…): no fused multiply-add, as in Affine
		}
	}
}

// SumAndDotAboutRows sets s[c] = Σ d[r·C+c] and sx[c] =
// Σ d[r·C+c]·(x[r·C+c] − m[c]) over the rows r of d, for the C = len(m)
// channels. x must be at least as long as d.
func SumAndDotAboutRows[T Float](d, x, m, s, sx []T) {
	c := len(m)
	if c == 0 {
		return
	}
	rows := len(d) / c
	x, s, sx = x[:rows*c], s[:c], sx[:c]
	clear(s)
	clear(sx)
	ch := 0
	if d32, ok := any(d).([]float32); ok && useAVX2 && rows > 0 {
		x32, m32, s32, sx32 := any(x).([]float32), any(m).([]float32), any(s).([]float32), any(sx).([]float32)
		ch = c &^ 7
		for lo, n := 0, BlockRows(c); lo < rows; lo += n {
			n = min(n, rows-lo)
			for k := 0; k < ch; k += 32 {
				sumAndDotRowsAVX2(&d32[lo*c+k], &x32[lo*c+k], n, c, &m32[k], min(4, (ch-k)/8), &s32[k], &sx32[k])
			}
		}
	}
	if ch < c {
		sumAndDotFrom(d, x, m, s, sx, ch)
	}
}

// sumAndDotFrom adds to s and sx SumAndDotAboutRows' sums of the channels
// from on, of the rows of d, in the Go loop.
func sumAndDotFrom[T Float](d, x, m, s, sx []T, from int) {
	c := len(m)
	for r := range len(d) / c {
		dr, xr := d[r*c:(r+1)*c:(r+1)*c], x[r*c:(r+1)*c:(r+1)*c]
		for k := from; k < c; k++ {
			v := dr[k]
			s[k] += v
			sx[k] += T(v * (xr[k] - m[k])) // T(…): no fused multiply-add
		}
	}
}

// AffineRows sets o[r·C+c] = g[c]·((x[r·C+c] − m[c])·s[c]) + b[c], then
// max(…, 0) when relu is set, for the C = len(m) channels: Affine, per
// channel of channels-last data. o must be at least as long as x.
func AffineRows[T Float](o, x, m, s, g, b []T, relu bool) {
	c := len(m)
	if c == 0 {
		return
	}
	rows := len(x) / c
	o, x, s, g, b = o[:rows*c], x[:rows*c], s[:c], g[:c], b[:c]
	c8 := 0
	if o32, ok := any(o).([]float32); ok && useAVX2 && rows > 0 {
		x32, m32, s32, g32, b32 := any(x).([]float32), any(m).([]float32), any(s).([]float32), any(g).([]float32), any(b).([]float32)
		if c8 = c &^ 7; c8 > 0 {
			for lo, n := 0, BlockRows(c); lo < rows; lo += n {
				n = min(n, rows-lo)
				affineRowsAVX2(&o32[lo*c], &x32[lo*c], n, c, c8, &m32[0], &s32[0], &g32[0], &b32[0], relu)
			}
		}
	}
	if c8 == c {
		return
	}
	for r := range rows {
		or, xr := o[r*c:(r+1)*c:(r+1)*c], x[r*c:(r+1)*c:(r+1)*c]
		for k := c8; k < c; k++ {
			v := T(g[k]*((xr[k]-m[k])*s[k])) + b[k]
			if relu {
				v = max(v, 0)
			}
			or[k] = v
		}
	}
}

// ProjectRows sets d[r·C+c] = k[c]·(d[r·C+c] − ms[c] − (x[r·C+c] − m[c])·mx[c])
// for the C = len(m) channels: Project, per channel of channels-last data.
// x must be at least as long as d.
func ProjectRows[T Float](d, x, k, ms, m, mx []T) { ProjectRowsFrom(d, d, x, k, ms, m, mx) }

// ProjectRowsFrom is ProjectRows with src in place of d on the right:
// d[r·C+c] = k[c]·(src[r·C+c] − ms[c] − (x[r·C+c] − m[c])·mx[c]). src and x
// must be at least as long as d; src may be d.
func ProjectRowsFrom[T Float](d, src, x, k, ms, m, mx []T) {
	c := len(m)
	if c == 0 {
		return
	}
	rows := len(d) / c
	d, src, x, k, ms, mx = d[:rows*c], src[:rows*c], x[:rows*c], k[:c], ms[:c], mx[:c]
	c8 := 0
	if d32, ok := any(d).([]float32); ok && useAVX2 && rows > 0 {
		s32, x32, k32, ms32, m32, mx32 := any(src).([]float32), any(x).([]float32), any(k).([]float32), any(ms).([]float32), any(m).([]float32), any(mx).([]float32)
		if c8 = c &^ 7; c8 > 0 {
			for lo, n := 0, BlockRows(c); lo < rows; lo += n {
				n = min(n, rows-lo)
				projectRowsAVX2(&d32[lo*c], &s32[lo*c], &x32[lo*c], n, c, c8, &k32[0], &ms32[0], &m32[0], &mx32[0])
			}
		}
	}
	if c8 == c {
		return
	}
	for r := range rows {
		dr, sr, xr := d[r*c:(r+1)*c:(r+1)*c], src[r*c:(r+1)*c:(r+1)*c], x[r*c:(r+1)*c:(r+1)*c]
		for j := c8; j < c; j++ {
			dr[j] = k[j] * (sr[j] - ms[j] - T((xr[j]-m[j])*mx[j])) // T(…): no fused multiply-add, as in Affine
		}
	}
}

// BlockRows is how many rows of c channels the Rows functions' assembly
// takes at a time, and a good block for their callers: about 2048 values
// (8 KiB of float32s, at least one row), which stay in the core's first
// cache while a pass goes over them once per vector of channels, and
// between a caller's passes over the same block.
func BlockRows(c int) int { return max(1, 2048/c) }

// MaskSumAndDotAboutRows sets d[i] = g[i] where y[i] > 0, else 0, as Mask
// does, when relu is set, else d[i] = g[i]; then it sets s and sx as
// SumAndDotAboutRows(d, x, m, s, sx) does, for the C = len(m) channels: a
// ReLU's input gradient and its per-channel sums, in one pass over the
// rows. y, g and x must be at least as long as d.
func MaskSumAndDotAboutRows[T Float](d, y, g, x, m, s, sx []T, relu bool) {
	c := len(m)
	d32, ok := any(d).([]float32)
	if !ok || !useAVX2 || c < 8 {
		if relu {
			Mask(d, y, g)
		} else {
			copy(d, g[:len(d)])
		}
		SumAndDotAboutRows(d, x, m, s, sx)
		return
	}
	rows := len(d) / c
	y32, g32, x32 := any(y).([]float32)[:rows*c], any(g).([]float32)[:rows*c], any(x).([]float32)[:rows*c]
	m32, s32, sx32 := any(m).([]float32), any(s).([]float32)[:c], any(sx).([]float32)[:c]
	clear(s32)
	clear(sx32)
	c8 := c &^ 7
	for lo, n := 0, BlockRows(c); lo < rows; lo += n {
		n = min(n, rows-lo)
		for k := 0; k < c8; k += 32 {
			maskSumAndDotRowsAVX2(&d32[lo*c+k], &y32[lo*c+k], &g32[lo*c+k], &x32[lo*c+k], n, c, &m32[k], min(4, (c8-k)/8), &s32[k], &sx32[k], relu)
		}
	}
	if c8 == c {
		return
	}
	for r := range rows {
		lo, hi := r*c+c8, (r+1)*c
		if relu {
			Mask(d32[lo:hi], y32[lo:hi], g32[lo:hi])
		} else {
			copy(d32[lo:hi], g32[lo:hi])
		}
	}
	sumAndDotFrom(d32[:rows*c], x32, m32, s32, sx32, c8)
}
