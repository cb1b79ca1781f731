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

// AvgPool2D returns the mean of x (N, C, H, W) over size windows stride
// apart, without padding, as G.Conv2d of every channel alone with a
// constant kernel. (G.AveragePool2D of gorgonia v0.9.18 divides each
// window's sum by the input's width, not by the window's size.)
func AvgPool2D(x *G.Node, size, stride [2]int) (*G.Node, error) {
	s := x.Shape()
	k := size[0] * size[1]
	var w any = make([]float64, k)
	for i := range k {
		w.([]float64)[i] = 1 / float64(k)
	}
	if x.Dtype() == tensor.Float32 {
		w32 := make([]float32, k)
		for i := range w32 {
			w32[i] = 1 / float32(k)
		}
		w = w32
	}
	kernel := G.NewTensor(x.Graph(), x.Dtype(), 4, G.WithShape(1, 1, size[0], size[1]), G.WithName(x.Name()+"_avg_kernel"),
		G.WithValue(tensor.New(tensor.WithShape(1, 1, size[0], size[1]), tensor.WithBacking(w))))
	planes, err := G.Reshape(x, tensor.Shape{s[0] * s[1], 1, s[2], s[3]})
	if err != nil {
		return nil, err
	}
	y, err := G.Conv2d(planes, kernel, tensor.Shape{size[0], size[1]}, []int{0, 0}, stride[:], []int{1, 1})
	if err != nil {
		return nil, err
	}
	ys := y.Shape()
	return G.Reshape(y, tensor.Shape{s[0], s[1], ys[2], ys[3]})
}

// GlobalAvgPool2D returns the mean of x (N, C, H, W) over H and W, of
// shape (N, C).
func GlobalAvgPool2D(x *G.Node) (*G.Node, error) {
	s := x.Shape()
	r, err := G.Reshape(x, tensor.Shape{s[0], s[1], s[2] * s[3]})
	if err != nil {
		return nil, err
	}
	return G.Mean(r, 2)
}
