package towers

import (
	"fmt"

	G "gorgonia.org/gorgonia"
)

// Update is a change to a variable that a model function declares in its
// graph, TensorFlow's assign and assign_add (the UPDATE_OPS a batch
// normalization adds): the engine runs it once per training step, after the
// towers and the optimizer, on the master.
type Update struct {
	// Var names the variable, one the tower asked for.
	Var string
	// Value is a node of the tower's graph with the variable's shape and
	// dtype: the new value (Add false) or the delta to add (Add true).
	Value *G.Node
	// Add is true for AssignAdd, false for Assign.
	Add bool
}

// Assign declares that, once this training step's towers have run, the
// variable name takes value: a node of this tower's graph with the
// variable's dtype and shape, computed in the step from the variables'
// values before it. Under replication the towers' values are combined as
// the batch-weighted mean (each tower weighted by its share of the batch's
// rows), so a moving average of a batch statistic on N towers equals one
// device on the whole batch; only float variables can be assigned.
//
// Updates run in Train mode only; Eval and Predict ignore them. Declaring
// two updates of one variable in one tower is an error.
func (s *Scope) Assign(name string, value *G.Node) error {
	return s.declare(Update{Var: name, Value: value})
}

// AssignAdd declares that delta, a node of this tower's graph with the
// variable's dtype and shape, is added to the variable name once this
// training step's towers have run. Under replication every tower's delta
// is added (TensorFlow's semantics: a counter incremented by one in each
// of two towers grows by two a step).
func (s *Scope) AssignAdd(name string, delta *G.Node) error {
	return s.declare(Update{Var: name, Value: delta, Add: true})
}

func (s *Scope) declare(u Update) error {
	what := "Assign"
	if u.Add {
		what = "AssignAdd"
	}
	n, ok := s.vars[u.Var]
	if !ok {
		return fmt.Errorf("%v: %s(%q): the tower has not asked for the variable (has: %v)", s, what, u.Var, s.varOrder)
	}
	if u.Value == nil {
		return fmt.Errorf("%v: %s(%q): nil value", s, what, u.Var)
	}
	if u.Value.Graph() != s.g {
		return fmt.Errorf("%v: %s(%q): value %s is not a node of this tower's graph", s, what, u.Var, u.Value.Name())
	}
	if !u.Value.Shape().Eq(n.Shape()) || u.Value.Dtype() != n.Dtype() {
		return fmt.Errorf("%v: %s(%q): value %s has shape %v dtype %v, the variable %v %v", s, what, u.Var, u.Value.Name(), u.Value.Shape(), u.Value.Dtype(), n.Shape(), n.Dtype())
	}
	for _, o := range s.updates {
		if o.Var == u.Var {
			return fmt.Errorf("%v: %s(%q): the variable already has an update in this tower", s, what, u.Var)
		}
	}
	s.updates = append(s.updates, u)
	return nil
}

// updateList returns the updates the tower declared, in order: the
// engine reads them (internal/scopes.Updates).
func (s *Scope) updateList() []Update { return append([]Update(nil), s.updates...) }
