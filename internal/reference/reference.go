// Package reference writes the layers of package layers with gorgonia's own
// ops (G.Mul, G.BroadcastAdd, G.Rectify, G.Mean of G.Square of G.Sub): the
// oracle layers' tests compare with, and the "plain gorgonia" variant of
// the towerbench models.
package reference

import (
	G "gorgonia.org/gorgonia"
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
