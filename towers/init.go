package towers

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
)

// Initializer fills backing (a zeroed slice of dtype dt holding
// shape.TotalSize() elements, one for a scalar) with a variable's initial
// value. rng is seeded from the store's seed and the variable's name.
type Initializer func(rng *rand.Rand, dt tensor.Dtype, shape tensor.Shape, backing any) error

// Zeros initialises every element to zero.
func Zeros() Initializer {
	return func(*rand.Rand, tensor.Dtype, tensor.Shape, any) error { return nil }
}

// Constant initialises every element of a float variable to c.
func Constant(c float64) Initializer {
	return fill(func(*rand.Rand, tensor.Shape) float64 { return c })
}

// RandomUniform draws every element of a float variable from [lo, hi).
func RandomUniform(lo, hi float64) Initializer {
	return fill(func(r *rand.Rand, _ tensor.Shape) float64 { return lo + (hi-lo)*r.Float64() })
}

// RandomNormal draws every element of a float variable from N(mean, stddev²).
func RandomNormal(mean, stddev float64) Initializer {
	return fill(func(r *rand.Rand, _ tensor.Shape) float64 { return mean + stddev*r.NormFloat64() })
}

// GlorotUniform draws from U(-l, l) with l = sqrt(6/(fanIn+fanOut)), the
// default kernel initializer of TensorFlow's dense layers, with the fans
// of fans: a dense kernel (in, units) has fanIn in and fanOut units, a
// convolution kernel (F, C, KH, KW) as package layers lays them out C·KH·KW
// and F·KH·KW.
func GlorotUniform() Initializer {
	return fill(func(r *rand.Rand, s tensor.Shape) float64 {
		fanIn, fanOut := fans(s)
		l := math.Sqrt(6 / float64(fanIn+fanOut))
		return -l + 2*l*r.Float64()
	})
}

// fans returns the fan-in and fan-out of a kernel of shape s: (in, units)
// for a dense kernel; for a convolution kernel (F, C, KH, KW…), the
// receptive field KH·KW… times C and times F; a vector's length both ways,
// a scalar 1 and 1.
func fans(s tensor.Shape) (in, out int) {
	switch len(s) {
	case 0:
		return 1, 1
	case 1:
		return s[0], s[0]
	case 2:
		return s[0], s[1]
	}
	field := 1
	for _, d := range s[2:] {
		field *= d
	}
	return max(s[1]*field, 1), max(s[0]*field, 1)
}

// Values initialises a variable from a copy of t, which must have the
// variable's dtype and shape.
func Values(t *tensor.Dense) Initializer {
	return func(_ *rand.Rand, dt tensor.Dtype, shape tensor.Shape, backing any) error {
		if t.Dtype() != dt || !t.Shape().Eq(shape) {
			return fmt.Errorf("initial value has shape %v dtype %v, variable has %v %v", t.Shape(), t.Dtype(), shape, dt)
		}
		src, err := numeric.Slice(t)
		if err != nil {
			return err
		}
		return numeric.CopyInto(backing, src)
	}
}

// fill is the initializer that sets every element, in order, to a value of
// draw, written straight into backing: no buffer of the variable's size
// besides its own (an embedding table's initialization would otherwise
// leave a float64 copy of it as garbage).
func fill(draw func(*rand.Rand, tensor.Shape) float64) Initializer {
	return func(r *rand.Rand, dt tensor.Dtype, shape tensor.Shape, backing any) error {
		switch d := backing.(type) {
		case []float64:
			for i := range d {
				d[i] = draw(r, shape)
			}
		case []float32:
			for i := range d {
				d[i] = float32(draw(r, shape))
			}
		default:
			return fmt.Errorf("initializer needs a float dtype, have %v: set: element type %T is not float32 or float64", dt, backing)
		}
		return nil
	}
}

// HeNormal draws from N(0, 2/fanIn), He et al.'s initializer for layers
// followed by a rectifier (PyTorch's kaiming_normal_ with fan_in), with
// the fan-in of fans: the first dimension of a dense kernel (in, units),
// C·KH·KW for a convolution kernel (F, C, KH, KW) as package layers lays
// them out.
func HeNormal() Initializer {
	return fill(func(r *rand.Rand, s tensor.Shape) float64 {
		fanIn, _ := fans(s)
		return r.NormFloat64() * math.Sqrt(2/float64(max(fanIn, 1)))
	})
}

// TruncatedNormal draws from N(mean, stddev²) truncated to two standard
// deviations of the mean, a draw beyond them drawn again: TensorFlow's
// truncated_normal_initializer, which initializes its embedding columns'
// tables.
func TruncatedNormal(mean, stddev float64) Initializer {
	return fill(func(r *rand.Rand, _ tensor.Shape) float64 {
		for {
			if z := r.NormFloat64(); math.Abs(z) <= 2 {
				return mean + stddev*z
			}
		}
	})
}
