package towers

import G "gorgonia.org/gorgonia"

// SumInput is implemented by ops (gorgonia.Op) that can take one of their
// inputs as the two terms of a sum, a + b elementwise of one shape and
// dtype, and compute from them exactly what Do computes from the sum, bit
// for bit, without the sum being made. Where symbolic differentiation adds
// two gradients of one node (a residual block's input feeds the block and
// its shortcut) and the sum's only reader is such an op, a tower hands the
// op both terms, and the sum is never written out and read back.
type SumInput interface {
	// SumsInput returns which input (counting from 0) the op takes as a
	// sum, or -1 for none.
	SumsInput() int
	// DoSum is Do with the input SumsInput names given as in[i] + b:
	// in[i] is the sum's first term, b its second.
	DoSum(b G.Value, in ...G.Value) (G.Value, error)
}
