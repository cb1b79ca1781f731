package tower

import G "gorgonia.org/gorgonia"

// AnyNode says whether match accepts a node of the tower's graph.
func (t *Tower) AnyNode(match func(*G.Node) bool) bool {
	for _, n := range t.g.AllNodes() {
		if match(n) {
			return true
		}
	}
	return false
}
