package collective

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// Local returns a group of n ranks in this process, one Comm per rank, each
// to be used by its own goroutine. Sums add the ranks' values in rank
// order, so they do not depend on which goroutine arrives last.
func Local(n int) []Comm {
	if n < 1 {
		n = 1
	}
	g := &localGroup{size: n}
	cs := make([]Comm, n)
	for i := range cs {
		cs[i] = &localComm{g: g, rank: i}
	}
	return cs
}

// localGroup is the state the ranks of a Local group share: the collective
// being gathered, and the error that broke the group.
type localGroup struct {
	mu     sync.Mutex
	size   int
	round  *localRound
	broken error
}

// localRound is one collective: what each rank brought, and a channel
// closed when it is done (or the group broke).
type localRound struct {
	kind    string
	root    int
	length  int
	counts  []int // of an all-gather
	first   int   // the rank that set kind, root, length and counts
	bufs    []any
	arrived int
	done    chan struct{}
	err     error
}

type localComm struct {
	g    *localGroup
	rank int
}

func (c *localComm) Rank() int { return c.rank }
func (c *localComm) Size() int { return c.g.size }

// Close does nothing: a Local group needs no teardown.
func (c *localComm) Close() error { return nil }

func (c *localComm) AllReduceFloat64(ctx context.Context, buf []float64) error {
	return c.collect(ctx, "all-reduce float64", 0, len(buf), nil, buf)
}

func (c *localComm) AllReduceFloat32(ctx context.Context, buf []float32) error {
	return c.collect(ctx, "all-reduce float32", 0, len(buf), nil, buf)
}

func (c *localComm) Broadcast(ctx context.Context, root int, buf []byte) error {
	if root < 0 || root >= c.g.size {
		return fmt.Errorf("collective: broadcast from rank %d in a group of %d", root, c.g.size)
	}
	return c.collect(ctx, "broadcast", root, len(buf), nil, buf)
}

func (c *localComm) AllGatherInt64(ctx context.Context, buf []int64, counts []int) error {
	return localGather(ctx, c, "all-gather int64", buf, counts)
}

func (c *localComm) AllGatherFloat32(ctx context.Context, buf []float32, counts []int) error {
	return localGather(ctx, c, "all-gather float32", buf, counts)
}

func (c *localComm) AllGatherFloat64(ctx context.Context, buf []float64, counts []int) error {
	return localGather(ctx, c, "all-gather float64", buf, counts)
}

// localGather checks an all-gather's arguments and brings it to a round.
func localGather[T any](ctx context.Context, c *localComm, kind string, buf []T, counts []int) error {
	if err := checkGather(kind, c.g.size, len(buf), counts); err != nil {
		return err
	}
	return c.collect(ctx, kind, 0, len(buf), counts, buf)
}

// collect brings this rank's buffer to the current round and waits for the
// others; the last to arrive combines every buffer in place.
func (c *localComm) collect(ctx context.Context, kind string, root, length int, counts []int, buf any) error {
	g := c.g
	g.mu.Lock()
	if g.broken != nil {
		g.mu.Unlock()
		return g.broken
	}
	if err := ctx.Err(); err != nil {
		g.breakLocked(fmt.Errorf("collective: rank %d left %s: %w", c.rank, kind, err))
		g.mu.Unlock()
		return g.broken
	}
	r := g.round
	if r == nil {
		r = &localRound{kind: kind, root: root, length: length, counts: counts, first: c.rank, bufs: make([]any, g.size), done: make(chan struct{})}
		g.round = r
	}
	if r.kind != kind || r.root != root || r.length != length {
		g.breakLocked(fmt.Errorf("collective: rank %d called %s (root %d) of %d elements while rank %d called %s (root %d) of %d: every rank must run the same collectives in the same order",
			c.rank, kind, root, length, r.first, r.kind, r.root, r.length))
		g.mu.Unlock()
		return g.broken
	}
	if !slices.Equal(r.counts, counts) {
		g.breakLocked(fmt.Errorf("collective: rank %d called %s with counts %v while rank %d called it with counts %v: every rank must pass the same counts",
			c.rank, kind, counts, r.first, r.counts))
		g.mu.Unlock()
		return g.broken
	}
	r.bufs[c.rank] = buf
	r.arrived++
	if r.arrived == g.size {
		r.combine()
		g.round = nil
		close(r.done)
		g.mu.Unlock()
		return nil
	}
	g.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-r.done: // finished just as ctx was cancelled
		return r.err
	default:
	}
	g.breakLocked(fmt.Errorf("collective: rank %d left %s: %w", c.rank, kind, ctx.Err()))
	return g.broken
}

// breakLocked marks the group broken by err and releases every rank
// waiting in the current round with it.
func (g *localGroup) breakLocked(err error) {
	if g.broken == nil {
		g.broken = err
	}
	if r := g.round; r != nil {
		r.err = g.broken
		close(r.done)
		g.round = nil
	}
}

// combine does the round's collective on the buffers every rank brought.
func (r *localRound) combine() {
	switch r.kind {
	case "broadcast":
		src := r.bufs[r.root].([]byte)
		for i, b := range r.bufs {
			if i != r.root {
				copy(b.([]byte), src)
			}
		}
	case "all-reduce float64":
		sumInto[float64](r.bufs)
	case "all-reduce float32":
		sumInto[float32](r.bufs)
	case "all-gather int64":
		gatherInto[int64](r.bufs, r.counts)
	case "all-gather float32":
		gatherInto[float32](r.bufs, r.counts)
	case "all-gather float64":
		gatherInto[float64](r.bufs, r.counts)
	}
}

// gatherInto copies each rank's contribution, at its offset in its own
// buffer, to the same offset in every other buffer.
func gatherInto[T any](bufs []any, counts []int) {
	off := 0
	for r, n := range counts {
		src := bufs[r].([]T)[off : off+n]
		for i, b := range bufs {
			if i != r {
				copy(b.([]T)[off:off+n], src)
			}
		}
		off += n
	}
}

// sumInto adds the buffers elementwise in rank order and writes the sums
// into every buffer.
func sumInto[T float32 | float64](bufs []any) {
	bs := make([][]T, len(bufs))
	for i, b := range bufs {
		bs[i] = b.([]T)
	}
	for i := range bs[0] {
		s := bs[0][i]
		for _, b := range bs[1:] {
			s += b[i]
		}
		for _, b := range bs {
			b[i] = s
		}
	}
}
