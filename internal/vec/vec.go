package vec

import "unsafe"

// Float is the element type of the slices the functions work on.
type Float interface{ float32 | float64 }

// Affine sets o[i] = g·((x[i] − m)·s) + b, then max(o[i], 0) when relu is
// set: batch normalization's output from its input. o must be at least as
// long as x.
func Affine[T Float](o, x []T, m, s, g, b T, relu bool) {
	o = o[:len(x)]
	if o32, ok := any(o).([]float32); ok && useAVX2 {
		n := len(x) &^ 7
		if n > 0 {
			affineAVX2(&o32[0], &any(x).([]float32)[0], n, float32(m), float32(s), float32(g), float32(b), relu)
		}
		o, x = o[n:], x[n:]
	}
	// T(…) rounds the product before the addition: without it Go may fuse
	// the two into one multiply-add (GOAMD64=v3), which the assembly does
	// not.
	if relu {
		for j, v := range x {
			o[j] = max(T(g*((v-m)*s))+b, 0)
		}
		return
	}
	for j, v := range x {
		o[j] = T(g*((v-m)*s)) + b
	}
}

// SumsAbout returns Σ (x − m) and Σ (x − m)².
func SumsAbout[T Float](x []T, m T) (s, ss T) {
	if x32, ok := any(x).([]float32); ok && useAVX2 {
		if n := len(x) &^ 15; n > 0 {
			var acc [16]float32
			sumsAboutAVX2(&x32[0], n, float32(m), &acc)
			s0, s1 := sumSplit(x[n:], m)
			return T(lanes(acc[:8])) + s0, T(lanes(acc[8:])) + s1
		}
	}
	return sumSplit(x, m)
}

// sumSplit returns Σ (x − m) and Σ (x − m)², in four partial sums each so
// that the additions do not wait on one another.
func sumSplit[T Float](x []T, m T) (s, ss T) {
	var s0, s1, s2, s3, q0, q1, q2, q3 T
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		d0, d1, d2, d3 := v[0]-m, v[1]-m, v[2]-m, v[3]-m
		s0, s1, s2, s3 = s0+d0, s1+d1, s2+d2, s3+d3
		q0, q1, q2, q3 = q0+d0*d0, q1+d1*d1, q2+d2*d2, q3+d3*d3
	}
	for _, v := range x[i:] {
		d := v - m
		s0 += d
		q0 += d * d
	}
	return (s0 + s1) + (s2 + s3), (q0 + q1) + (q2 + q3)
}

// SumAndDotAbout returns Σ d and Σ d·(x − m). x must be at least as long
// as d.
func SumAndDotAbout[T Float](d, x []T, m T) (s, sx T) {
	x = x[:len(d)]
	if d32, ok := any(d).([]float32); ok && useAVX2 {
		if n := len(d) &^ 15; n > 0 {
			var acc [16]float32
			sumAndDotAboutAVX2(&d32[0], &any(x).([]float32)[0], n, float32(m), &acc)
			s0, s1 := sumAndDotSplit(d[n:], x[n:], m)
			return T(lanes(acc[:8])) + s0, T(lanes(acc[8:])) + s1
		}
	}
	return sumAndDotSplit(d, x, m)
}

func sumAndDotSplit[T Float](d, x []T, m T) (s, sx T) {
	x = x[:len(d)]
	var s0, s1, s2, s3, p0, p1, p2, p3 T
	i := 0
	for ; i+4 <= len(d); i += 4 {
		v, w := d[i:i+4:i+4], x[i:i+4:i+4]
		s0, s1, s2, s3 = s0+v[0], s1+v[1], s2+v[2], s3+v[3]
		p0, p1, p2, p3 = p0+v[0]*(w[0]-m), p1+v[1]*(w[1]-m), p2+v[2]*(w[2]-m), p3+v[3]*(w[3]-m)
	}
	for j, v := range d[i:] {
		s0 += v
		p0 += v * (x[i+j] - m)
	}
	return (s0 + s1) + (s2 + s3), (p0 + p1) + (p2 + p3)
}

