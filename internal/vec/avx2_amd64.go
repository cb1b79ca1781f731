package vec

import "golang.org/x/sys/cpu"

// useAVX2 is whether the float32 loops run in assembly; tests turn it off
// to compare with the Go loops.
var useAVX2 = cpu.X86.HasAVX2

// The assembly loops, in avx2_amd64.s, take n, a positive multiple of 8
// (16 for the sums), elements.

//go:noescape
func affineAVX2(o, x *float32, n int, m, s, gain, b float32, relu bool)

//go:noescape
func sumsAboutAVX2(x *float32, n int, m float32, acc *[16]float32)

//go:noescape
func sumAndDotAboutAVX2(d, x *float32, n int, m float32, acc *[16]float32)

//go:noescape
func projectAVX2(d, x *float32, n int, k, ms, m, mx float32)

//go:noescape
func maskAVX2(o, y, grad *float32, n int)

//go:noescape
func addAVX2(o, a, b *float32, n int, relu bool)

//go:noescape
func reluAVX2(o, x *float32, n int)
