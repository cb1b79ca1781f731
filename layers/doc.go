// Package layers holds neural-network layers for model functions, written
// as gorgonia ops of towerflow's own: a dense layer with its bias and
// activation fused into one op (Dense), a rectifier (ReLU) and a mean squared
// error (MeanSquaredError).
//
// They compute what the same layer written with gorgonia's ops computes
// (G.Mul, G.BroadcastAdd, G.Rectify, G.Mean of G.Square of G.Sub), but they
// are built for a tower's loop, where the same graph runs thousands of times
// with the same shapes:
//
//   - each op keeps its output from run to run instead of allocating a new
//     one (gorgonia's tape machine allocates every intermediate afresh on
//     each run, which for a 512×512 layer is megabytes a step and, with
//     several towers in one process, garbage collection that stalls them
//     all);
//   - bias, activation and their gradients are fused loops over the matrix
//     product's output, with no broadcast copy of the bias and no branch per
//     element in the rectifier;
//   - matrix products go to the BLAS gorgonia uses (gonum's, or OpenBLAS
//     with the openblas build tag), with transposes as BLAS flags rather
//     than copies.
//
// Gradients are symbolic, like gorgonia's: G.Grad (and so a tower's
// Gradients) differentiates through these ops, and a tower leaves out of
// its program the gradients nobody reads (with respect to the input batch).
// Second derivatives are not supported.
//
// The ops are used from model functions like any gorgonia op:
//
//	h, err := layers.Dense(x, t.MustVariable("hidden/kernel", ...), t.MustVariable("hidden/bias", ...), layers.ReLU)
//	out, err := layers.Dense(h, kernel2, bias2, layers.Linear)
//	loss, err := layers.MeanSquaredError(out, labels)
//
// Every op of one graph owns its output; ops are not shared between graphs,
// so towers running at the same time never write to the same memory.
package layers
