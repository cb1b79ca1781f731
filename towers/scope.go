package towers

import (
	"fmt"
	"hash/fnv"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Scope is what a model function sees of its tower: the graph to build on,
// the device and index of the tower, and the variables of the model's Store
// by name. A Scope is a view of one tower's graph over the store, as
// GoMLX's scope is a view over its variable store: the store outlives every
// graph, a scope lives as long as one build of the towers.
//
// Tower 0 of a build creates variables; a later tower may only reuse the
// variables tower 0 asked for, with the same shape, dtype and trainability.
// Tower 0's nodes keep plain names; tower i>0 prefixes them "tower_i/".
//
// A Scope has nothing to run a graph with: the replication engine (package
// replicate) feeds and runs the towers it builds.
type Scope struct {
	index  int
	device Device
	store  *Store
	first  *Scope
	g      *G.ExprGraph

	vars     map[string]*G.Node
	varOrder []string
	updates  []Update

	count  int      // towers in the build
	groups []*Group // tower 0's: the build's rendezvous, in the order made
	board  *Board   // tower 0's: the build's posted work, once asked for

	step *G.Node // the global step's node, once asked for

	sparse  map[string]*SparseFeature // by feature name
	lookups []Lookup
	// rowOffset is the batch row of the shard's row 0, set by the engine
	// (internal/scopes.SetRowOffset).
	rowOffset int
}

// NewScope returns the scope of an empty graph for tower index of count
// towers in one build, on device over store. first is tower 0's scope of
// the same build, or nil when this is tower 0.
func NewScope(index, count int, device Device, store *Store, first *Scope) *Scope {
	s := &Scope{index: index, count: max(count, 1), device: device, store: store, first: first, g: G.NewGraph(), vars: map[string]*G.Node{}}
	return s
}

// tower0 returns the scope of tower 0 of s's build, which holds what the
// build's towers share (its groups and board).
func (s *Scope) tower0() *Scope {
	if s.first != nil {
		return s.first
	}
	return s
}

// Towers returns the number of towers in the build, this one included.
func (s *Scope) Towers() int { return s.count }

// Index returns the tower's index; tower 0 is the first.
func (s *Scope) Index() int { return s.index }

// Device returns the device the tower runs on.
func (s *Scope) Device() Device { return s.device }

// Graph returns the tower's expression graph, on which model code builds.
func (s *Scope) Graph() *G.ExprGraph { return s.g }

// String names the tower for messages: "tower 1 (/device:CPU:1)".
func (s *Scope) String() string { return fmt.Sprintf("tower %d (%v)", s.index, s.device) }

// Name returns name as this tower's nodes are named: unchanged on tower 0,
// "tower_i/name" on tower i>0.
func (s *Scope) Name(name string) string {
	if s.index == 0 {
		return name
	}
	return fmt.Sprintf("tower_%d/%s", s.index, name)
}

// GlobalStep returns an int64 scalar node of the tower's graph bound to the
// store's global step (created at zero when the store has none): during a
// training step it holds the number of steps taken before it. It is a
// framework variable, not one of the tower's variables: the placement does
// not count it and no gradient is taken with respect to it.
func (s *Scope) GlobalStep() (*G.Node, error) {
	if s.step != nil {
		return s.step, nil
	}
	v, _, err := s.store.GetOrCreate(VarSpec{Name: GlobalStepName, Dtype: tensor.Int64})
	if err != nil {
		return nil, fmt.Errorf("%v: global step: %w", s, err)
	}
	b, ok := v.backing.([]int64)
	if !ok || len(v.shape) != 0 {
		return nil, fmt.Errorf("%v: global step %q has shape %v dtype %v, want an int64 scalar", s, GlobalStepName, v.shape, v.dtype)
	}
	s.step = G.NewScalar(s.g, tensor.Int64, G.WithName(s.Name(GlobalStepName)), G.WithValue((*G.I64)(&b[0])))
	return s.step, nil
}

// Seed returns a seed for the random op called name in this tower, from
// the store's seed, name and the tower's index: the same in every build of
// the store, different between towers and between names.
func (s *Scope) Seed(name string) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s\x00%d", s.store.seed, name, s.index)
	return h.Sum64()
}

