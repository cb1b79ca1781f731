package layers

// The loops of batch normalization over one row of positions (one image's
// channel). The sums keep four partial sums, so that the additions do not
// wait on one another, and every loop indexes slices cut to one length, so
// that the compiler drops the bounds checks.

// sumsAbout returns Σ (x − m) and Σ (x − m)².
func sumsAbout[T float](x []T, m T) (s, ss T) {
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

// sumAndDotAbout returns Σ d and Σ d·(x − m).
func sumAndDotAbout[T float](d, x []T, m T) (s, sx T) {
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

// normalize sets o = act(g·(x − m)·s + b). The backward pass takes x − m
// again from x, rather than the forward pass writing (x − m)·s out for it.
func normalize[T float](x, o []T, m, s, g, b T, relu bool) {
	o = o[:len(x)]
	if relu {
		for j, v := range x {
			o[j] = max(g*((v-m)*s)+b, 0)
		}
		return
	}
	for j, v := range x {
		o[j] = g*((v-m)*s) + b
	}
}

// project sets d = k·(d − ms − (x − m)·mx): the input's gradient from the
// output's once the batch's sums are known.
func project[T float](d, x []T, k, ms, m, mx T) {
	x = x[:len(d)]
	for j, v := range d {
		d[j] = k * (v - ms - (x[j]-m)*mx)
	}
}
