// Package tower runs one replica of a model: the graph a model function
// built through its towers.Scope, the inputs the engine feeds, the
// gradients it asks for, and the program that runs it. A tower's program
// leaves out the gradients that symbolic differentiation made as a
// by-product and nothing reads (with respect to the input batch, say), and
// runs the ops itself on the goroutine that calls Run: gorgonia's tape
// machine starts a goroutine and locks a thread on every run, and with BLAS
// calls holding both cores those goroutines wait on the Go scheduler (a
// graph with G.Read or G.Set statements, or GPU nodes, still goes to the
// tape machine). RunAll runs towers at the same time.
//
// It is internal: package replicate builds and drives towers, and model
// code sees only the Scope, never the runtime.
package tower

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/trace"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/guard"
	"github.com/towerflow/towerflow/internal/parallel"
	"github.com/towerflow/towerflow/internal/scopes"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// Tower is one replica of a model: the graph its Scope built on one device
// over the shared variables of a Store, and the program that runs it. The
// engine adds the inputs, asks for gradients, marks the values it reads,
// compiles, feeds and runs the tower; model code only ever sees the Scope.
type Tower struct {
	*towers.Scope
	g *G.ExprGraph

	inputs  map[string]*G.Node
	inOrder []string
	feeds   map[string]*tensor.Dense
	watched map[*G.Node]*G.Value
	// watchOrder is watched's keys in the order Watch saw them.
	watchOrder []*G.Node
	// byGrad holds the nodes Gradients added to the graph besides the
	// gradients asked for: among them are gradients nobody wants (with
	// respect to inputs, labels, comparison masks), which Compile leaves
	// out of the program.
	byGrad map[*G.Node]bool
	// sparse are the tower's sparse features by input name; a feature's
	// densified input is in inputs while the graph uses it.
	sparse map[string]*towers.SparseFeature
	prog   *program // runs the graph; nil when vm does
	vm     G.VM
	log    *slog.Logger
}

// tapeOnly makes Compile always use gorgonia's tape machine; tests set it
// to check that both ways of running a graph agree.
var tapeOnly bool

// New returns the tower of scope s, with nothing to run yet. log receives
// debug messages (nil: none).
func New(s *towers.Scope, log *slog.Logger) *Tower {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Tower{
		Scope:   s,
		g:       s.Graph(),
		inputs:  map[string]*G.Node{},
		feeds:   map[string]*tensor.Dense{},
		watched: map[*G.Node]*G.Value{},
		byGrad:  map[*G.Node]bool{},
		sparse:  map[string]*towers.SparseFeature{},
		log:     log,
	}
}

// Input adds an input node fed by Feed before each run.
func (t *Tower) Input(name string, dt tensor.Dtype, shape tensor.Shape) (*G.Node, error) {
	if _, ok := t.inputs[name]; ok {
		return nil, fmt.Errorf("%v: input %q added twice", t, name)
	}
	n := towers.NewNode(t.g, dt, shape, t.Name(name))
	t.inputs[name] = n
	t.inOrder = append(t.inOrder, name)
	return n, nil
}

// SparseInput adds the sparse feature key (input name name) of dtype dt
// and shard dense shape shape, fed by FeedSparse before each run: a
// towers.SparseFeature of the Scope, whose densified node (returned) is an
// input that Compile drops when nothing uses it.
func (t *Tower) SparseInput(key, name string, dt tensor.Dtype, shape tensor.Shape) (*G.Node, error) {
	n, err := t.Input(name, dt, shape)
	if err != nil {
		return nil, err
	}
	f := scopes.NewSparseFeature(key, dt, shape, n)
	if err := scopes.AddSparseFeature(t.Scope, f); err != nil {
		return nil, err
	}
	t.sparse[name] = f
	return n, nil
}

