package layers_test

import (
	"math/rand/v2"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/layers"
)

// toNHWC returns x, n images of c channels of h×w in NCHW order, in NHWC
// order; fromNHWC undoes it.
func toNHWC(x []float64, n, c, h, w int) []float64 {
	t := make([]float64, len(x))
	for i := range n {
		for ch := range c {
			for p := range h * w {
				t[(i*h*w+p)*c+ch] = x[(i*c+ch)*h*w+p]
			}
		}
	}
	return t
}

func fromNHWC(t []float64, n, c, h, w int) []float64 {
	x := make([]float64, len(t))
	for i := range n {
		for ch := range c {
			for p := range h * w {
				x[(i*c+ch)*h*w+p] = t[(i*h*w+p)*c+ch]
			}
		}
	}
	return x
}

// imagesShape is the shape of n images of c channels of h×w in order f;
// imagesDims reads them back from such a shape.
func imagesShape(f layers.Format, n, c, h, w int) tensor.Shape {
	if f == layers.NHWC {
		return tensor.Shape{n, h, w, c}
	}
	return tensor.Shape{n, c, h, w}
}

func imagesDims(f layers.Format, s tensor.Shape) (n, c, h, w int) {
	if f == layers.NHWC {
		return s[0], s[3], s[1], s[2]
	}
	return s[0], s[1], s[2], s[3]
}

// randomFloats returns n normal numbers.
func randomFloats(rng *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = rng.NormFloat64()
	}
	return s
}
