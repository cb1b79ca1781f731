package optimizers

import (
	"slices"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/towers"
)

// Lazy makes Momentum, Adam and RMSProp apply a sparse gradient (a
// towers.IndexedSlices) to its rows alone: the rows it names and their
// slots update as the dense apply would update them, every other row and
// its slots stay as they are, and a step costs the gradient's rows, not
// the table's. It is TensorFlow's LazyAdamOptimizer and PyTorch's
// SparseAdam, and what TensorFlow 1's Momentum and RMSProp did with
// sparse gradients (SparseApplyMomentum, SparseApplyRMSProp): the choice
// for large embedding tables. Without it a sparse gradient gives exactly
// what its densified gradient gives, every row's slots decaying (and
// weights moving) as in the dense apply, which is TensorFlow 1's Adam.
// Dense gradients are applied as always. SGD, Adagrad and FTRL, whose
// update of a zero gradient row is no update, always touch only a sparse
// gradient's rows; the option applies to the three others only.
func Lazy() Option {
	return func(c *config) {
		if c.kind != kindMomentum && c.kind != kindAdam && c.kind != kindRMSProp {
			c.fail("option Lazy applies to Momentum, Adam and RMSProp only, not %v (which always update only a sparse gradient's rows)", c.kind)
			return
		}
		c.lazy = true
	}
}

// rowsOnly reports whether a sparse gradient updates its rows alone: SGD,
// Adagrad, FTRL, and the lazy others.
func (c *config) rowsOnly() bool {
	return c.lazy || c.kind == kindSGD || c.kind == kindAdagrad || c.kind == kindFTRL
}

// applyRange applies elements [lo, hi) of gradient g to w and its slots:
// of the variable for a dense gradient, or a sparse one (sp, deduplicated)
// updating every row; of the sparse gradient's rows when only they update.
func applyRange[T numeric.Float](kn *kernel[T], w []T, g any, sp *towers.IndexedSlices, slotVals []any, lo, hi int) {
	var buf [maxSlots][]T
	slots := buf[:len(slotVals)]
	for k, s := range slotVals {
		slots[k] = s.([]T)
	}
	if sp == nil {
		kn.at(w, g.([]T), slots, lo, lo, hi-lo)
		return
	}
	vals, _ := sp.Values.([]T) // nil for no rows
	if kn.c.rowsOnly() {
		kn.rows(w, sp.Indices, vals, sp.RowSize(), slots, lo, hi)
		return
	}
	kn.allRows(w, sp.Indices, vals, sp.RowSize(), slots, lo, hi)
}

// at runs the kernel over n elements: of w and the slots from wlo, of g
// from glo. It allocates nothing.
func (kn *kernel[T]) at(w, g []T, slots [][]T, wlo, glo, n int) {
	var buf [maxSlots][]T
	s := buf[:len(slots)]
	for k, slot := range slots {
		s[k] = slot[wlo : wlo+n]
	}
	kn.run(w[wlo:wlo+n], g[glo:glo+n], s)
}

// rows runs the kernel over elements [lo, hi) of a sparse gradient's
// values, rows of rs elements with ascending distinct ids: the row at k
// updates row ids[k] of w and the slots. Rows with consecutive ids are one
// call.
func (kn *kernel[T]) rows(w []T, ids []int, vals []T, rs int, slots [][]T, lo, hi int) {
	for p := lo; p < hi; {
		r := p / rs
		q := r + 1
		for q*rs < hi && ids[q] == ids[q-1]+1 {
			q++
		}
		end := min(q*rs, hi)
		kn.at(w, vals, slots, ids[r]*rs+p-r*rs, p, end-p)
		p = end
	}
}

// allRows runs the kernel over elements [lo, hi) of w and the slots, with
// a sparse gradient's rows (ascending distinct ids, rs elements each) for
// the rows it names and zeros for every other: the dense apply of the
// densified gradient, without a buffer of it.
func (kn *kernel[T]) allRows(w []T, ids []int, vals []T, rs int, slots [][]T, lo, hi int) {
	r, _ := slices.BinarySearch(ids, lo/rs) // the first row that ends after lo
	for p := lo; p < hi; {
		if r == len(ids) || ids[r]*rs >= hi {
			kn.zeros(w, slots, p, hi)
			return
		}
		start := max(ids[r]*rs, p)
		kn.zeros(w, slots, p, start)
		q := r + 1
		for q < len(ids) && ids[q] == ids[q-1]+1 && ids[q]*rs < hi {
			q++
		}
		end := min((ids[q-1]+1)*rs, hi)
		kn.at(w, vals, slots, start, r*rs+start-ids[r]*rs, end-start)
		p, r = end, q
	}
}

// zeros runs the kernel with a zero gradient over elements [lo, hi) of w
// and the slots.
func (kn *kernel[T]) zeros(w []T, slots [][]T, lo, hi int) {
	for p := lo; p < hi; p += len(kn.zero) {
		kn.at(w, kn.zero, slots, p, 0, min(len(kn.zero), hi-p))
	}
}