// FeedSparse sets the shard input name (a SparseInput) takes in the
// following runs, its row 0 being row offset of the batch, and densifies
// it when the graph uses the densified node.
func (t *Tower) FeedSparse(name string, v sharding.SparseCOO, offset int) error {
	f, ok := t.sparse[name]
	if !ok {
		return fmt.Errorf("%v: no sparse input %q", t, name)
	}
	if err := scopes.SetSparse(f, v, offset); err != nil {
		return fmt.Errorf("%v: %w", t, err)
	}
	if _, used := t.inputs[name]; !used {
		return nil
	}
	d, err := v.Dense()
	if err != nil {
		return fmt.Errorf("%v: densify sparse feature %q: %w", t, f.Name(), err)
	}
	return t.Feed(name, d)
}

// dropUnusedDense leaves the densified inputs of sparse features that no
// node uses out of the program and the inputs: they are then never
// densified.
func (t *Tower) dropUnusedDense() {
	for name := range t.sparse {
		n, ok := t.inputs[name]
		if !ok || t.g.To(n.ID()).Len() > 0 {
			continue
		}
		if _, watched := t.watched[n]; watched {
			continue
		}
		t.byGrad[n] = true // left out of the program, as liveRoots leaves by-products
		delete(t.inputs, name)
		delete(t.feeds, name)
		t.inOrder = slices.DeleteFunc(t.inOrder, func(s string) bool { return s == name })
	}
}

// Feed sets the value input name takes in the following runs. The tensor
// must not be used by another running tower (gorgonia rewrites operand
// headers in place): give each tower its own header.
func (t *Tower) Feed(name string, v *tensor.Dense) error {
	if old, ok := t.feeds[name]; ok && old == v && v != nil {
		return nil // checked when first fed; a training loop feeds the same shard headers again
	}
	n, ok := t.inputs[name]
	if !ok {
		return fmt.Errorf("%v: no input %q", t, name)
	}
	if v == nil || !v.Shape().Eq(n.Shape()) || v.Dtype() != n.Dtype() {
		return fmt.Errorf("%v: input %q wants shape %v dtype %v, got %v", t, name, n.Shape(), n.Dtype(), describe(v))
	}
	t.feeds[name] = v
	return nil
}

// Gradients returns symbolic gradients of the scalar loss with respect to
// the named variables of this tower. A variable the loss does not depend on
// has no gradient and is left out of the result rather than being an error.
// A variable the loss reaches only through lookups (towers.Lookup) has
// no gradient here either: see LookupGradients.
func (t *Tower) Gradients(loss *G.Node, names []string) (map[string]*G.Node, error) {
	out, _, err := t.LookupGradients(loss, names)
	return out, err
}

// LookupGradient is a lookup of one of the tower's variables and the node
// of the loss's gradient with respect to its output.
type LookupGradient struct {
	towers.Lookup
	Grad *G.Node
}

