// Package serving answers requests for exported models over HTTP: a
// [Server] speaks TensorFlow Serving's REST API
// (https://www.tensorflow.org/tfx/serving/api_rest) for the newest version
// of each model it is given, and the versions its labels name
// ([ModelConfig.Labels]).
//
// It serves what package export writes and loads. Estimator.Export writes
// numbered version directories under a model's base directory; a
// [ModelConfig] names that base directory and the Go model function, and
// the server loads the newest version with export.LoadLatest into an
// *export.Predictor. A [ModelConfig.Loader] may provide versions instead:
// any [Servable]. [Server.Reload] and [Server.Watch] swap newer versions in
// while serving; requests in flight finish on the version they started on.
//
// A predict, classify or regress request goes through the same steps: its
// body is read (413 over the limit, 429 when the bodies in flight would
// exceed their budget; gzip bodies are decompressed), its route picks the
// model and version (404, 405 otherwise), its JSON body is decoded into
// the tensors of a signature's inputs (400 for anything the signature
// cannot take), the version runs the signature, alone or merged with other
// small requests (see [Config.BatchTimeout]), and the outputs are written
// back as TensorFlow Serving writes them, after the version is released.
//
// A version whose export has a preprocessor (estimator.Preprocess; an
// [ExampleServable] whose Preprocessor reports one) takes raw feature
// values by name instead of the signature's tensors: tf.Example JSON in
// classify and regress, rows ("instances") or columns ("inputs") of raw
// values in predict, strings, numbers and {"b64": ...} bytes, a value or a
// flat list per feature. They become dataset.Examples, which the version
// preprocesses into the signature's inputs (400 for a value it refuses,
// naming the example and the feature) before they run as any request.
// Its metadata describes the raw features, when the preprocessor does.
//
// A Server is configured with a [Config] whose zero value works and bounds
// what clients can take: bodies up to 16 MiB, requests of up to 8192
// examples, 64 MiB of bodies in flight, no batching, no logging, and
// timeouts on the connections it accepts ([Server.Serve],
// [Server.ListenAndServe]). [Server.Shutdown]
// stops it gracefully within a context and [Server.Close] at once; neither
// waits for a client that does not read its answer. [ListenAndServe] and
// [Serve] run any handler until a context is done, then shut down
// gracefully.
package serving
