// Package towers holds what one device's replica of a model needs, and what
// the replicas share.
//
//   - Device: a CPU or GPU, parsed from TensorFlow-style names ("/gpu:0",
//     "/device:CPU:1", any case) and printed canonically; LocalDevices is
//     the default tower set.
//   - Store: the variable store of one model, one master value per name in
//     creation order, with get-or-create, seeded initializers, placement of
//     masters on devices, and weights by name or as one flat vector for
//     exchanging them between workers.
//   - Tower: one gorgonia graph built on one device over the store, and
//     the program that runs it. Tower 0 creates variables; later towers
//     reuse them and prefix their node names "tower_i/". Each tower reads
//     the masters through its own tensor header, because gorgonia rewrites
//     operand headers in place. A tower's program leaves out the gradients
//     that symbolic differentiation made as a by-product and nothing reads
//     (with respect to the input batch, say), and runs the ops itself on
//     the goroutine that calls Run: gorgonia's tape machine starts a
//     goroutine and locks a thread on every run, and with BLAS calls
//     holding both cores those goroutines wait on the Go scheduler (a graph
//     with G.Read or G.Set statements, or GPU nodes, still goes to the
//     tape machine).
//   - RunAll runs towers at the same time, the first on the calling
//     goroutine and the others on internal/parallel's team of goroutines,
//     which are already running between the steps of a training loop;
//     a panic becomes an error naming the tower. SumGradients adds tower
//     gradients.
//   - SetBLASThreads and BLAS: the BLAS under the towers (gonum's pure Go
//     by default, OpenBLAS with the openblas build tag, one thread a call
//     unless set).
//
// The estimator package builds towers from a model function and drives
// them; most users only meet Tower (in their model function), Device and
// Store.
package towers
