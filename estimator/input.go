package estimator

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/sharding"
)

// Batch is one step's input (sharding.Batch): features and labels keyed by
// name, each with the batch along dimension 0, sparse features, and the
// function that releases its memory.
type Batch = sharding.Batch

// InputFn yields batches until the end of its data, or until ctx is done.
// A yielded error ends the call that consumes it. Train and Evaluate run the
// sequence on a goroutine of its own, one batch ahead of the towers. A panic
// in the function or its sequence, a nil sequence, or a sequence that yields
// again after yield returned false fails the call with an error naming the
// input function (a *PanicError for a panic).
type InputFn func(ctx context.Context) iter.Seq2[Batch, error]

// Forever as TensorInput.Epochs repeats the data without end.
const Forever = -1

// TensorInput configures FromTensors.
type TensorInput struct {
	// BatchSize is the number of rows per batch; the last batch of an
	// epoch may be smaller (see DropRemainder). Required.
	BatchSize int
	// DropRemainder drops the last batch of an epoch when it is smaller
	// than BatchSize, as tf.data's batch(drop_remainder=True): every batch
	// then splits alike across the towers (a batch with fewer rows than
	// towers runs on fewer of them).
	DropRemainder bool
	// Epochs is how many passes over the data to make: 0 means 1, Forever
	// repeats without end. A Forever input given to Train goes on where
	// the global step says (StartBatch: the batches trained so far, on
	// whatever input), so that a run stopped and resumed from its
	// checkpoint reads the batches an uninterrupted run reads; an input of
	// a number of epochs makes them at every call, as TensorFlow's
	// numpy_input_fn.
	Epochs int
	// Shuffle reorders the rows in every epoch with a generator seeded by
	// Seed, so runs with the same seed see the same batches.
	Shuffle bool
	Seed    uint64
	// Processes, when more than 1, makes this the input of process Rank
	// of that many training together (replicate.Config.Processes):
	// BatchSize is then the batch of all of them, and this process yields
	// its part of every batch, Sizes(rows, Processes)[Rank] of its rows
	// (parts differ by at most one row). Every process must use the same
	// data, Seed and BatchSize; together they see the batches one process
	// would.
	Processes, Rank int
}

