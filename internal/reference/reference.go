// Package reference writes the layers of package layers with gorgonia's own
// ops (G.Mul, G.BroadcastAdd, G.Rectify, G.Conv2d, G.MaxPool2D, G.Mean of
// G.Square of G.Sub): the
// oracle layers' tests compare with, and the "plain gorgonia" variant of
// the towerbench models.
package reference

import (
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Dense returns x·kernel + bias (bias may be nil), rectified when relu.
func Dense(x, kernel, bias *G.Node, relu bool) (*G.Node, error) {
	y, err := G.Mul(x, kernel)
	if err != nil {
		return nil, err
	}
	if bias != nil {
		if y, err = G.BroadcastAdd(y, bias, nil, []byte{0}); err != nil {
			return nil, err
		}
	}
	if relu {
		return G.Rectify(y)
	}
	return y, nil
}

// MeanSquaredError returns mean((pred − labels)²).
func MeanSquaredError(pred, labels *G.Node) (*G.Node, error) {
	d, err := G.Sub(pred, labels)
	if err != nil {
		return nil, err
	}
	sq, err := G.Square(d)
	if err != nil {
		return nil, err
	}
	return G.Mean(sq)
}

// Conv2D returns G.Conv2d(x, kernel) + bias (bias may be nil, broadcast
// over images and positions), rectified when relu.
func Conv2D(x, kernel, bias *G.Node, stride, padding [2]int, relu bool) (*G.Node, error) {
	k := kernel.Shape()
	y, err := G.Conv2d(x, kernel, tensor.Shape{k[2], k[3]}, padding[:], stride[:], []int{1, 1})
	if err != nil {
		return nil, err
	}
	if bias != nil {
		b, err := G.Reshape(bias, tensor.Shape{1, k[0], 1, 1})
		if err != nil {
			return nil, err
		}
		if y, err = G.BroadcastAdd(y, b, nil, []byte{0, 2, 3}); err != nil {
			return nil, err
		}
	}
	if relu {
		return G.Rectify(y)
	}
	return y, nil
}

// MaxPool2D returns G.MaxPool2D(x) over size windows stride apart, without
// padding.
func MaxPool2D(x *G.Node, size, stride [2]int) (*G.Node, error) {
	return G.MaxPool2D(x, tensor.Shape{size[0], size[1]}, []int{0, 0}, stride[:])
}
