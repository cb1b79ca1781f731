package vec

// The assembly loops over channels-last rows, in rows_amd64.s. Each takes
// rows ≥ 1 rows, stride elements apart.

// sumsRowsAVX2 adds, over the rows, x − m to s and (x − m)² to ss for the
// 8·nv channels (1 ≤ nv ≤ 4) at x, m, s and ss.
//
//go:noescape
func sumsRowsAVX2(x *float32, rows, stride int, m *float32, nv int, s, ss *float32)

// sumAndDotRowsAVX2 adds, over the rows, d to s and d·(x − m) to sx for
// the 8·nv channels (1 ≤ nv ≤ 4) at d, x, m, s and sx.
//
//go:noescape
func sumAndDotRowsAVX2(d, x *float32, rows, stride int, m *float32, nv int, s, sx *float32)

// affineRowsAVX2 is Affine over the first c8 channels (a positive multiple
// of 8) of the rows, with the channels' parameters at m, s, g and b.
//
//go:noescape
func affineRowsAVX2(o, x *float32, rows, stride, c8 int, m, s, gain, b *float32, relu bool)

// projectRowsAVX2 is ProjectRowsFrom over the first c8 channels (a
// positive multiple of 8) of the rows, with the channels' parameters at
// k, ms, m and mx.
//
//go:noescape
func projectRowsAVX2(d, src, x *float32, rows, stride, c8 int, k, ms, m, mx *float32)

// maskSumAndDotRowsAVX2 sets d to grad where y > 0, else 0 (Mask), or to
// grad without relu, then adds d to s and d·(x − m) to sx, over the rows,
// for the 8·nv channels (1 ≤ nv ≤ 4) at d, y, grad, x, m, s and sx.
//
//go:noescape
func maskSumAndDotRowsAVX2(d, y, grad, x *float32, rows, stride int, m *float32, nv int, s, sx *float32, relu bool)
