package tabular

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/towerflow/towerflow/canned"
	"github.com/towerflow/towerflow/model"
)

// scaledRegression is a regression head whose logits are the label in
// units of its standard deviation from its mean: the prediction is Mean +
// Stddev·logit, so that a model whose logits start near 0 starts at the
// mean and every label's scale trains alike (a price in the thousands as
// a rate near 1). Predictions, loss, metrics and export outputs are the
// RegressionHead's of the prediction, in the label's units.
type scaledRegression struct {
	canned.RegressionHead
	Mean, Stddev float64
}

// Spec is the RegressionHead's Spec of Mean + Stddev·logits.
func (h scaledRegression) Spec(mode model.Mode, logits *G.Node, features model.Features, labels model.Labels) (*model.Spec, error) {
	scale, shift := G.NewConstant(float32(h.Stddev)), G.NewConstant(float32(h.Mean))
	if logits.Dtype() == G.Float64 {
		scale, shift = G.NewConstant(h.Stddev), G.NewConstant(h.Mean)
	}
	scaled, err := G.Mul(logits, scale)
	if err == nil {
		scaled, err = G.Add(scaled, shift)
	}
	if err != nil {
		return nil, fmt.Errorf("tabular: scaling the logits: %w", err)
	}
	return h.RegressionHead.Spec(mode, scaled, features, labels)
}
