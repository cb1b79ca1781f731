//go:build !amd64

package optimizers

// Without assembly the Go loops run every update.

const useAVX2 = false

func updateAVX2(*config, *coeffs[float32], []float32, []float32, [][]float32) {}
