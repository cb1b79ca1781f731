package tower

import (
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/towers"
)

// program runs a tower's graph on the calling goroutine: each op node's Do
// in dependency order (the sinks, in a tower that meets others in groups,
// put off into its waits: see deferSinks), its result bound to the node
// (so Node.Value reads it, as after a gorgonia VM run) and kept until the
// next run.
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
	// sums[r] is the tensor addition whose terms node r takes in place of
	// its sum (see fuseSums); such an addition is never run.
	sums    map[int]fusedSum
	skipped []bool // skipped[i]: node i is an addition a reader takes as its terms

	// Deferred sinks (see deferSinks): queue holds the sinks reached and
	// not yet run, in program order; head is the next to run. idleIn is
	// the arguments' scratch of a sink run from idle, which runs inside
	// another op (p.in holds that op's arguments); inIdle keeps idle from
	// running one inside another sink; failed is the first failure of a
	// sink, which run returns.
	sinks  []bool // sinks[i]: node i is deferred
	queue  []int
	head   int
	idleIn []G.Value
	inIdle bool
	failed error
}

// sinkPanic is a panic in a sink run from idle, recovered there (idle must
// not panic: it runs inside another op's wait) and returned by run, which
// Tower.Run turns into a *PanicError naming the tower.
type sinkPanic struct {
	value any
	stack []byte
}

func (e *sinkPanic) Error() string { return fmt.Sprintf("panic: %v", e.value) }

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
	p.fuseSums()
	return p, nil
}

// fusedSum is an addition whose reader takes its two terms: the reader's
// argument arg is the addition add.
type fusedSum struct{ arg, add int }

// fuseSums hands each tensor addition the program runs in a kept buffer
// (isTensorAdd) whose one reader, reading it once, takes that argument as
// two terms (towers.SumInput), and that is not watched, to the reader: the
// addition is skipped, and the reader gets its terms.
func (p *program) fuseSums() {
	readers := p.readers()
	for i, op := range p.ops {
		if _, ok := op.(*adder); !ok || len(readers[i]) != 1 || slices.Contains(p.watched, i) {
			continue
		}
		r := readers[i][0]
		if _, own := p.ops[r]; own {
			continue
		}
		s, ok := p.nodes[r].Op().(towers.SumInput)
		if !ok {
			continue
		}
		k := s.SumsInput()
		if k < 0 || k >= len(p.args[r]) || p.args[r][k] != i {
			continue
		}
		if p.sums == nil {
			p.sums = map[int]fusedSum{}
			p.skipped = make([]bool, len(p.nodes))
		}
		p.sums[r] = fusedSum{arg: k, add: i}
		p.skipped[i] = true
	}
}

// readers returns, for each node, the nodes that take it as an argument
// (once per argument).
func (p *program) readers() [][]int {
	readers := make([][]int, len(p.nodes))
	for i, args := range p.args {
		for _, a := range args {
			readers[a] = append(readers[a], i)
		}
	}
	return readers
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

// deferSinks makes run put off the program's sinks from where they fall
// in program order to the first time idle is called after, or else to the
// end of the run. A sink is a movable op (see movable) that no node reads
// (the gradients the engine reads) or that only sinks read (a
// convolution's kernel gradient, read only by the addition of its weight
// decay's). A tower whose ops meet the other towers' in a group (a
// synchronized batch normalization) calls idle while it waits there, so
// that what would be spent waiting goes into work needed only at the end
// of the step. Every
// op still runs once per run, on the same arguments, so the values are
// the same; a movable op meets no group, so every group's rounds come in
// the same order on every tower.
func (p *program) deferSinks() {
	readers := p.readers()
	p.sinks = make([]bool, len(p.nodes))
	for i := len(p.nodes) - 1; i >= 0; i-- { // readers come after what they read
		if !p.movable(i) || p.skip(i) {
			continue
		}
		p.sinks[i] = true
		for _, r := range readers[i] {
			if !p.sinks[r] {
				p.sinks[i] = false
				break
			}
		}
	}
}

// movable reports whether node i is an op a run may move (towers.Movable),
// or an addition the program runs itself (an adder).
func (p *program) movable(i int) bool {
	op := p.nodes[i].Op()
	if op == nil {
		return false
	}
	if _, ok := p.ops[i].(*adder); ok {
		return true
	}
	m, ok := op.(towers.Movable)
	return ok && m.Movable()
}

// skip reports whether node i is an addition its reader takes as terms.
func (p *program) skip(i int) bool { return p.skipped != nil && p.skipped[i] }

// run computes every node once (but the additions fuseSums skipped).
func (p *program) run() error {
	clear(p.vals)
	p.queue, p.head, p.failed = p.queue[:0], 0, nil
	for i, n := range p.nodes {
		if n.Op() == nil {
			if p.vals[i] = n.Value(); p.vals[i] == nil {
				return fmt.Errorf("node %v has no value", n.Name())
			}
			continue
		}
		if p.skip(i) {
			continue
		}
		if p.sinks != nil && p.sinks[i] {
			p.queue = append(p.queue, i)
			continue
		}
		err := p.runNode(i, &p.in)
		if p.failed != nil { // a sink that failed in the op's wait comes first
			err = p.failed
		}
		if err != nil {
			return err
		}
	}
	// What is left of the queue runs here, a sink at a time as in a wait
	// (so a sink that waits in a group runs no other inside itself).
	for p.idle() {
	}
	if p.failed != nil {
		return p.failed
	}
	return p.ownWatched()
}

// runNode runs node i's op on its arguments' values, gathered in *in, and
// binds the result.
func (p *program) runNode(i int, in *[]G.Value) error {
	n := p.nodes[i]
	args := (*in)[:0]
	for _, a := range p.args[i] {
		args = append(args, p.vals[a])
	}
	*in = args
	var v G.Value
	var err error
	if op, ok := p.ops[i]; ok {
		v, err = op.Do(args...)
	} else if f, ok := p.sums[i]; ok {
		terms := p.args[f.add]
		args[f.arg] = p.vals[terms[0]]
		v, err = n.Op().(towers.SumInput).DoSum(p.vals[terms[1]], args...)
	} else {
		v, err = n.Op().Do(args...)
	}
	clear(args)
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
	return nil
}

// idle runs the next deferred sink, if there is one and nothing has failed,
// and reports whether it ran one. It is a group's idle work
// (towers.Group.SetIdle), and run's at the end: in a wait it runs on the
// tower's goroutine inside the op that waits, so it keeps its own
// arguments' scratch, runs nothing from inside a sink it runs (a sink that
// itself waits in a group), and never panics: a failure, a panic as a
// *sinkPanic, is kept for run, which returns it after the op that waited.
func (p *program) idle() bool {
	if p.inIdle || p.failed != nil || p.head >= len(p.queue) {
		return false
	}
	i := p.queue[p.head]
	p.head++
	p.inIdle = true
	defer func() {
		p.inIdle = false
		if r := recover(); r != nil {
			clear(p.idleIn)
			p.failed = &sinkPanic{value: r, stack: debug.Stack()}
		}
	}()
	p.failed = p.runNode(i, &p.idleIn)
	return true
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
