// Package mnist is the MNIST example's data and models: a reader and a
// writer of MNIST's IDX files (plain or gzipped), a synthetic data set in
// the same files for machines without the real one, and two classifiers,
// an MLP and a small CNN, as model functions that run on one device or
// wrapped by replicate.ModelFn. The example's main package trains them with
// replicated towers; tests and benchmarks import the same package.
//
// The data set (http://yann.lecun.com/exdb/mnist/) is four files in a
// directory, each NAME or NAME.gz:
//
//	train-images-idx3-ubyte  train-labels-idx1-ubyte  (60,000 examples)
//	t10k-images-idx3-ubyte   t10k-labels-idx1-ubyte   (10,000 examples)
package mnist