// LookupGradients is Gradients, and the gradients with respect to the
// outputs of the tower's lookups of the named variables that the loss
// depends on, in lookup order. Symbolic differentiation does not go
// through a lookup: a variable the loss reaches only through lookups has
// no dense gradient (no node of the variable's size), only these; one the
// loss also reaches otherwise (a table also read densely) has both. Each
// call differentiates its loss afresh, whatever earlier calls
// differentiated: losses sharing nodes each get their own gradients.
func (t *Tower) LookupGradients(loss *G.Node, names []string) (map[string]*G.Node, []LookupGradient, error) {
	if loss == nil {
		return nil, nil, fmt.Errorf("%v: nil loss", t)
	}
	if loss.Graph() != t.g {
		return nil, nil, fmt.Errorf("%v: loss %v is not a node of this tower's graph", t, loss.Name())
	}
	if !loss.IsScalar() {
		return nil, nil, fmt.Errorf("%v: loss must be a scalar, has shape %v", t, loss.Shape())
	}
	lookups := scopes.Lookups(t.Scope)
	stops := map[int64]bool{}
	for _, l := range lookups {
		stops[l.Output.ID()] = true
	}
	reach := t.ancestors(loss, stops)
	var wrt []*G.Node
	var wrtNames []string
	for _, name := range names {
		n, ok := t.VariableNode(name)
		if !ok {
			return nil, nil, fmt.Errorf("%v: gradient wrt variable %q, which the tower did not ask for (has: %v)", t, name, t.VariableNames())
		}
		if reach[n.ID()] {
			wrt = append(wrt, n)
			wrtNames = append(wrtNames, name)
		}
	}
	var lgs []LookupGradient
	if len(lookups) > 0 {
		wanted := map[string]bool{}
		for _, name := range names {
			wanted[name] = true
		}
		for _, l := range lookups {
			if wanted[l.Variable] && reach[l.Output.ID()] {
				lgs = append(lgs, LookupGradient{Lookup: l})
				wrt = append(wrt, l.Output)
			}
		}
	}
	out := map[string]*G.Node{}
	if len(wrt) == 0 {
		return out, nil, nil
	}
	before := map[*G.Node]bool{}
	for _, n := range t.g.AllNodes() {
		before[n] = true
	}
	if err := t.clearDerivs(loss); err != nil {
		return nil, nil, err
	}
	var grads G.Nodes
	var err error
	if len(lgs) == 0 {
		grads, err = G.Grad(loss, wrt...)
	} else {
		// G.Grad differentiates with respect to inputs only; a lookup's
		// output is an op's. This is G.Grad without that check.
		grads, err = G.Backpropagate(G.Nodes{loss}, G.Nodes{t.one(loss.Dtype())}, wrt)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%v: gradients of %v: %w", t, loss.Name(), err)
	}
	for _, n := range t.g.AllNodes() {
		if !before[n] {
			t.byGrad[n] = true
		}
	}
	for i, g := range grads {
		delete(t.byGrad, g)
		if i < len(wrtNames) {
			out[wrtNames[i]] = g
		} else {
			lgs[i-len(wrtNames)].Grad = g
		}
	}
	return out, lgs, nil
}

// one is the gradient of the loss with respect to itself, as G.Grad
// starts from: a constant one of the loss's dtype.
func (t *Tower) one(dt tensor.Dtype) *G.Node {
	if dt == tensor.Float32 {
		return t.g.AddNode(G.NewConstant(float32(1)))
	}
	return t.g.AddNode(G.NewConstant(1.0))
}

// ancestors returns the IDs of every node n depends on, n included, not
// looking past the nodes in stops (their own IDs are included).
func (t *Tower) ancestors(n *G.Node, stops map[int64]bool) map[int64]bool {
	seen := map[int64]bool{n.ID(): true}
	stack := []int64{n.ID()}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if stops[id] {
			continue
		}
		it := t.g.From(id)
		for it.Next() {
			c := it.Node().ID()
			if !seen[c] {
				seen[c] = true
				stack = append(stack, c)
			}
		}
	}
	return seen
}

// Watch keeps n in the program and its value readable by Value after Run,
// even if nothing else uses n. A tower's own program gives each node its
// own value (copying one that shares memory with an input, variable or
// constant); on gorgonia's tape machine, which reuses the memory of a node
// whose last use has passed, the value is copied out as it is computed.
// Call Watch before Compile; watching a node twice is harmless.
func (t *Tower) Watch(n *G.Node) error {
	if n == nil {
		return fmt.Errorf("%v: watch a nil node", t)
	}
	if n.Graph() != t.g {
		return fmt.Errorf("%v: node %v is not in this tower's graph", t, n.Name())
	}
	if t.vm != nil || t.prog != nil {
		return fmt.Errorf("%v: watch %v after compile", t, n.Name())
	}
	if _, ok := t.watched[n]; ok || n.IsVar() {
		return nil
	}
	t.watched[n] = new(G.Value)
	t.watchOrder = append(t.watchOrder, n)
	return nil
}

