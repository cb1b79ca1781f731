// Package idsort orders the positions of integer ids by id, the one sort
// behind a sparse gradient's deduplication (towers.IndexedSlices and the
// embedding lookups of package layers).
package idsort

import (
	"cmp"
	"slices"
)

// posBits is how many low bits of a packed key hold the position.
const posBits = 24

// Positions returns the positions of ids ordered by id, and by position
// among equal ids (the order a stable sort gives, so that a repeated id's
// rows are summed in their order), in order[:0] (grown if short). Ids and
// positions that fit are packed into one integer, id in the high bits,
// and sorted as integers, in keys[:0]; others are sorted as pairs. It
// returns order and keys for the next call to reuse.
func Positions(ids, order []int, keys []uint64) ([]int, []uint64) {
	order = slices.Grow(order[:0], len(ids))[:len(ids)]
	if uint64(len(ids)) <= 1<<posBits && !slices.ContainsFunc(ids, func(id int) bool { return uint64(id) >= 1<<(62-posBits) }) {
		keys = slices.Grow(keys[:0], len(ids))[:len(ids)]
		for i, id := range ids {
			keys[i] = uint64(id)<<posBits | uint64(i)
		}
		slices.Sort(keys)
		for i, k := range keys {
			order[i] = int(k & (1<<posBits - 1))
		}
		return order, keys
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
	return order, keys
}