// FromTensors makes an input function over in-memory tensors, like
// TensorFlow's numpy_input_fn: every features and labels tensor holds all
// examples along dimension 0; labels may be nil. Batches are copies, made
// into the memory of released batches (see Batch.Release) when there is
// one of the same size.
func FromTensors(features, labels map[string]*tensor.Dense, cfg TensorInput) (InputFn, error) {
	whole := Batch{Features: features, Labels: labels}
	rows, err := whole.Rows()
	if err != nil {
		return nil, fmt.Errorf("input from tensors: %w", err)
	}
	if cfg.BatchSize < 1 {
		return nil, fmt.Errorf("input from tensors: batch size %d, want at least 1", cfg.BatchSize)
	}
	if cfg.DropRemainder && rows > 0 && rows < cfg.BatchSize {
		return nil, fmt.Errorf("input from tensors: %d rows make no whole batch of %d, and DropRemainder drops the rest", rows, cfg.BatchSize)
	}
	if cfg.Epochs < Forever {
		return nil, fmt.Errorf("input from tensors: epochs %d, want 0 or more, or Forever", cfg.Epochs)
	}
	if cfg.Processes > 1 && (cfg.Rank < 0 || cfg.Rank >= cfg.Processes) {
		return nil, fmt.Errorf("input from tensors: rank %d of %d processes does not exist", cfg.Rank, cfg.Processes)
	}
	if cfg.Processes > 1 && cfg.BatchSize < cfg.Processes {
		return nil, fmt.Errorf("input from tensors: a batch of %d rows cannot give each of %d processes a row", cfg.BatchSize, cfg.Processes)
	}
	epochs := cfg.Epochs
	if epochs == 0 {
		epochs = 1
	}
	src := map[string]map[string]rowSource{}
	for kind, m := range map[string]map[string]*tensor.Dense{"features": features, "labels": labels} {
		src[kind] = map[string]rowSource{}
		for k, t := range m {
			s, err := numeric.Slice(t)
			if err != nil {
				return nil, fmt.Errorf("input from tensors: %s %q: %w", kind, k, err)
			}
			src[kind][k] = rowSource{shape: t.Shape().Clone(), data: reflect.ValueOf(s), rowSize: t.Shape().TotalSize() / max(rows, 1)}
		}
	}
	end := rows // the rows an epoch batches
	if cfg.DropRemainder {
		end -= rows % cfg.BatchSize
	}
	perEpoch := int64((end + cfg.BatchSize - 1) / cfg.BatchSize)
	return func(ctx context.Context) iter.Seq2[Batch, error] {
		return func(yield func(Batch, error) bool) {
			rng := rand.New(rand.NewPCG(cfg.Seed, 0x70776572666c6f77))
			order := make([]int, rows)
			var free recycler
			var skip int64 // batches a resumed Train has trained on
			if epochs == Forever {
				skip = StartBatch(ctx)
			}
			for e := 0; epochs == Forever || e < epochs; e++ {
				for i := range order {
					order[i] = i
				}
				if cfg.Shuffle {
					rng.Shuffle(rows, func(i, j int) { order[i], order[j] = order[j], order[i] })
				}
				if perEpoch > 0 && skip >= perEpoch {
					if !cfg.Shuffle {
						skip %= perEpoch // every epoch is the same
					} else {
						skip -= perEpoch // the whole epoch, its shuffle drawn all the same
						if err := ctx.Err(); err != nil {
							yield(Batch{}, err)
							return
						}
						continue
					}
				}
				first := int(skip) * cfg.BatchSize
				skip = 0
				for start := first; start < end; start += cfg.BatchSize {
					if err := ctx.Err(); err != nil {
						yield(Batch{}, err)
						return
					}
					idx := order[start:min(start+cfg.BatchSize, rows)]
					if cfg.Processes > 1 {
						lo, hi, err := sharding.Part(len(idx), cfg.Processes, cfg.Rank)
						if err != nil {
							yield(Batch{}, fmt.Errorf("rows %d to %d of epoch %d for process %d of %d: %w", start, start+len(idx), e, cfg.Rank, cfg.Processes, err))
							return
						}
						idx = idx[lo:hi]
					}
					b := free.take(len(idx))
					b.Features = gather(b.Features, src["features"], idx)
					if labels != nil {
						b.Labels = gather(b.Labels, src["labels"], idx)
					}
					b.Release = free.releaser(b)
					if !yield(b, nil) {
						return
					}
				}
				if end == 0 {
					return // no rows: no epoch has a batch
				}
			}
		}
	}, nil
}

type rowSource struct {
	shape   tensor.Shape
	data    reflect.Value
	rowSize int
}

// gather copies rows idx of every source into dst's tensor of that name,
// or a new one when dst has none, and returns the tensors.
func gather(dst map[string]*tensor.Dense, src map[string]rowSource, idx []int) map[string]*tensor.Dense {
	if dst == nil {
		dst = make(map[string]*tensor.Dense, len(src))
	}
	for k, s := range src {
		n := len(idx) * s.rowSize
		var buf any
		if d, ok := dst[k]; ok {
			buf = d.Data()
		} else {
			buf = reflect.MakeSlice(s.data.Type(), n, n).Interface()
			shape := s.shape.Clone()
			shape[0] = len(idx)
			dst[k] = numeric.Over(shape, buf)
		}
		switch d := buf.(type) {
		case []float32:
			gatherRows(d, s.data.Interface().([]float32), idx, s.rowSize)
		case []float64:
			gatherRows(d, s.data.Interface().([]float64), idx, s.rowSize)
		case []int64:
			gatherRows(d, s.data.Interface().([]int64), idx, s.rowSize)
		case []int:
			gatherRows(d, s.data.Interface().([]int), idx, s.rowSize)
		default:
			v := reflect.ValueOf(buf)
			for i, r := range idx {
				reflect.Copy(v.Slice(i*s.rowSize, (i+1)*s.rowSize), s.data.Slice(r*s.rowSize, (r+1)*s.rowSize))
			}
		}
	}
	return dst
}

