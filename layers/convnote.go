package layers

import (
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/dnnl"
)

// PureGoConvolution says whether n is a float32 Conv2D that this package's
// own code computes because the program was built without oneDNN (without
// -tags dnnl), where oneDNN would compute it much faster: the Estimator
// logs a note once when it trains such a model.
func PureGoConvolution(n *G.Node) bool {
	if dnnl.Built {
		return false
	}
	_, conv := n.Op().(*convOp)
	return conv && n.Dtype() == tensor.Float32
}