// VarOption adjusts a variable request.
type VarOption func(*VarSpec)

// NotTrainable marks a variable that optimizers leave alone by default
// (a counter, a moving average).
func NotTrainable() VarOption { return func(s *VarSpec) { s.Trainable = false } }

// Variable returns the tower's node for the variable name, getting or
// creating the master in the store: a name is one variable, so asking
// for it again (as two layers of one name do) shares it, and with another
// shape or dtype is an error naming both. Variables are trainable unless
// NotTrainable is given; init is used only when the master is created (nil
// means zeros). Asking twice in one tower returns the same node. The
// store's placement counts the variables model code creates, and only
// those (not the global step, not optimizer slots).
func (s *Scope) Variable(name string, dt tensor.Dtype, shape tensor.Shape, init Initializer, opts ...VarOption) (*G.Node, error) {
	if n, ok := s.vars[name]; ok {
		if !n.Shape().Eq(shape) || n.Dtype() != dt {
			return nil, fmt.Errorf("%v: variable %q asked with shape %v dtype %v, earlier in this tower with shape %v dtype %v (one name is one variable: asked twice, as by two layers of one name, it is shared and must agree)", s, name, shape, dt, n.Shape(), n.Dtype())
		}
		return n, nil
	}
	spec := VarSpec{Name: name, Dtype: dt, Shape: shape, Init: init, Trainable: true}
	for _, o := range opts {
		o(&spec)
	}
	var v *Variable
	if s.first == nil {
		var err error
		if v, _, err = s.store.getOrCreate(spec, true); err != nil {
			return nil, fmt.Errorf("%v: %w", s, err)
		}
	} else {
		if _, ok := s.first.vars[name]; !ok {
			return nil, fmt.Errorf("%v: variable %q was not created by tower 0 (tower 0 has: %v); every tower must build the same variables", s, name, s.first.varOrder)
		}
		var err error
		if v, err = s.store.Lookup(name); err != nil {
			return nil, fmt.Errorf("%v: %w", s, err)
		}
		if !v.shape.Eq(shape) || v.dtype != dt {
			return nil, fmt.Errorf("%v: variable %q asked with shape %v dtype %v, tower 0 made it with shape %v dtype %v", s, name, shape, dt, v.shape, v.dtype)
		}
		if v.trainable != spec.Trainable {
			return nil, fmt.Errorf("%v: variable %q asked with trainable=%v, tower 0 made it with trainable=%v", s, name, spec.Trainable, v.trainable)
		}
	}
	n := NewNode(s.g, v.dtype, v.shape, s.Name(name), G.WithValue(v.value()))
	s.vars[name] = n
	s.varOrder = append(s.varOrder, name)
	return n, nil
}

// MustVariable is Variable for model code that prefers panics: the engine
// turns a panic in a model function into an error naming the tower.
func (s *Scope) MustVariable(name string, dt tensor.Dtype, shape tensor.Shape, init Initializer, opts ...VarOption) *G.Node {
	n, err := s.Variable(name, dt, shape, init, opts...)
	if err != nil {
		panic(err)
	}
	return n
}

// VariableNames returns the variables this tower asked for, in order.
func (s *Scope) VariableNames() []string { return slices.Clone(s.varOrder) }

// VariableNode returns this tower's node for a variable it asked for.
func (s *Scope) VariableNode(name string) (*G.Node, bool) {
	n, ok := s.vars[name]
	return n, ok
}

// NewNode adds a scalar (empty shape) or tensor node named name to g.
func NewNode(g *G.ExprGraph, dt tensor.Dtype, shape tensor.Shape, name string, opts ...G.NodeConsOpt) *G.Node {
	opts = append([]G.NodeConsOpt{G.WithName(name)}, opts...)
	if len(shape) == 0 {
		return G.NewScalar(g, dt, opts...)
	}
	return G.NewTensor(g, dt, len(shape), append(opts, G.WithShape(shape.Clone()...))...)
}
