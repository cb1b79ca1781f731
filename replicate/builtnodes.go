package replicate

import G "gorgonia.org/gorgonia"

// BuiltHasNode says whether match accepts a node of the newest build's
// first tower (every tower builds the same model), for the function
// OnBuild sets: e.g. layers.PureGoConvolution, to tell a user of a
// convolutional model that another build would train it faster. It is
// false before any build.
func (e *Engine) BuiltHasNode(match func(*G.Node) bool) bool {
	b := e.built
	return b != nil && b.towers[0].AnyNode(match)
}
