package layers

import (
	"fmt"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/towers"
)

// Module is a place in a model's tree of layers: a tower's Scope and a
// path. The layers made in a module (NewDense, NewConv2D, NewBatchNorm)
// and its submodules name their variables under its path, so that a layer
// "dense_1" of the module "encoder" owns "encoder/dense_1/kernel" and
// "encoder/dense_1/bias": the names the store, Store.Weights,
// checkpoints and warm start know them by.
//
// A Module lives as long as the graph of its Scope: a model function makes
// its modules and layers anew on every tower of every build, and since
// variables are got or created by name, each tower's layers read the same
// master variables.
type Module struct {
	s    *towers.Scope
	path string
}

// NewModule returns the module at path (elements separated by "/") in
// s; "" is the root, whose layers' variables have no prefix.
func NewModule(s *towers.Scope, path string) *Module {
	return &Module{s: s, path: strings.Trim(path, "/")}
}

// Sub returns the submodule name of m: its path is m's path, "/", name.
func (m *Module) Sub(name string) *Module { return &Module{s: m.s, path: m.Name(name)} }

// Scope returns the module's Scope.
func (m *Module) Scope() *towers.Scope { return m.s }

// Path returns the module's path ("" for the root).
func (m *Module) Path() string { return m.path }

// Name returns the full name of name in m: m's path, "/", name (name alone
// in the root).
func (m *Module) Name(name string) string {
	if m.path == "" {
		return name
	}
	return m.path + "/" + name
}

// Variable returns the tower's node of the variable name in m, getting or
// creating the master under the full name Name(name) with Scope.Variable:
// asked twice, in one tower or in several, it is one variable, which must
// have one shape and dtype.
func (m *Module) Variable(name string, dt tensor.Dtype, shape tensor.Shape, init towers.Initializer, opts ...towers.VarOption) (*G.Node, error) {
	if m == nil || m.s == nil {
		return nil, fmt.Errorf("variable %q: nil module or scope", name)
	}
	full, err := m.fullName(name)
	if err != nil {
		return nil, err
	}
	return m.s.Variable(full, dt, shape, init, opts...)
}

// fullName is Name(name), checked: no path element may be empty.
func (m *Module) fullName(name string) (string, error) {
	full := m.Name(name)
	for _, e := range strings.Split(full, "/") {
		if e == "" {
			return "", fmt.Errorf("variable %q: the name has an empty path element", full)
		}
	}
	return full, nil
}

// Names returns the full names of the variables the tower has asked for
// under m's path (m's layers', its submodules', and any asked for directly
// under that path), in the order asked; the root's are all the tower's
// variables.
func (m *Module) Names() []string {
	all := m.s.VariableNames()
	if m.path == "" {
		return all
	}
	var out []string
	for _, n := range all {
		if strings.HasPrefix(n, m.path+"/") {
			out = append(out, n)
		}
	}
	return out
}

// Nodes returns the tower's nodes of the variables Names lists, by full
// name.
func (m *Module) Nodes() map[string]*G.Node {
	out := map[string]*G.Node{}
	for _, n := range m.Names() {
		out[n], _ = m.s.VariableNode(n)
	}
	return out
}

// layerIn checks that x can be the input of the layer name whose variable
// v is: a float node of v's graph and dtype.
func layerIn(op, name string, x, v *G.Node) error {
	if x == nil {
		return fmt.Errorf("%s(%q): nil input", op, name)
	}
	if x.Graph() != v.Graph() {
		return fmt.Errorf("%s(%q): input %s is not a node of the layer's graph: a layer belongs to the tower (Scope) it was made in, make it in the model function", op, name, x.Name())
	}
	if x.Dtype() != v.Dtype() {
		return fmt.Errorf("%s(%q): input %s is %v, the layer's variables %v", op, name, x.Name(), x.Dtype(), v.Dtype())
	}
	return nil
}

// layerDtype returns dt, Float32 when unset, or an error for another type
// than Float32 and Float64.
func layerDtype(op, name string, dt tensor.Dtype) (tensor.Dtype, error) {
	if dt.Type == nil {
		return tensor.Float32, nil
	}
	if dt != tensor.Float32 && dt != tensor.Float64 {
		return dt, fmt.Errorf("%s(%q): dtype %v, want float32 or float64", op, name, dt)
	}
	return dt, nil
}
