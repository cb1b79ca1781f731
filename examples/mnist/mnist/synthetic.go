package mnist

import (
	"fmt"
	"math/rand/v2"
)

// Side is the height and width of MNIST's images, and of synthetic ones.
const Side = 28

// segments are the seven-segment display's segments lit for each digit:
// bit 0 the top (a), then clockwise b (upper right), c (lower right),
// d (bottom), e (lower left), f (upper left), and g the middle.
var segments = [Classes]uint8{
	0: 0b0111111, 1: 0b0000110, 2: 0b1011011, 3: 0b1001111, 4: 0b1100110,
	5: 0b1101101, 6: 0b1111101, 7: 0b0000111, 8: 0b1111111, 9: 0b1101111,
}

// The digit's frame before a shift: segments run between these columns
// and rows.
const (
	left, right       = 9, 18
	top, middle, foot = 5, 13, 21
	maxShift          = 3
)

// Synthetic returns n examples of a made-up task of MNIST's shape, for
// where the real data cannot be had: each image is its label's digit as a
// seven-segment display draws it, shifted by up to 3 pixels each way, with
// strokes 2 or 3 pixels wide of a random brightness, a few of their pixels
// missing, over sparse noise. The same seed gives the same examples.
func Synthetic(n int, seed uint64) *Set {
	r := rand.New(rand.NewPCG(seed, 0x6d6e697374))
	s := &Set{Rows: Side, Cols: Side, Pixels: make([]byte, n*Side*Side), Labels: make([]byte, n)}
	for i := range n {
		label := r.IntN(Classes)
		s.Labels[i] = byte(label)
		draw(r, s.Pixels[i*Side*Side:(i+1)*Side*Side], label)
	}
	return s
}

// draw draws digit into img, Side×Side pixels.
func draw(r *rand.Rand, img []byte, digit int) {
	for j := range img {
		if r.Float64() < 0.05 {
			img[j] = byte(r.IntN(100))
		}
	}
	dx, dy := r.IntN(2*maxShift+1)-maxShift, r.IntN(2*maxShift+1)-maxShift
	width := 2 + r.IntN(2)
	ink := 150 + r.IntN(106)
	// Each segment as the rectangle [x0, x1] × [y0, y1] its stroke covers.
	rects := [7][4]int{
		{left, right, top, top},       // a
		{right, right, top, middle},   // b
		{right, right, middle, foot},  // c
		{left, right, foot, foot},     // d
		{left, left, middle, foot},    // e
		{left, left, top, middle},     // f
		{left, right, middle, middle}, // g
	}
	for seg, rc := range rects {
		if segments[digit]&(1<<seg) == 0 {
			continue
		}
		for y := rc[2] + dy; y < rc[3]+dy+width; y++ {
			for x := rc[0] + dx; x < rc[1]+dx+width; x++ {
				if r.Float64() < 0.9 {
					img[y*Side+x] = byte(ink)
				}
			}
		}
	}
}

// WriteSynthetic writes a synthetic data set (see Synthetic) into dir in
// MNIST's files, gzipped when gz is set: train training examples and test
// test examples, each split from its own stream of the seed.
func WriteSynthetic(dir string, train, test int, seed uint64, gz bool) error {
	if train < 1 || test < 1 {
		return fmt.Errorf("synthetic MNIST: %d training and %d test examples, want at least one of each", train, test)
	}
	if err := Write(dir, Train, Synthetic(train, seed), gz); err != nil {
		return err
	}
	return Write(dir, Test, Synthetic(test, seed+1), gz)
}
