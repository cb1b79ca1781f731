// Package layers holds neural-network layers for model functions, written
// as gorgonia ops of towerflow's own: a dense layer (Dense) and a 2-D
// convolution (Conv2D), each with its bias and activation fused into one
// op, max and average pooling (MaxPool2D, AvgPool2D, GlobalAvgPool2D), a
// rectifier (Rectify), a residual sum (Add), batch normalization
// (BatchNorm), dropout (Dropout), reshaping without a copy (Flatten,
// Reshape), the losses (MeanSquaredError, SparseSoftmaxCrossEntropy,
// SoftmaxCrossEntropy, SigmoidCrossEntropy, L2Loss for weight decay), and
// a classifier's outputs (Softmax, ArgMax).
//
// BatchNorm is the one layer that reaches beyond its tower: in training it
// sums its statistics, and their gradients, over the towers of the step
// through the Scope's rendezvous (towers.Group), so that N towers compute
// what one device computes on the whole batch; and it updates its moving
// statistics through state updates (Scope.Assign), which the engine runs
// once per step.
//
// They compute what the same layers written with gorgonia's ops compute
// (G.Mul, G.BroadcastAdd, G.Rectify, G.Conv2d, G.MaxPool2D, G.Mean of
// G.Square of G.Sub; the tests compare values and gradients with them), but
// they are built for a tower's loop, where one graph runs thousands of times
// with the same shapes:
//
//   - each op keeps its output (and its scratch: a convolution's unfolded
//     image, a pooling's argmax) from run to run instead of allocating it
//     again. gorgonia's ops allocate their result afresh on each run:
//     megabytes a step for a 512×512 layer, over a hundred for a
//     small convolutional network, and with several towers in one process,
//     garbage collection that stalls them all;
//   - bias, activation and their gradients are fused loops over the
//     product's output, with no broadcast copy of the bias and no branch
//     per element in the rectifier's gradient or the pooling;
//   - matrix products go to the BLAS gorgonia uses (gonum's, or OpenBLAS
//     with the openblas build tag), with transposes as BLAS flags rather
//     than copies.
//
// Gradients are symbolic, like gorgonia's: G.Grad (and so a tower's
// Gradients) differentiates through these ops, and a tower leaves out of
// its program the gradients nobody reads, such as the one with respect to
// the input batch. Second derivatives are not supported.
//
// The ops are used from model functions like any gorgonia op:
//
//	c, err := layers.Conv2D(x, t.MustVariable("conv/kernel", ...), nil, layers.Conv{Padding: [2]int{1, 1}, Activation: layers.ReLU})
//	p, err := layers.MaxPool2D(c, [2]int{2, 2}, [2]int{})
//	h, err := layers.Dense(flat, t.MustVariable("hidden/kernel", ...), t.MustVariable("hidden/bias", ...), layers.ReLU)
//	loss, err := layers.MeanSquaredError(out, labels["y"])
//
// Every op of one graph owns its buffers and ops are not shared between
// graphs, so towers running at the same time never write the same memory.
// A value an op returns is valid until the graph runs again (what a tower's
// Watch and Value give is a copy, as for any node).
package layers
