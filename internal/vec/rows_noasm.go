//go:build !amd64

package vec

// Without assembly the Go loops run everything; the functions below are
// never called.

func sumsRowsAVX2(x *float32, rows, stride int, m *float32, nv int, s, ss *float32)         {}
func sumAndDotRowsAVX2(d, x *float32, rows, stride int, m *float32, nv int, s, sx *float32) {}
func affineRowsAVX2(o, x *float32, rows, stride, c8 int, m, s, gain, b *float32, relu bool) {}
func projectRowsAVX2(d, src, x *float32, rows, stride, c8 int, k, ms, m, mx *float32)       {}

func maskSumAndDotRowsAVX2(d, y, grad, x *float32, rows, stride int, m *float32, nv int, s, sx *float32, relu bool) {
}
