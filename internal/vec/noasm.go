//go:build !amd64

package vec

// Without assembly the Go loops run everything; the functions below are
// never called.

const useAVX2 = false

func affineAVX2(o, x *float32, n int, m, s, gain, b float32, relu bool)    {}
func sumsAboutAVX2(x *float32, n int, m float32, acc *[16]float32)         {}
func sumAndDotAboutAVX2(d, x *float32, n int, m float32, acc *[16]float32) {}
func projectAVX2(d, x *float32, n int, k, ms, m, mx float32)               {}
func maskAVX2(o, y, grad *float32, n int)                                  {}
func addAVX2(o, a, b *float32, n int, relu bool)                           {}
func reluAVX2(o, x *float32, n int)                                        {}