// gatherRows copies rows idx of src, each of size elements, into dst.
func gatherRows[T any](dst, src []T, idx []int, size int) {
	for i, r := range idx {
		copy(dst[i*size:(i+1)*size], src[r*size:(r+1)*size])
	}
}

// recycler keeps released batches of one input for reuse. Released
// batches come back from the consumer's goroutine, taken ones go out on
// the producer's.
type recycler struct {
	mu   sync.Mutex
	free []Batch
}

// take returns a released batch of rows rows, its Release cleared, or an
// empty Batch when there is none.
func (r *recycler) take(rows int) Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, b := range r.free {
		if n, err := b.Rows(); err == nil && n == rows {
			r.free = slices.Delete(r.free, i, i+1)
			b.Release = nil
			return b
		}
	}
	return Batch{}
}

// releaser returns b's Release: the first call hands b back (a batch given
// back twice would be handed out twice, two batches sharing memory); later
// ones do nothing. At most a few batches are kept: the consumer holds one,
// the read-ahead one or two.
func (r *recycler) releaser(b Batch) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.free) < 4 {
				r.free = append(r.free, b)
			}
		})
	}
}

// prefetch runs src on its own goroutine, one batch ahead of the consumer,
// so that the next batch is read and copied while the towers compute the
// current one. Breaking out of the returned sequence stops the producer.
//
// With gate, the producer reads the next batch only once start has been
// called (by the step, when its towers are running) or the consumer is
// done with the current batch: a producer woken the moment a batch is
// taken is queued just ahead of the towers the step then starts, and with
// every core running a tower it delays one of them by the whole read,
// where started behind them it fills the gaps they leave. Without gate it
// starts as soon as a batch is taken, and start does nothing.
func prefetch(ctx context.Context, src iter.Seq2[Batch, error], gate bool) (seq iter.Seq2[Batch, error], start func()) {
	goAhead := make(chan struct{}, 1)
	var released atomic.Bool
	start = func() {
		if gate && released.CompareAndSwap(false, true) {
			goAhead <- struct{}{}
		}
	}
	seq = func(yield func(Batch, error) bool) {
		type item struct {
			b   Batch
			err error
		}
		ctx, cancel := context.WithCancel(ctx)
		ch := make(chan item, 1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer close(ch)
			for b, err := range src {
				select {
				case ch <- item{b, err}:
				case <-ctx.Done():
					return
				}
				if err != nil {
					return
				}
				if gate {
					select {
					case <-goAhead:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
		defer func() {
			cancel()
			for range ch { // let the producer finish its send and exit
			}
			<-done
		}()
		for it := range ch {
			released.Store(false)
			if !yield(it.b, it.err) || it.err != nil {
				return
			}
			start()
		}
	}
	return seq, start
}

// ShardInput makes any input function the input of process rank of
// processes training together: it reads every batch of input and yields
// its part, Batch.Split(processes)[rank] (parts differ by at most one
// row), releasing the batch with the part. Every process must read the
// same batches. An input that can read only its own part (its own files)
// saves the others' reading; FromTensors does with TensorInput.Processes.
func ShardInput(input InputFn, rank, processes int) InputFn {
	return func(ctx context.Context) iter.Seq2[Batch, error] {
		return func(yield func(Batch, error) bool) {
			if processes < 1 || rank < 0 || rank >= processes {
				yield(Batch{}, fmt.Errorf("shard input: rank %d of %d processes does not exist", rank, processes))
				return
			}
			n := 0
			for b, err := range input(ctx) {
				if err != nil {
					yield(Batch{}, err)
					return
				}
				parts, _, err := b.Split(processes)
				if err != nil {
					yield(Batch{}, fmt.Errorf("shard input: batch %d for process %d of %d: %w", n, rank, processes, err))
					return
				}
				part := parts[rank]
				part.Release = b.Release
				if !yield(part, nil) {
					return
				}
				n++
			}
		}
	}
}
