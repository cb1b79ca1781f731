package layers

import (
	"fmt"
	"hash"
	"math"
	"math/rand/v2"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/towers"
)

// Dropout returns x with each element, in training, zeroed with
// probability rate and otherwise scaled by 1/(1 − rate) (inverted dropout:
// the expected value is x's), and x itself when not training or rate is
// 0. The elements kept are drawn afresh every step from a stream seeded by
// the store's seed, name, the tower's index and the global step (read from
// s.GlobalStep at run time): a run is reproducible, and every tower and
// step draws its own mask. The gradient passes where the element was kept,
// scaled alike.
func Dropout(s *towers.Scope, name string, x *G.Node, rate float64, training bool) (*G.Node, error) {
	const op = "layers.Dropout"
	if s == nil {
		return nil, fmt.Errorf("%s(%q): nil scope: dropout seeds its masks from its tower's scope", op, name)
	}
	if x == nil {
		return nil, fmt.Errorf("%s(%q): nil input", op, name)
	}
	if err := checkFloat(op, x); err != nil {
		return nil, fmt.Errorf("%s(%q): %w", op, name, err)
	}
	if x.IsScalar() {
		return nil, fmt.Errorf("%s(%q, %s): input is a scalar, want a tensor", op, name, x.Name())
	}
	if !(rate >= 0 && rate < 1) {
		return nil, fmt.Errorf("%s(%q, %s): rate %v: want a value in [0, 1)", op, name, x.Name(), rate)
	}
	if !training || rate == 0 {
		return x, nil
	}
	step, err := s.GlobalStep()
	if err != nil {
		return nil, fmt.Errorf("%s(%q): %w", op, name, err)
	}
	d := &dropoutOp{shape: x.Shape().Clone(), rate: rate, seed: s.Seed(name)}
	// keep an element when 32 random bits are at least threshold.
	d.threshold = uint64(math.Min(math.Ceil(rate*(1<<32)), 1<<32-1))
	out, err := G.ApplyOp(d, x, step)
	if err != nil {
		return nil, fmt.Errorf("%s(%q, %s): %w", op, name, x.Name(), err)
	}
	return out, nil
}

// dropoutOp multiplies x (input 0) by a mask of 0 and 1/(1 − rate) drawn
// for the step (input 1, an int64 scalar), which it keeps for the
// gradient.
type dropoutOp struct {
	shape     tensor.Shape
	rate      float64
	seed      uint64
	threshold uint64
	rng       rand.PCG
	mask      buffer
	out       buffer
}

func (op *dropoutOp) Arity() int { return 2 }

func (op *dropoutOp) Type() hm.Type {
	t := tensorType(len(op.shape), hm.TypeVariable('a'))
	return hm.NewFnType(t, tensor.Int64, t)
}

func (op *dropoutOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.shape.Clone(), nil }

// DiffWRT: x, not the step.
func (op *dropoutOp) DiffWRT(int) []bool { return []bool{true, false} }

func (op *dropoutOp) ReturnsPtr() bool     { return false }
func (op *dropoutOp) CallsExtern() bool    { return false }
func (op *dropoutOp) OverwritesInput() int { return -1 }

func (op *dropoutOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", op, len(in))
	}
	if !in[0].Shape().Eq(op.shape) {
		return nil, fmt.Errorf("%v: input has shape %v, want %v", op, in[0].Shape(), op.shape)
	}
	var step int64
	switch v := in[1].(type) {
	case *G.I64:
		step = int64(*v)
	default:
		s, ok := v.Data().(int64)
		if !ok {
			return nil, fmt.Errorf("%v: step is a %v of shape %v, want an int64 scalar", op, v.Dtype(), v.Shape())
		}
		step = s
	}
	return dispatch(op, in[0].Dtype(),
		func() (G.Value, error) { return dropoutDo[float32](op, in[0], step) },
		func() (G.Value, error) { return dropoutDo[float64](op, in[0], step) })
}

func dropoutDo[T float](op *dropoutOp, in G.Value, step int64) (G.Value, error) {
	x, err := backing[T]("input", in)
	if err != nil {
		return nil, err
	}
	m := data[T](op.mask.get(in.Dtype(), op.shape))
	op.rng.Seed(op.seed, uint64(step))
	scale := T(1 / (1 - op.rate))
	for i := 0; i < len(m); i += 2 {
		r := op.rng.Uint64()
		// keep is 1 when the bits are at least the threshold: the sign
		// of bits − threshold, without a branch.
		m[i] = scale * T(1-(r&(1<<32-1)-op.threshold)>>63)
		if i+1 < len(m) {
			m[i+1] = scale * T(1-((r>>32)-op.threshold)>>63)
		}
	}
	out := op.out.get(in.Dtype(), op.shape)
	o := data[T](out)
	for i, v := range x[:len(o)] {
		o[i] = v * m[i]
	}
	return out, nil
}

func (op *dropoutOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "Dropout{%p}", op) }
func (op *dropoutOp) Hashcode() uint32      { return hashOf(op) }
func (op *dropoutOp) String() string        { return fmt.Sprintf("Dropout{%v, rate %g}", op.shape, op.rate) }

func (op *dropoutOp) SymDiff(in G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	d, err := G.ApplyOp(&dropoutGradOp{fwd: op}, output, grad)
	if err != nil {
		return nil, fmt.Errorf("%v: gradient: %w", op, err)
	}
	return G.Nodes{d, nil}, nil
}

// dropoutGradOp multiplies the gradient by its forward op's last mask
// (inputs: the forward output, which orders the two, and the gradient).
type dropoutGradOp struct {
	gradOp
	fwd *dropoutOp
	out buffer
}

func (op *dropoutGradOp) Arity() int { return 2 }

func (op *dropoutGradOp) Type() hm.Type {
	t := tensorType(len(op.fwd.shape), hm.TypeVariable('a'))
	return hm.NewFnType(t, t, t)
}

func (op *dropoutGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return op.fwd.shape.Clone(), nil
}

func (op *dropoutGradOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", op, len(in))
	}
	if !in[1].Shape().Eq(op.fwd.shape) {
		return nil, fmt.Errorf("%v: gradient has shape %v, want %v", op, in[1].Shape(), op.fwd.shape)
	}
	if op.fwd.mask.t == nil {
		return nil, fmt.Errorf("%v: the forward op has not run", op)
	}
	return dispatch(op, in[1].Dtype(),
		func() (G.Value, error) { return dropoutGradDo[float32](op, in[1]) },
		func() (G.Value, error) { return dropoutGradDo[float64](op, in[1]) })
}

func dropoutGradDo[T float](op *dropoutGradOp, in G.Value) (G.Value, error) {
	g, err := backing[T]("gradient", in)
	if err != nil {
		return nil, err
	}
	m := data[T](op.fwd.mask.t)
	out := op.out.get(in.Dtype(), op.fwd.shape)
	o := data[T](out)
	for i, v := range g[:len(o)] {
		o[i] = v * m[i]
	}
	return out, nil
}

func (op *dropoutGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "DropoutGrad{%p}", op.fwd) }
func (op *dropoutGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *dropoutGradOp) String() string        { return fmt.Sprintf("DropoutGrad{%v}", op.fwd) }
