package estimator

import "context"

type startBatchKey struct{}

// StartBatch is the number of batches the steps already trained have read
// from the input, for an input function that resumes where they stopped:
// Train calls its input function with a context whose StartBatch is the
// global step it starts from (the restored checkpoint's) times
// replicate.Config.AccumulateSteps. It is 0 outside Train (Evaluate,
// Predict), and for a context that does not come from Train.
//
// An input that skips that many batches and goes on with the next one
// makes a run stopped and resumed from its checkpoint read exactly the
// batches an uninterrupted run reads, provided that every step so far was
// trained on this input from its start (dataset.Pipeline does so, and
// FromTensors with Forever epochs).
func StartBatch(ctx context.Context) int64 {
	n, _ := ctx.Value(startBatchKey{}).(int64)
	return n
}

// WithStartBatch returns ctx with StartBatch n, as Train gives its input
// function (for tests of input functions, and for inputs wrapping others).
func WithStartBatch(ctx context.Context, n int64) context.Context {
	return context.WithValue(ctx, startBatchKey{}, n)
}
