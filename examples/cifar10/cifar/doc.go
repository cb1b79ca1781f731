// Package cifar is the CIFAR-10 example's data: a reader and a writer of
// CIFAR-10's binary files, a synthetic data set in the same files for
// machines without the real one, and the input pipeline that turns a split
// into normalized batches, with the random crops and flips that training
// on CIFAR-10 customarily uses, made ahead of the towers by worker
// goroutines. The example's main package trains a model on them; tests
// and benchmarks import the same package.
//
// The data set (https://www.cs.toronto.edu/~kriz/cifar.html, "CIFAR-10
// binary version") is six files in a directory:
//
//	data_batch_1.bin … data_batch_5.bin  (50,000 training examples)
//	test_batch.bin                       (10,000 test examples)
//
// Each file is a sequence of 3073-byte records: a label byte (0 to 9), then
// the image's 3072 pixel bytes, 1024 red, 1024 green and 1024 blue, each
// channel 32×32 pixels row-major. Errors count records from 0.
package cifar
