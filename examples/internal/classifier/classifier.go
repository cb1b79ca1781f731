// Package classifier is the head the examples' classifiers share (the
// MNIST nets, the CIFAR-10 ResNet): from a model's logits, the loss, the
// accuracy, the predictions and the export signatures of a classifier.
package classifier

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
)

// PredictSignature is the key of the export signature that answers both
// predictions.
const PredictSignature = "predict"

// Head returns the spec of a classifier with logits (N, classes) and int64
// class ids under labelKey: the loss is the mean softmax cross-entropy of
// the logits, the eval metric "accuracy", the predictions "classes" (the
// most probable class, int64) and "probabilities" (the softmax of the
// logits); the default export signature classifies, answering each
// example's most probable class with its probability, and
// PredictSignature answers the classes and probabilities. In Train mode
// the spec has the loss alone.
func Head(mode model.Mode, logits *G.Node, labels model.Labels, labelKey string) (*model.Spec, error) {
	spec := &model.Spec{}
	var y *G.Node
	if mode != model.Predict {
		var err error
		if y, err = labels.Lookup(labelKey); err != nil {
			return nil, err
		}
		if spec.Loss, err = layers.SparseSoftmaxCrossEntropy(logits, y); err != nil {
			return nil, err
		}
		if mode == model.Train {
			// Only the loss: predictions would be computed, and thrown
			// away, every step.
			return spec, nil
		}
	}
	probs, err := layers.Softmax(logits)
	if err != nil {
		return nil, err
	}
	classes, err := layers.ArgMax(logits)
	if err != nil {
		return nil, err
	}
	// The probability of the most probable class, for classify's answers.
	top, err := G.Max(probs, 1)
	if err != nil {
		return nil, fmt.Errorf("top probability: %w", err)
	}
	spec.Predictions = map[string]*G.Node{"classes": classes, "probabilities": probs}
	spec.ExportOutputs = map[string]model.ExportOutput{
		model.DefaultServingSignature: model.ClassificationOutput{Scores: top, Classes: classes},
		PredictSignature:              model.PredictOutput{Outputs: spec.Predictions},
	}
	if mode == model.Eval {
		spec.EvalMetrics = map[string]metrics.Bound{"accuracy": metrics.Accuracy(y, classes)}
	}
	return spec, nil
}
