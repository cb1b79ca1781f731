package replicate

import (
	"context"

	"github.com/towerflow/towerflow/collective"
)

// arena is a train build's gradient sums and float state updates laid out
// in one slice per float type, in plan order, so that across processes the
// step's all-reduce runs on them in place: each bucket is a slice of the
// arena, and nothing is packed or copied (Horovod copies into a fusion
// buffer; PyTorch DDP makes gradients views of its buckets, as here). The
// sums are scaled by the process's share as the towers' gradients are
// summed, not in a pass of their own.
type arena struct {
	f32 []float32
	f64 []float64
	// others are the state updates of other types (integer deltas),
	// all-reduced through a Fusion.
	others []collective.Segment
}

// layOut makes b's arena and points the plans' sums and the float state
// updates' combined values into it.
func layOut(b *build) {
	var n32, n64 int
	count := func(s any) {
		switch d := s.(type) {
		case []float32:
			n32 += len(d)
		case []float64:
			n64 += len(d)
		}
	}
	for _, p := range b.plans {
		for _, s := range p.sums {
			count(s)
		}
	}
	for _, u := range b.updates {
		count(u.local)
	}
	a := &b.arena
	a.f32, a.f64 = make([]float32, n32), make([]float64, n64)
	var at32, at64 int
	place := func(s any) any {
		switch d := s.(type) {
		case []float32:
			at32 += len(d)
			return a.f32[at32-len(d) : at32 : at32]
		case []float64:
			at64 += len(d)
			return a.f64[at64-len(d) : at64 : at64]
		}
		a.others = append(a.others, collective.Segment{Data: s, Scale: 1})
		return s
	}
	for _, p := range b.plans {
		for j, s := range p.sums {
			if s != nil { // nil: a variable only lookups read
				p.sums[j] = place(s)
			}
		}
	}
	for _, u := range b.updates {
		u.local = place(u.local)
		u.self[0] = u.local
	}
}

// reduce sums the arena over the processes in place, in buckets of at
// most the configured bytes, then the other state updates.
func (x *across) reduce(ctx context.Context, a *arena) error {
	bucket := x.fusion.Bucket()
	if err := inBuckets(ctx, a.f32, max(bucket/4, 1), x.comm.AllReduceFloat32); err != nil {
		return x.broke(err)
	}
	if err := inBuckets(ctx, a.f64, max(bucket/8, 1), x.comm.AllReduceFloat64); err != nil {
		return x.broke(err)
	}
	if len(a.others) > 0 {
		return x.allReduce(ctx, a.others)
	}
	return nil
}

// inBuckets all-reduces s in slices of at most n elements.
func inBuckets[T float32 | float64](ctx context.Context, s []T, n int, reduce func(context.Context, []T) error) error {
	for lo := 0; lo < len(s); lo += n {
		if err := reduce(ctx, s[lo:min(lo+n, len(s))]); err != nil {
			return err
		}
	}
	return nil
}
