package estimator

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/replicate"
)

// Prediction is one example's predictions by name: each the example's row
// of the batch output (shape: the output's shape without dimension 0).
type Prediction map[string]*tensor.Dense

// Predict runs the model in Predict mode over input and yields one
// Prediction per example, in input order. Labels in the input are ignored.
// Iteration stops at the first error, which is yielded. A model directory
// without a checkpoint is an error wrapping ErrNotTrained.
func (e *Estimator) Predict(ctx context.Context, input InputFn) iter.Seq2[Prediction, error] {
	return func(yield func(Prediction, error) bool) {
		for out, err := range e.PredictBatches(ctx, input) {
			if err != nil {
				yield(nil, err)
				return
			}
			rows := -1
			for _, v := range out.Predictions {
				rows = v.Shape()[0]
				break
			}
			for r := 0; r < rows; r++ {
				p := Prediction{}
				for k, v := range out.Predictions {
					p[k] = row(v, r)
				}
				if !yield(p, nil) {
					return
				}
			}
		}
	}
}

// BatchOutput is one predict batch's results: predictions by name and
// export outputs by signature key, then output name, each with the batch
// along dimension 0.
type BatchOutput = replicate.Outputs

// PredictBatches is Predict a batch at a time, with the export outputs.
// The Estimator is locked only while a batch is computed, so the loop body
// may call its methods.
func (e *Estimator) PredictBatches(ctx context.Context, input InputFn) iter.Seq2[BatchOutput, error] {
	return func(yield func(BatchOutput, error) bool) {
		if input == nil {
			yield(BatchOutput{}, fmt.Errorf("predict: nil input function"))
			return
		}
		if err := e.locked(func() error {
			if e.closed {
				return ErrClosed
			}
			return e.restoreTrained(true)
		}); err != nil {
			yield(BatchOutput{}, fmt.Errorf("predict: %w", err))
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		n := 0
		src, late := readInput(ctx, input)
		defer func() {
			// The loop's consumer stopped reading: no error can reach it.
			if err := late(); err != nil {
				e.log.Warn("predict: input", "batch", n, "error", err)
			}
		}()
		for batch, err := range src {
			if err == nil {
				err = ctx.Err()
			}
			if n == 0 && errors.Is(err, ErrNoBatches) {
				e.log.Warn("predict: the input yielded no batches: no predictions", "error", err)
				return
			}
			if err != nil {
				yield(BatchOutput{}, fmt.Errorf("predict: input at batch %d: %w", n, err))
				return
			}
			out, err := e.predictStep(ctx, batch)
			if err != nil {
				yield(BatchOutput{}, fmt.Errorf("predict: batch %d: %w", n, err))
				return
			}
			n++
			if !yield(out, nil) {
				return
			}
		}
		if err := ctx.Err(); err != nil {
			yield(BatchOutput{}, fmt.Errorf("predict: %w", err))
		}
	}
}

// row returns a copy of row r of t, without dimension 0.
func row(t *tensor.Dense, r int) *tensor.Dense {
	data := reflect.ValueOf(t.Data())
	size := t.Shape().TotalSize() / t.Shape()[0]
	return numeric.Over(t.Shape()[1:], numeric.Copy(data.Slice(r*size, (r+1)*size).Interface()))
}
