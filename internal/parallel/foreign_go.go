//go:build !openblas

package parallel

// ForeignKernels says whether the towers' kernels are foreign code called
// through cgo: false in the pure-Go build, whose kernels are gonum's.
const ForeignKernels = false
