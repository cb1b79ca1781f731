package collective

import (
	"cmp"
	"context"
	"fmt"
	"math"
)

// Segment is one slice that takes part in a fused all-reduce, multiplied
// by Scale as it is packed: a []float32 (reduced in float32), or a
// []float64, []int, []int32 or []int64 (reduced in float64; integer sums
// are exact below 2^53).
type Segment struct {
	Data  any
	Scale float64
}

// span is the part [lo, hi) of segment seg packed at offset at of the
// current bucket.
type span struct {
	seg, lo, hi, at int
}

// DefaultBucketBytes is a Fusion's bucket size unless it says otherwise.
const DefaultBucketBytes = 64 << 20

// Fusion all-reduces many slices at once, as Horovod's tensor fusion and
// PyTorch DDP's buckets do: the slices are packed, scaled, into buckets of
// at most BucketBytes (float32 slices into float32 buckets, the others into
// float64 ones), each bucket is all-reduced once, and its sums are unpacked
// into the slices. The buffers are kept for the next call. A Fusion is not
// safe for concurrent use.
type Fusion struct {
	// BucketBytes caps a bucket; 0 means DefaultBucketBytes.
	BucketBytes int
	buf32       []float32
	buf64       []float64
	spans       []span
}

// Bucket returns the bucket size in bytes: BucketBytes, or
// DefaultBucketBytes when that is not positive.
func (x *Fusion) Bucket() int { return cmp.Or(max(x.BucketBytes, 0), DefaultBucketBytes) }

// AllReduce sums every segment's Scale·Data over c's ranks, in place. Every
// rank passes segments of the same kinds and lengths in the same order.
func (x *Fusion) AllReduce(ctx context.Context, c Comm, segs []Segment) error {
	bucket := x.Bucket()
	var n32, n64 int
	for _, s := range segs {
		switch d := s.Data.(type) {
		case []float32:
			n32 += len(d)
		case []float64, []int, []int32, []int64:
			n64 += lenOf(d)
		default:
			return fmt.Errorf("all-reduce: cannot reduce a %T", s.Data)
		}
	}
	if n32 > 0 {
		x.buf32 = grow(x.buf32, min(n32, max(bucket/4, 1)))
		if err := fuse(ctx, x, segs, x.buf32, true, c.AllReduceFloat32); err != nil {
			return err
		}
	}
	if n64 > 0 {
		x.buf64 = grow(x.buf64, min(n64, max(bucket/8, 1)))
		if err := fuse(ctx, x, segs, x.buf64, false, c.AllReduceFloat64); err != nil {
			return err
		}
	}
	return nil
}

// grow returns buf with length n, reusing its memory when it can.
func grow[T any](buf []T, n int) []T {
	if cap(buf) >= n {
		return buf[:n]
	}
	return make([]T, n)
}

// fuse packs the segments of one kind (float32 ones, or the others) into
// buf bucket by bucket, reduces each bucket and unpacks it.
func fuse[T float32 | float64](ctx context.Context, x *Fusion, segs []Segment, buf []T, f32 bool, reduce func(context.Context, []T) error) error {
	x.spans = x.spans[:0]
	at := 0
	flush := func() error {
		if at == 0 {
			return nil
		}
		if err := reduce(ctx, buf[:at]); err != nil {
			return fmt.Errorf("all-reduce: %w", err)
		}
		for _, sp := range x.spans {
			unpack(segs[sp.seg].Data, sp.lo, sp.hi, buf[sp.at:])
		}
		x.spans, at = x.spans[:0], 0
		return nil
	}
	for i, s := range segs {
		if _, is32 := s.Data.([]float32); is32 != f32 {
			continue
		}
		size := lenOf(s.Data)
		for lo := 0; lo < size; {
			hi := min(size, lo+len(buf)-at)
			pack(buf[at:], s.Data, lo, hi, s.Scale)
			x.spans = append(x.spans, span{seg: i, lo: lo, hi: hi, at: at})
			at += hi - lo
			lo = hi
			if at == len(buf) {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

func lenOf(s any) int {
	switch d := s.(type) {
	case []float32:
		return len(d)
	case []float64:
		return len(d)
	case []int:
		return len(d)
	case []int32:
		return len(d)
	case []int64:
		return len(d)
	}
	return 0
}

// pack writes scale·src[lo:hi] to the start of dst.
func pack[T float32 | float64](dst []T, src any, lo, hi int, scale float64) {
	switch s := src.(type) {
	case []float32:
		packNumbers(dst, s[lo:hi], scale)
	case []float64:
		packNumbers(dst, s[lo:hi], scale)
	case []int:
		packNumbers(dst, s[lo:hi], scale)
	case []int32:
		packNumbers(dst, s[lo:hi], scale)
	case []int64:
		packNumbers(dst, s[lo:hi], scale)
	}
}

func packNumbers[T float32 | float64, S float32 | float64 | int | int32 | int64](dst []T, src []S, scale float64) {
	if scale == 1 {
		for i, v := range src {
			dst[i] = T(v)
		}
		return
	}
	for i, v := range src {
		dst[i] = T(float64(v) * scale)
	}
}

// unpack writes the start of src back into dst[lo:hi]; integers round to
// the nearest.
func unpack[T float32 | float64](dst any, lo, hi int, src []T) {
	switch d := dst.(type) {
	case []float32:
		for i := range d[lo:hi] {
			d[lo+i] = float32(src[i])
		}
	case []float64:
		for i := range d[lo:hi] {
			d[lo+i] = float64(src[i])
		}
	case []int:
		unpackInts(d[lo:hi], src)
	case []int32:
		unpackInts(d[lo:hi], src)
	case []int64:
		unpackInts(d[lo:hi], src)
	}
}

func unpackInts[S int | int32 | int64, T float32 | float64](dst []S, src []T) {
	for i := range dst {
		dst[i] = S(math.Round(float64(src[i])))
	}
}
