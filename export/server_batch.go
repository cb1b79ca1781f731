package export

// Request batching: small requests for the same model version and
// signature are merged into one Run, and each gets its rows of the outputs
// back. See WithBatchTimeout.

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"gorgonia.org/tensor"
)

// batchKey says which requests may share a batch.
type batchKey struct {
	v   *servedVersion
	sig string
}

type batcher struct {
	max     int
	timeout time.Duration

	mu      sync.Mutex
	closed  bool
	pending map[batchKey]*batch
	// enqueued, when set (by tests), is called under mu after a request
	// joined a batch, with the batch's rows so far.
	enqueued func(key batchKey, rows int)
}

// batch is the requests merged into one Run.
type batch struct {
	key   batchKey
	rows  int
	reqs  []*batchRequest
	timer *time.Timer
}

type batchRequest struct {
	features map[string]*tensor.Dense
	rows     int
	done     chan batchResult // buffered: run never blocks on a request gone
}

type batchResult struct {
	outs map[string]*tensor.Dense
	err  error
}

func newBatcher(max int, timeout time.Duration) *batcher {
	return &batcher{max: max, timeout: timeout, pending: map[batchKey]*batch{}}
}

// submit adds a request of rows rows (fewer than max) to the open batch
// of its key, and waits for its outputs. The caller holds a reference on
// key.v.
func (b *batcher) submit(ctx context.Context, key batchKey, features map[string]*tensor.Dense, rows int) (map[string]*tensor.Dense, error) {
	req := &batchRequest{features: features, rows: rows, done: make(chan batchResult, 1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return runRecovered(ctx, key.v.s, key.sig, features)
	}
	bt := b.pending[key]
	if bt != nil && bt.rows+rows > b.max {
		b.flushLocked(bt)
		bt = nil
	}
	if bt == nil {
		bt = &batch{key: key}
		// The batch holds the version until it has run, even if every
		// request in it has gone.
		key.v.refs.Add(1)
		b.pending[key] = bt
		bt.timer = time.AfterFunc(b.timeout, func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.pending[key] == bt {
				b.flushLocked(bt)
			}
		})
	}
	bt.reqs = append(bt.reqs, req)
	bt.rows += rows
	if b.enqueued != nil {
		b.enqueued(key, bt.rows)
	}
	if bt.rows >= b.max {
		b.flushLocked(bt)
	}
	b.mu.Unlock()
	select {
	case res := <-req.done:
		return res.outs, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// flushLocked starts running bt; b.mu is held.
func (b *batcher) flushLocked(bt *batch) {
	if b.pending[bt.key] == bt {
		delete(b.pending, bt.key)
	}
	bt.timer.Stop()
	go bt.run()
}

// close runs the open batches at once; later requests run on their own.
func (b *batcher) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, bt := range b.pending {
		b.flushLocked(bt)
	}
}

// run runs the merged batch and hands each request its rows. A panic
// (of the servable or here) fails every request of the batch.
func (bt *batch) run() {
	defer bt.key.v.release()
	results := make([]batchResult, len(bt.reqs))
	func() {
		defer func() {
			if p := recover(); p != nil {
				err := &panicError{value: p, stack: debug.Stack()}
				for i := range results {
					results[i] = batchResult{err: err}
				}
			}
		}()
		outs, err := bt.runMerged()
		off := 0
		for i, req := range bt.reqs {
			if err != nil {
				results[i] = batchResult{err: err}
				continue
			}
			results[i] = batchResult{outs: sliceRows(outs, off, req.rows)}
			off += req.rows
		}
	}()
	for i, req := range bt.reqs {
		req.done <- results[i]
	}
}

func (bt *batch) runMerged() (map[string]*tensor.Dense, error) {
	features := bt.reqs[0].features
	if len(bt.reqs) > 1 {
		features = map[string]*tensor.Dense{}
		for name := range bt.reqs[0].features {
			parts := make([]*tensor.Dense, len(bt.reqs))
			for i, req := range bt.reqs {
				parts[i] = req.features[name]
			}
			features[name] = concatRows(parts)
		}
	}
	// The merged run belongs to no single request: a request that gives
	// up does not cancel the others.
	outs, err := bt.key.v.s.Run(context.Background(), bt.key.sig, features)
	if err != nil {
		return nil, err
	}
	if err := checkOutputs(outs, bt.rows); err != nil {
		return nil, fmt.Errorf("batch of %d requests: %w", len(bt.reqs), err)
	}
	return outs, nil
}

// runRecovered runs s, turning a panic into a *panicError.
func runRecovered(ctx context.Context, s Servable, sig string, features map[string]*tensor.Dense) (outs map[string]*tensor.Dense, err error) {
	defer func() {
		if p := recover(); p != nil {
			outs, err = nil, &panicError{value: p, stack: debug.Stack()}
		}
	}()
	return s.Run(ctx, sig, features)
}

// concatRows concatenates tensors of one dtype and per-example shape
// along dimension 0.
func concatRows(parts []*tensor.Dense) *tensor.Dense {
	data, shape := tensorData(parts[0])
	all := reflect.MakeSlice(reflect.TypeOf(data), 0, 0)
	rows := 0
	for _, t := range parts {
		d, s := tensorData(t)
		all = reflect.AppendSlice(all, reflect.ValueOf(d))
		rows += s[0]
	}
	shape = append([]int{rows}, shape[1:]...)
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(all.Interface()))
}

// sliceRows returns rows [off, off+n) of every output.
func sliceRows(outs map[string]*tensor.Dense, off, n int) map[string]*tensor.Dense {
	res := make(map[string]*tensor.Dense, len(outs))
	for _, name := range slices.Sorted(maps.Keys(outs)) {
		data, shape := tensorData(outs[name])
		size := numElements(shape[1:])
		part := reflect.ValueOf(data).Slice3(off*size, (off+n)*size, (off+n)*size).Interface()
		res[name] = tensor.New(tensor.WithShape(append([]int{n}, shape[1:]...)...), tensor.WithBacking(part))
	}
	return res
}
