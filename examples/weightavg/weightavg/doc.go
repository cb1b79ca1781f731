// Package weightavg is the weight-averaging example's logic, Ray's
// ResNet example in Go: N workers, each an Estimator with its own towers
// and its own optimizer state, train on their own parts of the data; every
// round each worker takes ComputeSteps local steps, then the workers'
// weights are averaged and every worker goes on from the average. Rank 0
// is also the driver: after a round it evaluates the averaged model on the
// test set, prints a progress line and, at the end, writes the averaged
// model to the model directory. The example's main package runs it; tests
// and benchmarks import the same package.
//
// Ray's driver collects get_weights() from every actor, averages them and
// sends them back with set_weights(). Here a worker ships its weights as
// one flat vector (Worker.Weights: towers.Store.Flat, then the model's
// state such as batch norm's moving statistics) and the average is one
// all-reduce over the workers' collective.Comm divided by their number
// (collective.Average), after which every worker sets the vector
// (Worker.SetWeights). The same code runs the workers as goroutines of one
// process over collective.Local (Ray's actors on one machine) or one
// worker per process under mpirun over collective.Join.
//
// Every round starts with a small all-reduce of each worker's status,
// mean loss and vector length, so a worker that failed (its input, its
// model, the driver's evaluation) stops every worker with an error naming
// it instead of leaving them waiting in the average. Every worker starts
// from the same weights: each initializes them from Config.Seed.
//
// # Weight averaging or synchronous training
//
// replicate.Config.Processes trains synchronously: every step the
// processes all-reduce their gradients, and every optimizer applies the
// same update. Weight averaging (this example, or the engine's
// replicate.Config.Averaging) all-reduces weights only every K steps:
//
//   - K = 1 with plain SGD on equal parts of every batch equals synchronous
//     data parallelism: the mean of one SGD step from the same weights is
//     one step along the mean gradient (the tests hold it to that).
//     Optimizers with state (momentum, Adam) keep each worker's own slots,
//     so they differ from it even at K = 1.
//   - A larger K communicates K times less often, each time the same
//     bytes, and lets the workers drift apart between averages: fewer,
//     cheaper communications for less accuracy per step.
//
// Synchronous training is the better choice when the network is fast next
// to a step's compute (one machine, a fast interconnect): it learns the
// most per step. Weight averaging is the better choice when communication
// dominates (slow links, large models, small steps) or the workers are
// loosely coupled (different speeds, data that lives with each worker).
package weightavg
