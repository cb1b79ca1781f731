//go:build openblas

package parallel

// ForeignKernels says whether the towers' kernels are foreign code called
// through cgo: true in the openblas build (OpenBLAS's products, and
// oneDNN's convolutions with the dnnl tag).
const ForeignKernels = true
