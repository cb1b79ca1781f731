package tower

import (
	"fmt"
	"reflect"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// program runs a tower's graph on the calling goroutine: each op node's Do
// in dependency order, its result bound to the node (so Node.Value reads
// it, as after a gorgonia VM run) and kept until the next run.
//
// gorgonia's tape machine does the same work, but every RunAll starts a
// goroutine and locks the caller's OS thread. With one tower per core and
// BLAS calls (cgo) that hold their thread for a millisecond, the goroutine
// a tower starts can wait for the Go scheduler to take a processor back
// from the other tower's BLAS call, and towers meant to run side by side
// run one after the other. Running the ops directly leaves one goroutine
// per tower and nothing to wait for.
//
// A program does not reuse one node's memory for another (the tape
// machine does), so a watched value needs no copy, with one exception:
// an op may return its argument or a view of it (identity, reshape), and a
// watched value that shares memory with an input, a variable or a
// constant is copied, so that code that updates a watched value in place
// (a gradient reduction, say) cannot change the model.
type program struct {
	nodes   []*G.Node // in dependency order: children before parents
	args    [][]int   // args[i]: indices in nodes of node i's children, in order
	watched []int     // nodes whose values are read after a run
	vals    []G.Value // vals[i]: node i's value in the last run
	copies  map[int]G.Value
	index   map[*G.Node]int
	in      []G.Value // scratch for one op's arguments
	// ops[i] runs node i when it is not the node's own op (isTensorAdd's
	// nodes run in a buffer the program keeps).
	ops map[int]interface {
		Do(...G.Value) (G.Value, error)
	}
}

// newProgram orders the ancestors of roots and watched, children first.
// It returns an error naming the node when the graph holds what only
// gorgonia's own machines run: statement ops (G.Read, G.Set) or a node on
// a device other than the CPU.
func newProgram(g *G.ExprGraph, roots G.Nodes, watched []*G.Node) (*program, error) {
	p := &program{index: map[*G.Node]int{}, copies: map[int]G.Value{}}
	type frame struct {
		n    *G.Node
		kids []*G.Node
		next int
	}
	seen := map[*G.Node]bool{}
	for _, r := range append(roots, watched...) {
		if seen[r] {
			continue
		}
		seen[r] = true
		stack := []frame{{n: r, kids: children(g, r)}}
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next < len(f.kids) {
				k := f.kids[f.next]
				f.next++
				if !seen[k] {
					seen[k] = true
					stack = append(stack, frame{n: k, kids: children(g, k)})
				}
				continue
			}
			if err := p.add(f.n, f.kids); err != nil {
				return nil, err
			}
			stack = stack[:len(stack)-1]
		}
	}
	for _, n := range watched {
		p.watched = append(p.watched, p.index[n])
	}
	p.vals = make([]G.Value, len(p.nodes))
	return p, nil
}

// children returns n's arguments in g, in order.
func children(g *G.ExprGraph, n *G.Node) []*G.Node {
	var kids []*G.Node
	for it := g.From(n.ID()); it.Next(); {
		kids = append(kids, it.Node().(*G.Node))
	}
	return kids
}

// isGorgoniaOp reports whether op is one of gorgonia's unexported op types
// named names (its statement ops readOp and letOp, its elemBinOp), which
// nothing but their type tells apart.
func isGorgoniaOp(op G.Op, names ...string) bool {
	t := reflect.TypeOf(op)
	return t != nil && t.PkgPath() == reflect.TypeFor[G.Op]().PkgPath() && slices.Contains(names, t.Name())
}

func (p *program) add(n *G.Node, kids []*G.Node) error {
	// gorgonia's statement ops, which its tape machine runs as
	// instructions of their own rather than through Do.
	if op := n.Op(); op != nil && isGorgoniaOp(op, "readOp", "letOp") {
		return fmt.Errorf("node %v: statement op %v", n.Name(), op)
	}
	if d := n.Device(); d != G.CPU {
		return fmt.Errorf("node %v: on device %v", n.Name(), d)
	}
	args := make([]int, len(kids))
	for i, k := range kids {
		args[i] = p.index[k]
	}
	i := len(p.nodes)
	if isTensorAdd(n, kids) {
		if p.ops == nil {
			p.ops = map[int]interface {
				Do(...G.Value) (G.Value, error)
			}{}
		}
		p.ops[i] = &adder{op: n.Op()}
	}
	p.index[n] = i
	p.nodes = append(p.nodes, n)
	p.args = append(p.args, args)
	return nil
}

