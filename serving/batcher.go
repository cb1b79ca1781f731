package serving

// Request batching: small requests for the same model version and
// signature are merged into one Run, and each gets its rows of the outputs
// back (see Config.BatchTimeout). Package sharding joins the requests'
// features and cuts the outputs into each request's rows.

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/sharding"
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
	sparse   map[string]sharding.SparseCOO // nil without sparse inputs
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
func (b *batcher) submit(ctx context.Context, key batchKey, features map[string]*tensor.Dense, sparse map[string]sharding.SparseCOO, rows int) (map[string]*tensor.Dense, error) {
	req := &batchRequest{features: features, sparse: sparse, rows: rows, done: make(chan batchResult, 1)}
	if !b.enqueue(key, req) {
		return runRecovered(ctx, key.v.s, key.sig, features, sparse)
	}
	select {
	case res := <-req.done:
		return res.outs, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// enqueue adds req to the open batch of its key, or to a new one when
// there is none or req does not fit, and runs the batch once full. It
// returns false, and enqueues nothing, once the batcher is closed.
func (b *batcher) enqueue(key batchKey, req *batchRequest) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	bt := b.pending[key]
	if bt != nil && bt.rows+req.rows > b.max {
		b.flushLocked(bt)
		bt = nil
	}
	if bt == nil {
		bt = b.openLocked(key)
	}
	bt.reqs = append(bt.reqs, req)
	bt.rows += req.rows
	if b.enqueued != nil {
		b.enqueued(key, bt.rows)
	}
	if bt.rows >= b.max {
		b.flushLocked(bt)
	}
	return true
}

// openLocked opens the batch of key, run after the timeout unless it
// fills first; b.mu is held.
func (b *batcher) openLocked(key batchKey) *batch {
	bt := &batch{key: key}
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
	return bt
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
	results := bt.results()
	for i, req := range bt.reqs {
		req.done <- results[i]
	}
}

// results runs the merged batch and returns each request's result.
func (bt *batch) results() (results []batchResult) {
	fail := func(err error) []batchResult {
		results := make([]batchResult, len(bt.reqs))
		for i := range results {
			results[i] = batchResult{err: err}
		}
		return results
	}
	defer func() {
		if p := recover(); p != nil {
			results = fail(&panicError{value: p, stack: debug.Stack()})
		}
	}()
	outs, err := bt.runMerged()
	if err != nil {
		return fail(err)
	}
	rows := make([]int, len(bt.reqs))
	for i, req := range bt.reqs {
		rows[i] = req.rows
	}
	parts, err := sharding.SplitMapSizes(outs, rows)
	if err != nil {
		return fail(fmt.Errorf("batch of %d requests: %w", len(bt.reqs), err))
	}
	results = make([]batchResult, len(bt.reqs))
	for i, part := range parts {
		results[i] = batchResult{outs: part}
	}
	return results
}

// runMerged runs the requests' features joined along dimension 0 (sparse
// ones by concatSparse).
func (bt *batch) runMerged() (map[string]*tensor.Dense, error) {
	features, sparse := bt.reqs[0].features, bt.reqs[0].sparse
	if len(bt.reqs) > 1 {
		parts := make([]map[string]*tensor.Dense, len(bt.reqs))
		for i, req := range bt.reqs {
			parts[i] = req.features
		}
		var err error
		if features, err = sharding.ConcatMap(parts); err != nil {
			return nil, fmt.Errorf("batch of %d requests: %w", len(bt.reqs), err)
		}
		if sparse != nil {
			if sparse, err = bt.concatSparse(); err != nil {
				return nil, fmt.Errorf("batch of %d requests: %w", len(bt.reqs), err)
			}
		}
	}
	// The merged run belongs to no single request: a request that gives
	// up does not cancel the others.
	outs, err := runOn(context.Background(), bt.key.v.s, bt.key.sig, features, sparse)
	if err != nil {
		return nil, err
	}
	if err := checkOutputs(outs, bt.rows); err != nil {
		return nil, fmt.Errorf("batch of %d requests: %w", len(bt.reqs), err)
	}
	return outs, nil
}

// runRecovered runs s, turning a panic into a *panicError.
func runRecovered(ctx context.Context, s Servable, sig string, features map[string]*tensor.Dense, sparse map[string]sharding.SparseCOO) (outs map[string]*tensor.Dense, err error) {
	defer func() {
		if p := recover(); p != nil {
			outs, err = nil, &panicError{value: p, stack: debug.Stack()}
		}
	}()
	return runOn(ctx, s, sig, features, sparse)
}
