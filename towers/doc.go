// Package towers holds what the replicas of a model share, and what a model
// function sees of its own replica.
//
//   - Device: a CPU or GPU, parsed from TensorFlow-style names ("/gpu:0",
//     "/device:CPU:1", any case; ParseDevice, ParseDevices) and printed
//     canonically; LocalDevices is the default tower set.
//   - Store: the variable store of one model, one master value per name in
//     creation order, with get-or-create, seeded initializers, placement of
//     masters on devices (StoreConfig: a Placement for the model's
//     variables, a parameter server for the rest), and weights by name or
//     as one flat vector for exchanging them between workers.
//   - Scope: what a model function gets: one tower's gorgonia graph, its
//     device and index, and the store's variables by name. Tower 0
//     creates variables; later towers reuse them and prefix their node
//     names "tower_i/". Each tower reads the masters through its own tensor
//     header, because gorgonia rewrites operand headers in place.
//   - Group and Board: what the towers of a build meet and share. A Group
//     is a rendezvous where every tower hands in a part and gets the sum
//     (synchronized batch normalization); a tower that arrives first runs
//     its own put-off work (Movable ops), then helps with the work the
//     late towers have posted on the Board (Sharing ops: a convolution's
//     chunks of images).
//   - IndexedSlices: the sparse gradient of a variable (the rows a batch
//     touched, as an embedding lookup's), deduplicated, densified, and
//     concatenated over towers with their loss weights (ConcatSlices).
//   - SetBLASThreads and BLAS: the BLAS under the towers (gonum's pure Go
//     by default, OpenBLAS with the openblas build tag, one thread a call
//     unless set).
//
// Package replicate builds a tower per device from a model function and
// runs them (the runtime, internal/tower, is out of the model's reach);
// model code meets Scope, Device and the initializers.
package towers
