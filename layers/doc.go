// Package layers holds neural-network layers for model functions, written
// as gorgonia ops of towerflow's own: a dense layer (Dense) and a 2-D
// convolution (Conv2D), each with its bias and activation fused into one
// op, max and average pooling (MaxPool2D, AvgPool2D, GlobalAvgPool2D), a
// rectifier (Rectify), a residual sum (Add), batch normalization
// (BatchNorm), dropout (Dropout), reshaping without a copy (Flatten,
// Reshape), matrices side by side (Concat), the losses (MeanSquaredError, SparseSoftmaxCrossEntropy,
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
//   - each op keeps its output (and a pooling its argmax) from run to run
//     instead of allocating it again; what a convolution needs only while
//     it runs (its padded copies, or its unfolded image) is scratch every
//     op shares. gorgonia's ops
//     allocate their result afresh on each run:
//     megabytes a step for a 512×512 layer, over a hundred for a
//     small convolutional network, and with several towers in one process,
//     garbage collection that stalls them all;
//   - bias, activation and their gradients are fused loops over the
//     product's output, with no broadcast copy of the bias and no branch
//     per element in the rectifier's gradient or the pooling;
//   - matrix products go to the BLAS gorgonia uses (gonum's, or OpenBLAS
//     with the openblas build tag), with transposes as BLAS flags rather
//     than copies;
//   - with replicate.Config.Precision towers.BFloat16, Conv2D's and
//     Dense's products and their gradients compute in bfloat16 with float32
//     sums, where the CPU and build allow (BF16Support; precision.go);
//   - with the dnnl build tag, float32 convolutions and their gradients
//     run in oneDNN (internal/dnnl; UseOneDNN, ConvBackend); without it,
//     PureGoConvolution finds the convolutions oneDNN would speed up.
//
// Batches of images are NCHW or NHWC (Format, a field of Conv and
// BatchNormConfig and an optional argument of the pools); convolution
// kernels and batch norm's variables are the same in both, but not what a
// dense layer reads from flattened images (Format). oneDNN computes NHWC
// in place and NCHW through reorders, so NHWC is the faster order with
// -tags dnnl (PreferredFormat); Reformat converts a batch from one order
// to the other.
//
// Gradients are symbolic, like gorgonia's: G.Grad (and so a tower's
// Gradients) differentiates through these ops, and a tower leaves out of
// its program the gradients nobody reads, such as the one with respect to
// the input batch. Second derivatives are not supported.
//
// The ops are used from model functions like any gorgonia op, on
// variables the tower's Scope s gets by name:
//
//	x := features.Get("image") // (batch, 1, 28, 28)
//	kernel := s.MustVariable("conv/kernel", tensor.Float32, tensor.Shape{32, 1, 3, 3}, towers.GlorotUniform())
//	c, err := layers.Conv2D(x, kernel, nil, layers.Conv{Padding: [2]int{1, 1}, Activation: layers.ReLU}) // (batch, 32, 28, 28)
//	p, err := layers.MaxPool2D(c, [2]int{2, 2}, [2]int{})                                               // (batch, 32, 14, 14)
//	flat, err := layers.Flatten(p)                                                                      // (batch, 6272)
//	out, err := layers.Dense(flat, s.MustVariable("out/kernel", tensor.Float32, tensor.Shape{6272, 1}, towers.GlorotUniform()),
//		s.MustVariable("out/bias", tensor.Float32, tensor.Shape{1}, towers.Zeros()), layers.Linear)
//	loss, err := layers.MeanSquaredError(out, labels.Get("y"))
//
// Every op of one graph owns its buffers and ops are not shared between
// graphs, so towers running at the same time never write the same memory.
// A value an op returns is valid until the graph runs again (what a tower's
// Watch and Value give is a copy, as for any node).
//
// # Layers that own their variables
//
// Beside the ops, which take their variables as nodes a model function gets
// by name (Scope.Variable, TensorFlow 1 style), a layer can be a value that
// owns its variables, PyTorch style: NewDense, NewConv2D and NewBatchNorm
// make one in a Module (a tower's Scope and a path) and get or create its
// variables once; its Apply method may then be called on any number of
// inputs, every use reading the same variable nodes, so that symbolic
// differentiation adds the gradients of all uses.
//
//	enc := layers.NewModule(s, "encoder")
//	d, err := layers.NewDense(enc, "dense_1", layers.DenseConfig{In: 784, Units: 128, Activation: layers.ReLU})
//	h1, err := d.Apply(left)  // encoder/dense_1/kernel and encoder/dense_1/bias
//	h2, err := d.Apply(right) // the same two
//
// Names are paths: the layer dense_1 of the module encoder owns
// encoder/dense_1/kernel and encoder/dense_1/bias, the names the store,
// Store.Weights, checkpoints and warm start use, and Module.Names lists a
// module's variables, its submodules' included. A model function makes its
// modules and layers on every tower of every build; each tower's layers
// meet the same master variables by name, as variables by name do.
//
// A batch normalization layer may be applied any number of times out of
// training, but once in training per tower: that application declares the
// step's one update of the moving statistics, and a second is an error
// naming the layer (use a layer of another name for another input).
//
// One name, one variable. The Ray documents warn that two networks built
// in one TensorFlow graph get "_1"-suffixed variable names, after which
// set_weights by name fails. towerflow suffixes no name: two Estimators
// never share a store (each model has its own), and within one model two
// layers asking for one name share its variables on purpose, as two
// Scope.Variable calls of one name do; asked with another shape or dtype,
// the name is an error naming both shapes and dtypes.
package layers