// run computes every node once.
func (p *program) run() error {
	clear(p.vals)
	for i, n := range p.nodes {
		if n.Op() == nil {
			if p.vals[i] = n.Value(); p.vals[i] == nil {
				return fmt.Errorf("node %v has no value", n.Name())
			}
			continue
		}
		in := p.in[:0]
		for _, a := range p.args[i] {
			in = append(in, p.vals[a])
		}
		p.in = in
		var v G.Value
		var err error
		if op, ok := p.ops[i]; ok {
			v, err = op.Do(in...)
		} else {
			v, err = n.Op().Do(in...)
		}
		clear(in)
		if err != nil {
			return fmt.Errorf("node %v (%v): %w", n.Name(), n.Op(), err)
		}
		if v == nil {
			return fmt.Errorf("node %v (%v): the op returned no value", n.Name(), n.Op())
		}
		// UnsafeLet checks the value's shape and dtype against the node's.
		// An op that keeps its output (package layers) returns the value
		// already bound, of the shape already checked.
		if !sameDense(n.Value(), v) {
			if err := G.UnsafeLet(n, v); err != nil {
				return fmt.Errorf("node %v (%v): %w", n.Name(), n.Op(), err)
			}
		}
		p.vals[i] = v
	}
	return p.ownWatched()
}

// ownWatched copies each watched value that shares memory with a leaf or
// constant, into a buffer kept for that node.
func (p *program) ownWatched() error {
	for _, w := range p.watched {
		v := p.vals[w]
		if p.nodes[w].Op() == nil || !p.sharesLeaf(v) {
			continue
		}
		c, ok := p.copies[w]
		if ok && c.Shape().Eq(v.Shape()) && c.Dtype() == v.Dtype() {
			if _, err := G.Copy(c, v); err != nil {
				return fmt.Errorf("node %v: copy: %w", p.nodes[w].Name(), err)
			}
		} else {
			var err error
			if c, err = G.CloneValue(v); err != nil {
				return fmt.Errorf("node %v: copy: %w", p.nodes[w].Name(), err)
			}
			p.copies[w] = c
		}
		p.vals[w] = c
		if err := G.UnsafeLet(p.nodes[w], c); err != nil {
			return fmt.Errorf("node %v: %w", p.nodes[w].Name(), err)
		}
	}
	return nil
}

// sharesLeaf reports whether v's memory overlaps that of a leaf's value or
// of a constant (an op node without arguments).
func (p *program) sharesLeaf(v G.Value) bool {
	lo, hi := span(v)
	if lo == hi {
		return false
	}
	for i, args := range p.args {
		if len(args) > 0 || p.vals[i] == nil {
			continue
		}
		if l, h := span(p.vals[i]); l < hi && lo < h {
			return true
		}
	}
	return false
}

// span is the address range of v's data.
func span(v G.Value) (lo, hi uintptr) {
	if _, ok := v.(tensor.Tensor); !ok {
		return 0, 0 // scalars are values, not memory
	}
	lo = v.Uintptr()
	return lo, lo + v.MemSize()
}

// sameDense reports whether a and b are the same *tensor.Dense. (Values of
// other types are not compared: not every Value type is comparable.)
func sameDense(a, b G.Value) bool {
	da, ok := a.(*tensor.Dense)
	db, ok2 := b.(*tensor.Dense)
	return ok && ok2 && da == db
}

// value returns n's value in the last run, and whether n is in the
// program.
func (p *program) value(n *G.Node) (G.Value, bool) {
	i, ok := p.index[n]
	if !ok {
		return nil, false
	}
	return p.vals[i], true
}
