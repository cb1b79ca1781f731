package canned_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/canned"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

func dense(backing any, shape ...int) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing))
}

// headModel is a model whose logits are the feature "logits".
func headModel(h canned.Head) model.Fn {
	return func(_ *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
		logits, err := f.Lookup("logits")
		if err != nil {
			return nil, err
		}
		return h.Spec(mode, logits, f, l)
	}
}

func headEstimator(t *testing.T, h canned.Head, towerCount int) *estimator.Estimator {
	t.Helper()
	est, err := estimator.New(replicate.ModelFn(headModel(h), replicate.Config{Devices: towers.CPUs(towerCount)}), estimator.RunConfig{LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { est.Close() })
	return est
}

// The hand-computed examples. Binary: logits (2, −1, 0.5, −3), labels (1,
// 0, 0, 1): sigmoid cross-entropies 0.126928, 0.313262, 0.974077,
// 3.048587; logistic 0.880797, 0.268941, 0.622459, 0.047426; class ids
// (1, 0, 1, 0), of which the first two are right: one true positive, one
// false positive, one false negative. Weights (1, 2, 1, 0.5).
var (
	binLogits  = dense([]float32{2, -1, 0.5, -3}, 4, 1)
	binLabels  = dense([]int64{1, 0, 0, 1}, 4)
	binWeights = dense([]float32{1, 2, 1, 0.5}, 4, 1)
	binLosses  = []float64{0.1269280110429725, 0.31326168751822286, 0.9740769841801067, 3.048587351573742}
	binProbs   = []float64{0.8807970779778825, 0.2689414213699951, 0.6224593312018546, 0.04742587317756678}
)

// Multi-class: three classes; argmax (1, 2, 0, 1) against labels (1, 2,
// 1, 0): the first two right. Weights (1, 0.5, 2, 1).
var (
	mcLogits  = dense([]float64{1, 2, 0.5, 0, 0, 3, 2, 1, 1, -1, 0, -1}, 4, 3)
	mcLabels  = dense([]float64{1, 2, 1, 0}, 4, 1)
	mcWeights = dense([]float64{1, 0.5, 2, 1}, 4)
	mcLosses  = []float64{0.4643687841079447, 0.0949229564209606, 1.5514447139320509, 1.551444713932051}
)

// Regression: label dimension 2, squared errors (0.25, 0), (1, 0), (1, 1);
// weights (1, 2, 3).
var (
	regPred    = dense([]float32{1, 2, 0, 1, 3, -1}, 3, 2)
	regLabels  = dense([]int32{1, 2, 1, 1, 2, 0}, 3, 2) // overwritten below: 1.5 needs a float
	regLabelsF = dense([]float32{1.5, 2, 1, 1, 2, 0}, 3, 2)
	regWeights = dense([]float32{1, 2, 3}, 3)
)

func weighted(vs, ws []float64) float64 {
	var s float64
	for i, v := range vs {
		s += v * ws[i]
	}
	return s
}

func sum(vs []float64) float64 { return weighted(vs, []float64{1, 1, 1, 1, 1, 1, 1, 1}) }

func prAUC(t *testing.T, labels, probs, weights []float64) float64 {
	t.Helper()
	m, err := metrics.NewAUC(metrics.Curve(metrics.PR))
	if err != nil {
		t.Fatal(err)
	}
	in := []*tensor.Dense{dense(labels, len(labels)), dense(probs, len(probs))}
	if weights != nil {
		in = append(in, dense(weights, len(weights)))
	}
	if err := m.Update(in); err != nil {
		t.Fatal(err)
	}
	return m.Result()
}

func TestHeadEvalMetrics(t *testing.T) {
	bw := []float64{1, 2, 1, 0.5}
	mw := []float64{1, 0.5, 2, 1}
	tests := []struct {
		name     string
		head     canned.Head
		features map[string]*tensor.Dense
		labels   *tensor.Dense
		// weights, when set, are labels["w"], where a Transformer puts
		// them.
		weights *tensor.Dense
		want    map[string]float64
	}{
		{
			name: "binary", head: canned.BinaryHead{},
			features: map[string]*tensor.Dense{"logits": binLogits}, labels: binLabels,
			want: map[string]float64{
				"loss": sum(binLosses) / 4, "average_loss": sum(binLosses) / 4,
				"accuracy": 0.5, "precision": 0.5, "recall": 0.5,
				"label/mean": 0.5, "accuracy_baseline": 0.5,
				"prediction/mean": sum(binProbs) / 4,
				// Positive 0.88 is above both negatives, positive 0.047 below.
				"auc":                  0.5,
				"auc_precision_recall": prAUC(t, []float64{1, 0, 0, 1}, binProbs, nil),
				"global_step":          0,
			},
		},
		{
			name: "binary weighted", head: canned.BinaryHead{WeightColumn: "w", LabelKey: "y"},
			features: map[string]*tensor.Dense{"logits": binLogits, "w": binWeights}, labels: binLabels,
			want: map[string]float64{
				// SUM_OVER_BATCH_SIZE: the weighted sum over the 4 examples;
				// average_loss: over the sum of the weights, 4.5.
				"loss": weighted(binLosses, bw) / 4, "average_loss": weighted(binLosses, bw) / 4.5,
				// Right: examples 0 (weight 1) and 1 (weight 2) of 4.5.
				"accuracy": 3 / 4.5,
				// TP weight 1, FP weight 1, FN weight 0.5.
				"precision": 0.5, "recall": 1 / 1.5,
				"label/mean": 1.5 / 4.5, "accuracy_baseline": 3 / 4.5,
				"prediction/mean": weighted(binProbs, bw) / 4.5,
				// Pairs weigh 1.5 positive × 3 negative; the positive of
				// weight 1 is above both negatives: 3/4.5.
				"auc":                  3 / 4.5,
				"auc_precision_recall": prAUC(t, []float64{1, 0, 0, 1}, binProbs, bw),
				"global_step":          0,
			},
		},
		{
			name: "binary weighted, the weights among the labels", head: canned.BinaryHead{WeightColumn: "w"},
			features: map[string]*tensor.Dense{"logits": binLogits}, labels: binLabels, weights: binWeights,
			want: map[string]float64{
				"loss": weighted(binLosses, bw) / 4, "average_loss": weighted(binLosses, bw) / 4.5,
				"accuracy": 3 / 4.5, "precision": 0.5, "recall": 1 / 1.5,
				"label/mean": 1.5 / 4.5, "accuracy_baseline": 3 / 4.5,
				"prediction/mean": weighted(binProbs, bw) / 4.5,
				"auc":             3 / 4.5, "auc_precision_recall": prAUC(t, []float64{1, 0, 0, 1}, binProbs, bw),
				"global_step": 0,
			},
		},
		{
			name: "multi-class", head: canned.MultiClassHead{NClasses: 3},
			features: map[string]*tensor.Dense{"logits": mcLogits}, labels: mcLabels,
			want: map[string]float64{
				"loss": sum(mcLosses) / 4, "average_loss": sum(mcLosses) / 4,
				"accuracy": 0.5, "global_step": 0,
			},
		},
		{
			name: "multi-class weighted", head: canned.MultiClassHead{NClasses: 3, WeightColumn: "w"},
			features: map[string]*tensor.Dense{"logits": mcLogits, "w": mcWeights}, labels: mcLabels,
			want: map[string]float64{
				"loss": weighted(mcLosses, mw) / 4, "average_loss": weighted(mcLosses, mw) / 4.5,
				"accuracy": 1.5 / 4.5, "global_step": 0,
			},
		},
		{
			name: "regression", head: canned.RegressionHead{LabelDimension: 2},
			features: map[string]*tensor.Dense{"logits": regPred}, labels: regLabelsF,
			want: map[string]float64{
				// Squared errors sum to 3.25 over 6 elements.
				"loss": 3.25 / 6, "average_loss": 3.25 / 6,
				"label/mean": 7.5 / 6, "prediction/mean": 1, "global_step": 0,
				// Absolute errors 0.5, 0, 1, 0, 1, 1.
				"rmse": math.Sqrt(3.25 / 6), "mae": 3.5 / 6,
			},
		},
		{
			name: "regression weighted", head: canned.RegressionHead{LabelDimension: 2, WeightColumn: "w"},
			features: map[string]*tensor.Dense{"logits": regPred, "w": regWeights}, labels: regLabelsF,
			want: map[string]float64{
				// 1·0.25 + 2·1 + 3·2 = 8.25 over 6 elements; over the
				// weights, 2·(1+2+3) = 12.
				"loss": 8.25 / 6, "average_loss": 8.25 / 12,
				// 1·3.5 + 2·2 + 3·2 = 13.5; 1·3 + 2·1 + 3·2 = 11.
				"label/mean": 13.5 / 12, "prediction/mean": 11.0 / 12, "global_step": 0,
				// 1·0.5 + 2·1 + 3·2 = 8.5.
				"rmse": math.Sqrt(8.25 / 12), "mae": 8.5 / 12,
			},
		},
		{
			name: "regression, integer labels", head: canned.RegressionHead{LabelDimension: 2},
			features: map[string]*tensor.Dense{"logits": regPred}, labels: regLabels,
			want: map[string]float64{
				// Errors (0, 0), (1, 0), (1, 1).
				"loss": 3.0 / 6, "average_loss": 3.0 / 6,
				"label/mean": 7.0 / 6, "prediction/mean": 1, "global_step": 0,
				"rmse": math.Sqrt(3.0 / 6), "mae": 3.0 / 6,
			},
		},
	}
	for _, tc := range tests {
		for _, n := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/%d towers", tc.name, n), func(t *testing.T) {
				est := headEstimator(t, tc.head, n)
				labels := map[string]*tensor.Dense{tc.head.Label().Key: tc.labels}
				if tc.weights != nil {
					labels["w"] = tc.weights
				}
				in, err := estimator.FromTensors(tc.features, labels, estimator.TensorInput{BatchSize: 4})
				if err != nil {
					t.Fatal(err)
				}
				got, err := est.Evaluate(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				if n == 2 {
					// "loss" is the mean over towers' shards weighted by their
					// rows: the batch's loss, whatever the split.
					delete(got, "loss")
					delete(tc.want, "loss")
				}
				if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-5)); diff != "" {
					t.Errorf("metrics (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// predictions runs Predict over features (or in) and returns each prediction key's
// values over the batch, as float64, and its shape.
func predictions(t *testing.T, est *estimator.Estimator, features map[string]*tensor.Dense, in estimator.InputFn) (map[string][]float64, map[string]tensor.Shape, estimator.BatchOutput) {
	t.Helper()
	if in == nil {
		var err error
		if in, err = estimator.FromTensors(features, nil, estimator.TensorInput{BatchSize: 100}); err != nil {
			t.Fatal(err)
		}
	}
	vals, shapes := map[string][]float64{}, map[string]tensor.Shape{}
	var last estimator.BatchOutput
	for out, err := range est.PredictBatches(context.Background(), in) {
		if err != nil {
			t.Fatal(err)
		}
		last = out
		for k, v := range out.Predictions {
			vals[k] = append(vals[k], asFloats(t, v)...)
			shapes[k] = v.Shape()
		}
	}
	return vals, shapes, last
}

func asFloats(t *testing.T, d *tensor.Dense) []float64 {
	t.Helper()
	switch s := d.Data().(type) {
	case []float32:
		out := make([]float64, len(s))
		for i, v := range s {
			out[i] = float64(v)
		}
		return out
	case []float64:
		return s
	case []int64:
		out := make([]float64, len(s))
		for i, v := range s {
			out[i] = float64(v)
		}
		return out
	}
	t.Fatalf("dtype %v", d.Dtype())
	return nil
}

func TestHeadPredictions(t *testing.T) {
	p := binProbs
	tests := []struct {
		name       string
		head       canned.Head
		logits     *tensor.Dense
		want       map[string][]float64
		wantShapes map[string]tensor.Shape
		signatures map[string]string // key: method
		classNames []string
	}{
		{
			// Predict mode reads no weights: serving has none.
			name: "binary", head: canned.BinaryHead{LabelVocabulary: []string{"no", "yes"}, WeightColumn: "w"}, logits: binLogits,
			want: map[string][]float64{
				"logits":        {2, -1, 0.5, -3},
				"logistic":      p,
				"probabilities": {1 - p[0], p[0], 1 - p[1], p[1], 1 - p[2], p[2], 1 - p[3], p[3]},
				"class_ids":     {1, 0, 1, 0}, "classes": {1, 0, 1, 0},
				"all_class_ids": {0, 1, 0, 1, 0, 1, 0, 1}, "all_classes": {0, 1, 0, 1, 0, 1, 0, 1},
			},
			wantShapes: map[string]tensor.Shape{"logits": {4, 1}, "logistic": {4, 1}, "probabilities": {4, 2},
				"class_ids": {4, 1}, "classes": {4, 1}, "all_class_ids": {4, 2}, "all_classes": {4, 2}},
			signatures: map[string]string{"serving_default": "classify", "classification": "classify", "regression": "regress", "predict": "predict"},
			classNames: []string{"no", "yes"},
		},
		{
			name: "multi-class", head: canned.MultiClassHead{NClasses: 3}, logits: mcLogits,
			want: map[string][]float64{
				"logits": {1, 2, 0.5, 0, 0, 3, 2, 1, 1, -1, 0, -1},
				"probabilities": {0.23122389762214907, 0.6285317192117625, 0.1402443831660885, 0.04527850074362907, 0.04527850074362907, 0.9094429985127419,
					0.5761168847658291, 0.21194155761708544, 0.21194155761708544, 0.21194155761708547, 0.5761168847658291, 0.21194155761708547},
				"class_ids": {1, 2, 0, 1}, "classes": {1, 2, 0, 1},
				"all_class_ids": {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}, "all_classes": {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2},
			},
			wantShapes: map[string]tensor.Shape{"logits": {4, 3}, "probabilities": {4, 3},
				"class_ids": {4, 1}, "classes": {4, 1}, "all_class_ids": {4, 3}, "all_classes": {4, 3}},
			signatures: map[string]string{"serving_default": "classify", "classification": "classify", "predict": "predict"},
			classNames: []string{"0", "1", "2"},
		},
		{
			name: "regression", head: canned.RegressionHead{}, logits: dense([]float32{1.5, -2}, 2, 1),
			want:       map[string][]float64{"predictions": {1.5, -2}},
			wantShapes: map[string]tensor.Shape{"predictions": {2, 1}},
			signatures: map[string]string{"serving_default": "regress", "regression": "regress", "predict": "predict"},
		},
		{
			name: "regression of two values", head: canned.RegressionHead{LabelDimension: 2}, logits: regPred,
			want:       map[string][]float64{"predictions": {1, 2, 0, 1, 3, -1}},
			wantShapes: map[string]tensor.Shape{"predictions": {3, 2}},
			signatures: map[string]string{"serving_default": "predict", "predict": "predict"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est := headEstimator(t, tc.head, 2)
			got, shapes, out := predictions(t, est, map[string]*tensor.Dense{"logits": tc.logits}, nil)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
				t.Errorf("predictions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantShapes, shapes); diff != "" {
				t.Errorf("prediction shapes (-want +got):\n%s", diff)
			}
			sigs := map[string]string{}
			for k := range out.ExportOutputs {
				sigs[k] = ""
			}
			spec, err := tc.head.Spec(model.Predict, G.NewMatrix(G.NewGraph(), tc.logits.Dtype(), G.WithShape(tc.logits.Shape()...)), model.Features{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, o := range spec.ExportOutputs {
				sigs[k] = o.Method()
				if c, ok := o.(model.ClassificationOutput); ok {
					if diff := cmp.Diff(tc.classNames, c.ClassNames); diff != "" {
						t.Errorf("signature %q class names (-want +got):\n%s", k, diff)
					}
					if c.Scores != spec.Predictions["probabilities"] {
						t.Errorf("signature %q scores are not the probabilities", k)
					}
				}
			}
			if diff := cmp.Diff(tc.signatures, sigs); diff != "" {
				t.Errorf("signatures (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHeadTrainLoss(t *testing.T) {
	// In Train mode the spec is the loss alone, SUM_OVER_BATCH_SIZE.
	tests := []struct {
		name     string
		head     canned.Head
		features map[string]*tensor.Dense
		labels   *tensor.Dense
		want     float64
	}{
		{"binary", canned.BinaryHead{WeightColumn: "w"}, map[string]*tensor.Dense{"logits": binLogits, "w": binWeights}, binLabels, weighted(binLosses, []float64{1, 2, 1, 0.5}) / 4},
		{"multi-class", canned.MultiClassHead{NClasses: 3}, map[string]*tensor.Dense{"logits": mcLogits}, mcLabels, sum(mcLosses) / 4},
		{"regression", canned.RegressionHead{LabelDimension: 2, WeightColumn: "w"}, map[string]*tensor.Dense{"logits": regPred, "w": regWeights}, regLabelsF, 8.25 / 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := G.NewGraph()
			f := model.Features{}
			for k, v := range tc.features {
				f[k] = G.NodeFromAny(g, v, G.WithName(k))
			}
			l := model.Labels{"label": G.NodeFromAny(g, tc.labels, G.WithName("label"))}
			spec, err := tc.head.Spec(model.Train, f["logits"], f, l)
			if err != nil {
				t.Fatal(err)
			}
			if spec.Predictions != nil || spec.EvalMetrics != nil || spec.ExportOutputs != nil {
				t.Errorf("train spec has more than the loss: %+v", spec)
			}
			m := G.NewTapeMachine(g)
			defer m.Close()
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			got, err := numeric.Float64s(spec.Loss.Value())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]float64{tc.want}, got, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
				t.Errorf("loss (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHeadErrors(t *testing.T) {
	tests := []struct {
		name     string
		head     canned.Head
		features map[string]*tensor.Dense
		labels   map[string]*tensor.Dense
		want     []string
	}{
		{"binary label out of range", canned.BinaryHead{}, map[string]*tensor.Dense{"logits": binLogits}, map[string]*tensor.Dense{"label": dense([]int64{1, 0, 2, 1}, 4)},
			[]string{"BinaryHead", "labels", "example 2", "2 is not in [0, 1]"}},
		{"class id out of range", canned.MultiClassHead{NClasses: 3}, map[string]*tensor.Dense{"logits": mcLogits}, map[string]*tensor.Dense{"label": dense([]int64{1, 3, 0, 0}, 4)},
			[]string{"MultiClassHead", "example 1", "3 is not a class id in [0, 3)"}},
		{"class id not integral", canned.MultiClassHead{NClasses: 3}, map[string]*tensor.Dense{"logits": mcLogits}, map[string]*tensor.Dense{"label": dense([]float64{1, 0.5, 0, 0}, 4)},
			[]string{"example 1", "0.5 is not a class id"}},
		{"negative weight", canned.BinaryHead{WeightColumn: "w"}, map[string]*tensor.Dense{"logits": binLogits, "w": dense([]float32{1, 1, 1, -1}, 4)}, map[string]*tensor.Dense{"label": binLabels},
			[]string{`weight column "w"`, "example 3", "-1 is not a finite non-negative weight"}},
		{"missing weight column", canned.BinaryHead{WeightColumn: "w"}, map[string]*tensor.Dense{"logits": binLogits}, map[string]*tensor.Dense{"label": binLabels},
			[]string{"weight column", `feature "w" is not in the batch`}},
		{"missing label", canned.BinaryHead{LabelKey: "y"}, map[string]*tensor.Dense{"logits": binLogits}, map[string]*tensor.Dense{"label": binLabels},
			[]string{`label "y" is not in the batch`, `the head's LabelKey names the label: "" is "label"`, "made from TransformerConfig"}},
		{"logits of the wrong width", canned.MultiClassHead{NClasses: 4}, map[string]*tensor.Dense{"logits": mcLogits}, map[string]*tensor.Dense{"label": mcLabels},
			[]string{"MultiClassHead", "shape (4, 3)", "want (batch, 4)"}},
		{"labels of the wrong width", canned.RegressionHead{LabelDimension: 2}, map[string]*tensor.Dense{"logits": regPred}, map[string]*tensor.Dense{"label": dense([]float32{1, 2, 3}, 3)},
			[]string{"RegressionHead", "labels", "want (batch, 2)"}},
		{"two classes in a multi-class head", canned.MultiClassHead{NClasses: 2}, map[string]*tensor.Dense{"logits": dense([]float32{1, 2}, 1, 2)}, map[string]*tensor.Dense{"label": dense([]int64{1}, 1)},
			[]string{"NClasses 2", "BinaryHead"}},
		{"vocabulary of three", canned.BinaryHead{LabelVocabulary: []string{"a", "b", "c"}}, map[string]*tensor.Dense{"logits": binLogits}, map[string]*tensor.Dense{"label": binLabels},
			[]string{"label vocabulary", "3 entries, want 2"}},
		{"vocabulary with a duplicate", canned.MultiClassHead{NClasses: 3, LabelVocabulary: []string{"a", "b", "a"}}, map[string]*tensor.Dense{"logits": mcLogits}, map[string]*tensor.Dense{"label": mcLabels},
			[]string{"label vocabulary", `lists "a" twice`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est := headEstimator(t, tc.head, 1)
			in, err := estimator.FromTensors(tc.features, tc.labels, estimator.TensorInput{BatchSize: 4})
			if err != nil {
				t.Fatal(err)
			}
			_, err = est.Evaluate(context.Background(), in)
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}

func TestLabelSpecClassID(t *testing.T) {
	vocab := canned.BinaryHead{LabelVocabulary: []string{"<=50K", ">50K"}}.Label()
	ids := canned.MultiClassHead{NClasses: 3}.Label()
	tests := []struct {
		spec    canned.LabelSpec
		in      string
		want    int64
		wantErr []string
	}{
		{vocab, ">50K", 1, nil},
		{vocab, "<=50K", 0, nil},
		{vocab, "50K", 0, []string{`"50K" is not in the label vocabulary`}},
		{ids, "2", 2, nil},
		{ids, "3", 0, []string{`"3" is not a class id in [0, 3)`}},
		{ids, "x", 0, []string{`"x" is not a class id`}},
		{canned.RegressionHead{}.Label(), "1", 0, []string{"regressor"}},
	}
	for _, tc := range tests {
		got, err := tc.spec.ClassID(tc.in)
		if tc.wantErr != nil {
			wanterr.Mentions(t, err, tc.wantErr...)
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ClassID(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}