// Value returns the value n had in the last Run: for a watched node what
// Watch kept, for an input or variable its bound value. It stays valid
// until the next Run.
func (t *Tower) Value(n *G.Node) (G.Value, error) {
	if p, ok := t.watched[n]; ok {
		if t.prog != nil {
			v, _ := t.prog.value(n)
			if v == nil {
				return nil, fmt.Errorf("%v: node %v has no value: has the tower run?", t, n.Name())
			}
			return v, nil
		}
		if *p == nil {
			return nil, fmt.Errorf("%v: node %v has no value: has the tower run?", t, n.Name())
		}
		return *p, nil
	}
	if n.IsVar() {
		return n.Value(), nil
	}
	return nil, fmt.Errorf("%v: node %v was not watched before compile", t, n.Name())
}

// Compile orders the tower's graph once for every later Run. Gradients that
// symbolic differentiation made as a by-product and nothing uses (with
// respect to the inputs, say: as large as a layer's matrix product) are
// left out, so a run computes only what is read.
//
// A tower runs its ops itself, each in turn on the goroutine that calls
// Run (see program). A graph holding what only gorgonia's machines can run
// (G.Read or G.Set statements, nodes on a GPU) goes to gorgonia's tape
// machine instead, which gives the same values.
func (t *Tower) Compile() (err error) {
	defer guard.Recover(&err, t, "compile")
	t.dropUnusedDense()
	if !tapeOnly {
		roots, _ := t.liveRoots()
		p, perr := newProgram(t.g, roots, t.watchOrder)
		if perr == nil {
			t.prog = p
			return t.fillWaits()
		}
		t.log.Debug("tower: running the graph on gorgonia's tape machine", "tower", t.String(), "reason", perr)
	}
	for _, n := range t.watchOrder {
		G.Read(n, t.watched[n])
	}
	g := t.g
	if roots, pruned := t.liveRoots(); pruned {
		g = t.g.SubgraphRoots(roots...)
	}
	t.vm = G.NewTapeMachine(g)
	return nil
}

// fillWaits has the tower's program defer its sinks and run them while the
// tower waits in one of its build's groups (see program.deferSinks), and
// has its ops that can share their runs post them on the build's board for
// the towers that wait (towers.Sharing), when there are groups and other
// towers to wait for.
func (t *Tower) fillWaits() error {
	groups := scopes.Groups(t.Scope)
	if len(groups) == 0 || t.Towers() < 2 {
		return nil
	}
	t.prog.deferSinks()
	for _, g := range groups {
		if err := g.SetIdle(t.Index(), t.prog.idle); err != nil {
			return fmt.Errorf("%v: %w", t, err)
		}
	}
	b := t.Board()
	for _, n := range t.prog.nodes {
		if op, ok := n.Op().(towers.Sharing); ok {
			op.ShareOn(b, t.Index())
		}
	}
	return nil
}

// liveRoots returns the roots of the graph (nodes nothing else uses) other
// than unused by-products of Gradients, and whether it left any out.
func (t *Tower) liveRoots() (roots G.Nodes, pruned bool) {
	for _, n := range t.g.AllNodes() {
		if t.g.To(n.ID()).Len() > 0 {
			continue
		}
		if t.byGrad[n] {
			pruned = true
			continue
		}
		roots = append(roots, n)
	}
	return roots, pruned
}

