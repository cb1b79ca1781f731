//go:build !amd64

package optimizers

// Without assembly the Go loops run every update.

var useAVX2 = false

type avx2Coeffs struct{}

func broadcast(*coeffs[float32]) *avx2Coeffs { return nil }

func updateAVX2(*config, *avx2Coeffs, []float32, []float32, [][]float32) {}
