package mnist

import (
	"cmp"
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/examples/internal/classifier"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/towers"
)

// Net is one of the example's classifiers: a model function over the
// feature ImageKey (float32 pixels in [0, 1], in the net's Layout) and the
// label LabelKey (int64 digits), and that layout.
//
// Its Spec has the loss (the mean softmax cross-entropy of the logits), the
// eval metric "accuracy", the predictions "classes" (the most probable
// digit, int64) and "probabilities" (the softmax of the logits, one column
// per digit), and two export signatures: the default classifies, answering
// each image's most probable digit with its probability; "predict" answers
// the classes and probabilities.
type Net interface {
	Model(s *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, params model.Params) (*model.Spec, error)
	Layout() Layout
	// Params is the number of the net's parameters (its variables'
	// elements) for images of rows×cols.
	Params(rows, cols int) float64
}

// PredictSignature is the key of the export signature of both predictions.
const PredictSignature = classifier.PredictSignature

// MLP is a multilayer perceptron: flat images, one hidden layer of ReLU
// units, and a dense layer of 10 logits.
type MLP struct {
	// Hidden is the number of hidden units; 0 means 128.
	Hidden int
}

// Layout returns Flat.
func (MLP) Layout() Layout { return Flat }

// Params is the number of the MLP's parameters for images of rows×cols.
func (m MLP) Params(rows, cols int) float64 {
	h := float64(cmp.Or(m.Hidden, 128))
	return denseParams(float64(rows)*float64(cols), h) + denseParams(h, Classes)
}

// Model is the MLP's model function.
func (m MLP) Model(s *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, _ model.Params) (*model.Spec, error) {
	x, err := image(features, "MLP", Flat, 2)
	if err != nil {
		return nil, err
	}
	h, err := dense(s, "hidden", x, cmp.Or(m.Hidden, 128), layers.ReLU)
	if err != nil {
		return nil, err
	}
	logits, err := dense(s, "logits", h, Classes, layers.Linear)
	if err != nil {
		return nil, err
	}
	return classifier.Head(mode, logits, labels, LabelKey)
}

// CNN is a small convolutional network: NCHW images; two blocks of a 5×5
// convolution ("same" padding) with ReLU and a 2×2 max-pool; a dense layer
// of ReLU units; a dense layer of 10 logits.
type CNN struct {
	// Filters are the two convolutions' output channels; 0 means 32 and
	// 64.
	Filters [2]int
	// Hidden is the number of units of the dense ReLU layer; 0 means 128.
	Hidden int
}

// Layout returns NCHW.
func (CNN) Layout() Layout { return NCHW }

// Params is the number of the CNN's parameters for images of rows×cols.
func (c CNN) Params(rows, cols int) float64 {
	f1, f2 := float64(cmp.Or(c.Filters[0], 32)), float64(cmp.Or(c.Filters[1], 64))
	h := float64(cmp.Or(c.Hidden, 128))
	// Each block's 2×2 max-pool halves the image, rounding down.
	flat := f2 * float64(rows/4) * float64(cols/4)
	return denseParams(25, f1) + denseParams(25*f1, f2) + denseParams(flat, h) + denseParams(h, Classes)
}

// denseParams is the number of parameters of a dense layer (or of a
// convolution, in*kernel area inputs) of in inputs and out outputs.
func denseParams(in, out float64) float64 { return in*out + out }

// Model is the CNN's model function.
func (c CNN) Model(s *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, _ model.Params) (*model.Spec, error) {
	h, err := image(features, "CNN", NCHW, 4)
	if err != nil {
		return nil, err
	}
	if shape := h.Shape(); shape[1] != 1 || shape[2] < 4 || shape[3] < 4 {
		return nil, fmt.Errorf("CNN: images of shape %v, want (N, 1, H, W) with H and W at least 4", shape)
	}
	for i, f := range []int{cmp.Or(c.Filters[0], 32), cmp.Or(c.Filters[1], 64)} {
		if h, err = convBlock(s, fmt.Sprintf("conv%d", i+1), h, f); err != nil {
			return nil, err
		}
	}
	shape := h.Shape()
	flat, err := G.Reshape(h, tensor.Shape{shape[0], shape[1] * shape[2] * shape[3]})
	if err != nil {
		return nil, fmt.Errorf("CNN: flatten %v: %w", shape, err)
	}
	if h, err = dense(s, "dense", flat, cmp.Or(c.Hidden, 128), layers.ReLU); err != nil {
		return nil, err
	}
	logits, err := dense(s, "logits", h, Classes, layers.Linear)
	if err != nil {
		return nil, err
	}
	return classifier.Head(mode, logits, labels, LabelKey)
}

// image returns the image feature, checking that it has dims dimensions.
func image(features model.Features, net string, l Layout, dims int) (*G.Node, error) {
	x, err := features.Lookup(ImageKey)
	if err != nil {
		return nil, err
	}
	if x.Dims() != dims || x.Dtype() != tensor.Float32 {
		return nil, fmt.Errorf("%s: feature %q is %v of shape %v, want float32 images in the %v layout (%d dimensions)", net, ImageKey, x.Dtype(), x.Shape(), l, dims)
	}
	return x, nil
}

// dense returns act(x·kernel + bias) for a dense layer name of out units.
func dense(s *towers.Scope, name string, x *G.Node, out int, act layers.Activation) (*G.Node, error) {
	kernel, err := s.Variable(name+"/kernel", tensor.Float32, tensor.Shape{x.Shape()[1], out}, towers.GlorotUniform())
	if err != nil {
		return nil, err
	}
	bias, err := s.Variable(name+"/bias", tensor.Float32, tensor.Shape{out}, towers.Zeros())
	if err != nil {
		return nil, err
	}
	return layers.Dense(x, kernel, bias, act)
}

// convBlock returns a 5×5 convolution name of filters outputs with "same"
// padding and ReLU, max-pooled 2×2.
func convBlock(s *towers.Scope, name string, x *G.Node, filters int) (*G.Node, error) {
	kernel, err := s.Variable(name+"/kernel", tensor.Float32, tensor.Shape{filters, x.Shape()[1], 5, 5}, towers.GlorotUniform())
	if err != nil {
		return nil, err
	}
	bias, err := s.Variable(name+"/bias", tensor.Float32, tensor.Shape{filters}, towers.Zeros())
	if err != nil {
		return nil, err
	}
	c, err := layers.Conv2D(x, kernel, bias, layers.Conv{Padding: [2]int{2, 2}, Activation: layers.ReLU})
	if err != nil {
		return nil, err
	}
	return layers.MaxPool2D(c, [2]int{2, 2}, [2]int{})
}