// lanes adds up the lanes of vector accumulators in pairs, in one fixed
// order.
func lanes(a []float32) float32 {
	for len(a) > 1 {
		h := len(a) / 2
		for i := range h {
			a[i] += a[h+i]
		}
		a = a[:h]
	}
	return a[0]
}

// Project sets d[i] = k·(d[i] − ms − (x[i] − m)·mx): batch normalization's
// input gradient from its output's, once the batch's sums are known. x
// must be at least as long as d.
func Project[T Float](d, x []T, k, ms, m, mx T) {
	x = x[:len(d)]
	if d32, ok := any(d).([]float32); ok && useAVX2 {
		n := len(d) &^ 7
		if n > 0 {
			projectAVX2(&d32[0], &any(x).([]float32)[0], n, float32(k), float32(ms), float32(m), float32(mx))
		}
		d, x = d[n:], x[n:]
	}
	for j, v := range d {
		d[j] = k * (v - ms - T((x[j]-m)*mx)) // T(…): no fused multiply-add, as in Affine
	}
}

// Mask sets o[i] = g[i] where y[i] > 0, else 0: a ReLU's input gradient
// from its output y. y and g must be at least as long as o.
//
// It selects on the bits, without a branch (a comparison of floats would be
// one, mispredicted on half the elements): a float is above zero exactly
// when its bits v, read as a signed integer, are (a NaN with the sign bit
// clear passes too), and for such v alone both −v and ^v have the sign bit
// set (v = minInt is −0.0: −v is negative but ^v is not). The slices are
// read as integers throughout, which keeps the floats out of the vector
// registers: twice as fast as moving every element between the two.
func Mask[T Float](o, y, g []T) {
	switch o := any(o).(type) {
	case []float32:
		y, g := any(y).([]float32)[:len(o)], any(g).([]float32)[:len(o)]
		if useAVX2 {
			n := len(o) &^ 7
			if n > 0 {
				maskAVX2(&o[0], &y[0], &g[0], n)
			}
			o, y, g = o[n:], y[n:], g[n:]
		}
		maskBits(asBits[int32](o), asBits[int32](y), asBits[int32](g))
	case []float64:
		maskBits(asBits[int64](o), asBits[int64](any(y).([]float64)[:len(o)]), asBits[int64](any(g).([]float64)[:len(o)]))
	}
}

func maskBits[I int32 | int64](o, y, g []I) {
	y, g = y[:len(o)], g[:len(o)]
	sign := int(unsafe.Sizeof(I(0)))*8 - 1
	for i, b := range y {
		o[i] = g[i] & ((-b & ^b) >> sign)
	}
}

// asBits reads a float slice as the signed integers of its bits.
func asBits[I int32 | int64, F float32 | float64](f []F) []I {
	return unsafe.Slice((*I)(unsafe.Pointer(unsafe.SliceData(f))), len(f))
}

// Add sets o[i] = a[i] + b[i], then max(o[i], 0) when relu is set. o and b
// must be at least as long as a.
func Add[T Float](o, a, b []T, relu bool) {
	o, b = o[:len(a)], b[:len(a)]
	if o32, ok := any(o).([]float32); ok && useAVX2 {
		n := len(a) &^ 7
		if n > 0 {
			addAVX2(&o32[0], &any(a).([]float32)[0], &any(b).([]float32)[0], n, relu)
		}
		o, a, b = o[n:], a[n:], b[n:]
	}
	if relu {
		for i, v := range a {
			o[i] = max(v+b[i], 0)
		}
		return
	}
	for i, v := range a {
		o[i] = v + b[i]
	}
}

// ReLU sets o[i] = max(x[i], 0). o must be at least as long as x.
func ReLU[T Float](o, x []T) {
	o = o[:len(x)]
	if o32, ok := any(o).([]float32); ok && useAVX2 {
		n := len(x) &^ 7
		if n > 0 {
			reluAVX2(&o32[0], &any(x).([]float32)[0], n)
		}
		o, x = o[n:], x[n:]
	}
	for i, v := range x {
		o[i] = max(v, 0)
	}
}
