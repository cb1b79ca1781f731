// Package idsort orders the positions of integer ids by id, the one sort
// behind a sparse gradient's deduplication (towers.IndexedSlices and the
// embedding lookups of package layers).
package idsort

import (
	"cmp"
	"slices"
)

const (
	// posBits is how many low bits of a packed key hold the position.
	posBits = 24
	// digitBits is the width of a radix sort's digit, radixIDBits the
	// widest ids it sorts (two passes), radixMin the fewest ids it sorts
	// (below, clearing its counts costs more than a comparison sort).
	digitBits   = 11
	radixIDBits = 2 * digitBits
	radixMin    = 256
)

// Sorter orders ids' positions, keeping its buffers from call to call.
// The zero Sorter is ready; it is not safe for concurrent use.
type Sorter struct {
	order, tmp []int
	keys       []uint64
	count      [1<<digitBits + 1]int
}

// Positions returns the positions of ids ordered by id, and by position
// among equal ids (the order a stable sort gives, so that a repeated id's
// rows are summed in their order). The result is s's buffer, valid until
// the next call. Ids of up to 22 bits (radixIDBits), at least radixMin of
// them, are sorted by radix, in one or two stable passes of 11-bit digits;
// other ids and positions that fit are packed into one integer, id in the
// high bits, and sorted as integers; the rest are sorted as pairs.
func (s *Sorter) Positions(ids []int) []int {
	s.order = slices.Grow(s.order[:0], len(ids))[:len(ids)]
	order := s.order
	maxID, neg := 0, false
	for _, id := range ids {
		maxID = max(maxID, id)
		neg = neg || id < 0
	}
	switch {
	case !neg && len(ids) >= radixMin && maxID < 1<<radixIDBits:
		return s.radix(ids, maxID)
	case !neg && uint64(len(ids)) <= 1<<posBits && uint64(maxID) < 1<<(62-posBits):
		s.keys = slices.Grow(s.keys[:0], len(ids))[:len(ids)]
		keys := s.keys
		for i, id := range ids {
			keys[i] = uint64(id)<<posBits | uint64(i)
		}
		slices.Sort(keys)
		for i, k := range keys {
			order[i] = int(k & (1<<posBits - 1))
		}
		return order
	}
	type entry struct{ id, pos int }
	pairs := make([]entry, len(ids))
	for i, id := range ids {
		pairs[i] = entry{id, i}
	}
	slices.SortFunc(pairs, func(a, b entry) int {
		if c := cmp.Compare(a.id, b.id); c != 0 {
			return c
		}
		return cmp.Compare(a.pos, b.pos)
	})
	for i, p := range pairs {
		order[i] = p.pos
	}
	return order
}

// radix is Positions of non-negative ids below 1<<radixIDBits by a least
// significant digit first radix sort: each pass is stable, so positions
// of equal ids stay in order.
func (s *Sorter) radix(ids []int, maxID int) []int {
	const mask = 1<<digitBits - 1
	s.tmp = slices.Grow(s.tmp[:0], len(ids))[:len(ids)]
	src, dst := s.order, s.tmp
	for i := range src {
		src[i] = i
	}
	for shift := 0; shift == 0 || maxID>>shift > 0; shift += digitBits {
		count := &s.count
		clear(count[:])
		for _, id := range ids {
			count[(id>>shift)&mask+1]++
		}
		for d := 1; d < len(count); d++ {
			count[d] += count[d-1]
		}
		for _, p := range src {
			d := (ids[p] >> shift) & mask
			dst[count[d]] = p
			count[d]++
		}
		src, dst = dst, src
	}
	s.order, s.tmp = src, dst
	return src
}