// Run feeds the inputs and runs the graph once, on the calling goroutine.
// Node values stay readable until the next Run.
func (t *Tower) Run() (err error) {
	if t.vm == nil && t.prog == nil {
		return fmt.Errorf("%v: run before compile", t)
	}
	defer guard.Recover(&err, t, "run")
	if t.vm != nil {
		t.vm.Reset()
	}
	for _, name := range t.inOrder {
		v, ok := t.feeds[name]
		if !ok {
			return fmt.Errorf("%v: input %q not fed", t, name)
		}
		if err := G.Let(t.inputs[name], v); err != nil {
			return fmt.Errorf("%v: feed %q: %w", t, name, err)
		}
	}
	if t.prog != nil {
		err = t.prog.run()
	} else {
		err = t.vm.RunAll()
	}
	if sp := (*sinkPanic)(nil); errors.As(err, &sp) {
		return &PanicError{Where: t.String(), What: "run", Value: sp.value, Stack: sp.stack}
	}
	if err != nil {
		return fmt.Errorf("%v: run: %w", t, err)
	}
	return nil
}

// Close releases the VM, if the tower has one.
func (t *Tower) Close() error {
	if t.vm == nil {
		return nil
	}
	return t.vm.Close()
}

// PanicError is a panic recovered from model code or gorgonia; its Where
// names the tower it happened on.
type PanicError = guard.PanicError

// Guard calls fn, turning a panic inside it into a *PanicError naming the
// tower and what it was doing.
func (t *Tower) Guard(what string, fn func() error) (err error) {
	defer guard.Recover(&err, t, what)
	return fn()
}

// RunAll calls fn once per tower, all at the same time, and waits for all
// of them: ts[0] on the calling goroutine, the others on the goroutines of
// internal/parallel's team, which are already running between the steps
// of a training loop, so that no tower waits for the scheduler to start
// it. A panic in fn becomes a *PanicError naming the tower. Errors from
// several towers are joined in tower order. A cancelled ctx is checked
// before starting. The groups of the towers' build (towers.Scope.Group)
// are reset before the towers start, and aborted as soon as one fails, so
// that no tower waits in a group for one that will not come.
func RunAll(ctx context.Context, ts []*Tower, fn func(*Tower) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(ts) == 0 {
		return nil
	}
	groups := scopes.Groups(ts[0].Scope)
	for _, g := range groups {
		g.Reset()
	}
	errs := make([]error, len(ts))
	parallel.Gang(len(ts), func(i int) {
		defer trace.StartRegion(ctx, "tower").End()
		errs[i] = ts[i].Guard("run", func() error { return fn(ts[i]) })
		if errs[i] != nil {
			// Towers waiting for this one in a group would wait for ever.
			for _, g := range groups {
				g.Abort(fmt.Errorf("%v failed", ts[i]))
			}
		}
	})
	return errors.Join(errs...)
}

func describe(v *tensor.Dense) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprintf("shape %v dtype %v", v.Shape(), v.Dtype())
}

// AssignSets turns each G.Set statement of the tower's graph that sets one
// of the tower's variables into a state update (Scope.Assign) and takes
// the statement out of the graph. gorgonia's tape machine, which would
// otherwise run such a graph, does nothing for a Set: a variable the model
// sets would silently never be written. A Set of anything but a variable is
// an error naming the node.
func (t *Tower) AssignSets() error {
	byNode := map[*G.Node]string{}
	for _, name := range t.VariableNames() {
		n, _ := t.VariableNode(name)
		byNode[n] = name
	}
	for _, n := range t.g.AllNodes() {
		op := n.Op()
		if op == nil {
			continue
		}
		if !isGorgoniaOp(op, "letOp") {
			continue
		}
		kids := children(t.g, n)
		if len(kids) != 2 {
			return fmt.Errorf("%v: G.Set node %v has %d operands, want 2", t, n.Name(), len(kids))
		}
		name, ok := byNode[kids[0]]
		if !ok {
			return fmt.Errorf("%v: G.Set node %v sets %v, which is not a variable of the tower: only variables can be set (Scope.Assign)", t, n.Name(), kids[0].Name())
		}
		if err := t.Assign(name, kids[1]); err != nil {
			return fmt.Errorf("G.Set node %v: %w", n.Name(), err)
		}
		t.g.RemoveNode(n)
	}
	return nil
}
