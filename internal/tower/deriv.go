package tower

import (
	"fmt"
	"reflect"
	"unsafe"

	G "gorgonia.org/gorgonia"
)

// derivOffset is the offset in a gorgonia Node of its unexported deriv
// field, the gradient an earlier differentiation recorded for the node
// (Node.Deriv), and derivKnown whether that field was found with the type
// this package expects.
//
// gorgonia's Backpropagate treats a node with a recorded gradient as done:
// it takes the recorded gradient, of whatever loss was differentiated
// then, as the node's gradient and goes no further. A second loss that
// reaches nodes a first went through would get part of the first loss's
// gradient and none of its own below them. clearDerivs forgets those
// records so that each differentiation starts afresh over the same forward
// graph; gorgonia offers no way to do it, hence the field by name.
var derivOffset, derivKnown = func() (uintptr, bool) {
	f, ok := reflect.TypeOf(G.Node{}).FieldByName("deriv")
	if !ok || f.Type != reflect.TypeOf((*G.Node)(nil)) {
		return 0, false
	}
	return f.Offset, true
}()

// clearDerivs forgets the gradients earlier differentiations recorded on
// the nodes of t's graph, before loss is differentiated. Where gorgonia's
// Node has no such field as this package knows, a recorded gradient is an
// error rather than a wrong gradient.
func (t *Tower) clearDerivs(loss *G.Node) error {
	for _, n := range t.g.AllNodes() {
		if n.Deriv() == nil {
			continue
		}
		if !derivKnown {
			return fmt.Errorf("%v: cannot differentiate %v: node %v was differentiated before and this gorgonia version's record of it cannot be cleared", t, loss.Name(), n.Name())
		}
		*(**G.Node)(unsafe.Add(unsafe.Pointer(n), derivOffset)) = nil
	}
	return nil
}
