package cifar

import (
	"fmt"
	"math/rand/v2"
)

// colours are the synthetic classes' colours, red, green, blue.
var colours = [Classes][Channels]int{
	{220, 40, 40},   // red
	{40, 200, 60},   // green
	{50, 80, 230},   // blue
	{230, 220, 50},  // yellow
	{40, 210, 220},  // cyan
	{220, 50, 210},  // magenta
	{240, 140, 30},  // orange
	{130, 60, 200},  // purple
	{240, 240, 240}, // white
	{140, 90, 40},   // brown
}

// lit reports whether pixel (u, v) of a size×size object of class c has
// the class's colour: each class has its own pattern.
func lit(c, u, v, size int) bool {
	h := size / 2
	du, dv := abs(u-h), abs(v-h)
	switch c {
	case 0: // horizontal stripes
		return v/2%2 == 0
	case 1: // vertical stripes
		return u/2%2 == 0
	case 2: // diagonal stripes
		return (u+v)/2%2 == 0
	case 3: // the other diagonal's stripes
		return (u-v+2*size)/2%2 == 0
	case 4: // a checkerboard
		return (u/3+v/3)%2 == 0
	case 5: // concentric squares
		return max(du, dv)/2%2 == 0
	case 6: // a cross
		return du <= 2 || dv <= 2
	case 7: // a disc
		return du*du+dv*dv <= h*h
	case 8: // a ring
		d := du*du + dv*dv
		return d <= h*h && d >= (h-3)*(h-3)
	default: // an X
		return abs(u-v) <= 1 || abs(u+v-size+1) <= 1
	}
}

func abs(x int) int { return max(x, -x) }

// Synthetic returns n examples of a made-up task of CIFAR-10's shape, for
// where the real data cannot be had: each image is a square object, 14 to
// 22 pixels wide and anywhere in the image, patterned in its label's own
// way (stripes of four orientations, a checkerboard, squares, a cross, a
// disc, a ring, an X) in its label's colour, varied in hue and brightness,
// over a dark background of a random grey, slightly tinted, with noise on
// every pixel. The same seed gives the same examples.
func Synthetic(n int, seed uint64) *Set {
	r := rand.New(rand.NewPCG(seed, 0x6369666172))
	s := &Set{Labels: make([]byte, n), Pixels: make([]byte, n*ImageSize)}
	for i := range n {
		label := r.IntN(Classes)
		s.Labels[i] = byte(label)
		draw(r, s.Image(i), label)
	}
	return s
}

// draw draws an object of class c into img.
func draw(r *rand.Rand, img []byte, c int) {
	var back, ink [Channels]int
	bright := 0.7 + 0.3*r.Float64()
	grey := 40 + r.IntN(50)
	for ch := range Channels {
		back[ch] = grey + r.IntN(21) - 10
		ink[ch] = int(float64(colours[c][ch]+r.IntN(41)-20) * bright)
	}
	size := 14 + r.IntN(9)
	x0, y0 := r.IntN(Side-size+1), r.IntN(Side-size+1)
	for y := range Side {
		for x := range Side {
			col := &back
			if u, v := x-x0, y-y0; u >= 0 && u < size && v >= 0 && v < size && lit(c, u, v, size) {
				col = &ink
			}
			for ch := range Channels {
				p := col[ch] + r.IntN(31) - 15
				img[ch*Side*Side+y*Side+x] = byte(min(max(p, 0), 255))
			}
		}
	}
}

// WriteSynthetic writes a synthetic data set (see Synthetic) into dir in
// CIFAR-10's files: train training examples over data_batch_1.bin to
// data_batch_5.bin and test test examples in test_batch.bin, each split
// from its own stream of the seed.
func WriteSynthetic(dir string, train, test int, seed uint64) error {
	if train < 1 || test < 1 {
		return fmt.Errorf("synthetic CIFAR-10: %d training and %d test examples, want at least one of each", train, test)
	}
	if err := Write(dir, Train, Synthetic(train, seed)); err != nil {
		return err
	}
	return Write(dir, Test, Synthetic(test, seed+1))
}
