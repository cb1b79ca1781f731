// Package vec holds the elementwise loops and short reductions that the
// memory-bound passes of a training step run over float slices: batch
// normalization's statistics, normalization and input gradient, the ReLU
// mask and rectifier, and the additions of residual blocks and of gradients that meet.
//
// Each function takes float32 or float64 slices. On amd64 machines with
// AVX2 the float32 loops run in assembly, eight lanes at a time, and give
// the same bits as the Go loops for the elementwise functions (the same
// operations in the same order, no fused multiply-adds: the Go loops round
// each product with a conversion, so that a GOAMD64=v3 build does not fuse
// them either); the reductions add
// in a different order than the Go loops, the same order on every call. The
// Go loops run everything else: float64, other architectures, machines
// without AVX2, and the few elements past the last whole vector.
//
// The Rows functions (rows.go) are the per-channel passes over
// channels-last (NHWC) data, rows of C values: vectors run across the
// channels, and each channel's sums add its rows in order, in assembly and
// in Go alike.
//
// Go's compiler does not vectorize these loops, and in ResNet-20 they took
// about a third of a training step with oneDNN's convolutions (see README,
// Performance); the assembly runs them 5-16x as fast (BenchmarkKernels).
package vec
