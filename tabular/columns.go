package tabular

import (
	"fmt"

	"github.com/towerflow/towerflow/canned"
	"github.com/towerflow/towerflow/columns"
	"github.com/towerflow/towerflow/dataset"
)

// Model is a canned model's kind.
type Model string

const (
	Linear   Model = "linear"
	DNN      Model = "dnn"
	WideDeep Model = "wide_deep"
)

// ParseModel is the Model s names.
func ParseModel(s string) (Model, error) {
	switch m := Model(s); m {
	case Linear, DNN, WideDeep:
		return m, nil
	}
	return "", fmt.Errorf("model %q: want linear, dnn or wide_deep", s)
}

// Columns are a plan's feature columns for a model, not yet fitted: Fit
// (columns.Fit) the Config to the training data, then take the fitted
// columns of the Transformer by WideNames and DeepNames.
type Columns struct {
	// Config holds every column, the label and no example weight.
	Config columns.Config
	// WideNames are the columns of the linear part (linear, wide_deep),
	// DeepNames those of the DNN (dnn, wide_deep), by name.
	WideNames, DeepNames []string
}

// Columns makes the plan's feature columns for model m:
//
//   - a Number is one numeric column, standardized, a missing value
//     taking the sample mean: read as it is by the linear model and the
//     DNN, and also cut at its quantiles (BucketizedQuantiles) for the
//     linear model and the wide part, which can then fit a curve;
//   - a Vocabulary feature is a vocabulary from the training data with
//     one out-of-vocabulary bucket, a Hashed one a hash-bucket column: the
//     linear model and the wide part weigh their ids; the DNN reads them
//     one-hot (Indicator) or embedded (Embedding, EmbeddingDim wide).
//
// The label is parsed as the head needs it (canned.TransformerConfig):
// class ids through the classes' vocabulary for a classifier of string
// labels, numbers otherwise.
func (p *Plan) Columns(m Model) (Columns, error) {
	if _, err := ParseModel(string(m)); err != nil {
		return Columns{}, err
	}
	var cs Columns
	seen := map[string]bool{}
	add := func(c columns.Column, wide, deep bool) {
		name := c.Name()
		if !seen[name] {
			seen[name] = true
			cs.Config.Columns = append(cs.Config.Columns, c)
		}
		if wide {
			cs.WideNames = append(cs.WideNames, name)
		}
		if deep {
			cs.DeepNames = append(cs.DeepNames, name)
		}
	}
	wide, deep := m != DNN, m != Linear
	for _, f := range p.Features {
		switch f.Kind {
		case Number:
			num := columns.Numeric(f.Name, columns.Default(float32(f.Mean)), columns.Standardize())
			add(num, m == Linear, deep)
			if wide {
				add(columns.BucketizedQuantiles(num, f.QuantileBuckets), true, false)
			}
		case Vocabulary, Hashed:
			var cat columns.CategoricalColumn
			if f.Kind == Vocabulary {
				cat = columns.VocabularyFromData(f.Name, columns.OOVBuckets(1))
			} else {
				cat = columns.HashBucket(f.Name, f.HashBuckets)
			}
			if wide {
				add(cat, true, false)
			}
			if deep {
				if f.EmbeddingDim > 0 {
					add(columns.Embedding(cat, f.EmbeddingDim), false, true)
				} else {
					add(columns.Indicator(cat), false, true)
				}
			}
		default:
			return Columns{}, fmt.Errorf("tabular: feature %q: kind %v", f.Name, f.Kind)
		}
	}
	if p.Head.Kind != Regression && p.Head.Raw != dataset.KindBytes {
		if err := p.checkClassIDs(); err != nil {
			return Columns{}, err
		}
	}
	cs.Config.Label = canned.TransformerConfig(p.CannedHead()).Label
	return cs, nil
}

// checkClassIDs checks that a classifier's numeric labels are the class
// ids 0, 1, … that the head takes.
func (p *Plan) checkClassIDs() error {
	want := p.Head.Classes
	if p.Head.Kind == Binary {
		if want[1] != "1" || want[0] != "0" {
			return fmt.Errorf("tabular: label %q: numeric labels %s and %s of a binary head must be 0 and 1, 1 the positive class", p.Label, want[0], want[1])
		}
		return nil
	}
	for i, c := range want {
		if c != fmt.Sprint(i) {
			return fmt.Errorf("tabular: label %q: numeric labels of %d classes must be the class ids 0 to %d; the sample has %s", p.Label, len(want), len(want)-1, short(want))
		}
	}
	return nil
}

// CannedHead is the canned head of the plan, its label under the plan's
// Label. A regression head's prediction is the label's sample mean plus
// its standard deviation times the model's logit, so that labels of any
// scale train as fast.
func (p *Plan) CannedHead() canned.Head {
	switch p.Head.Kind {
	case Binary:
		h := canned.BinaryHead{LabelKey: p.Label}
		if p.Head.Raw == dataset.KindBytes {
			h.LabelVocabulary = p.Head.Classes
		}
		return h
	case MultiClass:
		h := canned.MultiClassHead{LabelKey: p.Label, NClasses: len(p.Head.Classes)}
		if p.Head.Raw == dataset.KindBytes {
			h.LabelVocabulary = p.Head.Classes
		}
		return h
	}
	h := canned.RegressionHead{LabelKey: p.Label}
	if p.Head.Stddev > 0 {
		return scaledRegression{RegressionHead: h, Mean: p.Head.Mean, Stddev: p.Head.Stddev}
	}
	return h
}
