package replicate_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// classifierModel scores 3 classes with a fixed random linear layer and
// reports every kind of metric, weighted by a per-example weight feature.
func classifierModel(t *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
	w := t.MustVariable("w", tensor.Float64, tensor.Shape{4, 3}, towers.RandomNormal(0, 1))
	scores := G.Must(G.SoftMax(G.Must(G.Mul(f["x"], w))))
	v := t.MustVariable("v", tensor.Float64, tensor.Shape{4, 1}, towers.RandomNormal(0, 1))
	p1 := G.Must(G.Sigmoid(G.Must(G.Mul(f["x"], v)))) // a binary score
	spec := &model.Spec{Predictions: map[string]*G.Node{"scores": scores}}
	if mode == model.Predict {
		return spec, nil
	}
	class, bin, value := l["class"], l["binary"], l["value"]
	weights := metrics.Weights(f["weight"])
	binPred := G.Must(G.Gt(p1, G.NewConstant(0.3), true))
	classPred := f["class_guess"] // gorgonia v0.9.18 has no argmax op
	spec.Loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(p1, value))))))
	spec.EvalMetrics = map[string]metrics.Bound{
		"accuracy":        metrics.Accuracy(class, classPred, weights),
		"mean":            metrics.Mean(p1, weights),
		"auc":             metrics.AUC(bin, p1, weights),
		"auc_pr":          metrics.AUC(bin, p1, metrics.Curve(metrics.PR), metrics.NumThresholds(50)),
		"mse":             metrics.MeanSquaredError(value, p1, weights),
		"rmse":            metrics.RootMeanSquaredError(value, p1),
		"mae":             metrics.MeanAbsoluteError(value, p1, weights),
		"precision":       metrics.Precision(bin, binPred, weights),
		"recall":          metrics.Recall(bin, binPred),
		"tp":              metrics.TruePositives(bin, binPred),
		"fp":              metrics.FalsePositives(bin, binPred, weights),
		"tn":              metrics.TrueNegatives(bin, binPred),
		"fn":              metrics.FalseNegatives(bin, binPred),
		"precision_at":    metrics.PrecisionAtThresholds(bin, p1, []float64{0.2, 0.4}),
		"recall_at":       metrics.RecallAtThresholds(bin, p1, []float64{0.2, 0.4}, weights),
		"mean_iou":        metrics.MeanIoU(class, classPred, 3, weights),
		"recall_at_top_2": metrics.RecallAtK(class, scores, 2, weights),
	}
	return spec, nil
}

func classifierData(n int) (map[string]*tensor.Dense, map[string]*tensor.Dense) {
	r := rand.New(rand.NewPCG(11, 12))
	x, wt, guess := make([]float64, 4*n), make([]float64, n), make([]float64, n)
	class, bin, value := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		for j := range 4 {
			x[4*i+j] = r.NormFloat64()
		}
		wt[i] = 0.5 + r.Float64()
		class[i] = float64(r.IntN(3))
		guess[i] = class[i]
		if r.IntN(3) == 0 {
			guess[i] = float64(r.IntN(3))
		}
		if class[i] == 1 {
			bin[i] = 1
		}
		value[i] = r.Float64()
	}
	col := func(v []float64) *tensor.Dense { return tensor.New(tensor.WithShape(n, 1), tensor.WithBacking(v)) }
	return map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(n, 4), tensor.WithBacking(x)), "weight": col(wt), "class_guess": col(guess)},
		map[string]*tensor.Dense{"class": col(class), "binary": col(bin), "value": col(value)}
}

// TestEvalMetricsEqualOneDevice: every metric reports the same value on 1, 2
// and 3 towers with uneven batches as on one device.
func TestEvalMetricsEqualOneDevice(t *testing.T) {
	feats, labels := classifierData(53)
	evaluate := func(mdl *replicate.Model, batch int) map[string]float64 {
		est, err := estimator.New(mdl, estimator.RunConfig{Seed: 3, LogEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		in, err := estimator.FromTensors(feats, labels, estimator.TensorInput{BatchSize: batch})
		if err != nil {
			t.Fatal(err)
		}
		out, err := est.Evaluate(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, batch := range []int{53, 10, 7} {
		want := evaluate(replicate.ModelFn(classifierModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), batch)
		if len(want) < 20 {
			t.Fatalf("one device reported only %v", want)
		}
		for n := 1; n <= 3; n++ {
			t.Run(fmt.Sprintf("batch%d/towers%d", batch, n), func(t *testing.T) {
				got := evaluate(replicate.ModelFn(classifierModel, replicate.Config{Devices: towers.CPUs(n), Reduction: replicate.BatchMean}), batch)
				if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
					t.Errorf("(-one device +%d towers):\n%s", n, diff)
				}
			})
		}
	}
}

func TestInvalidMetricIsAnError(t *testing.T) {
	mdl := func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
		spec, err := constModel(tw, mode, f, l, p)
		spec.EvalMetrics = map[string]metrics.Bound{"iou": metrics.MeanIoU(l["y"], spec.Predictions["y"], 0)}
		return spec, err
	}
	est, err := estimator.New(replicate.ModelFn(mdl, replicate.Config{Devices: towers.CPUs(2)}), estimator.RunConfig{LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := estimator.FromTensors(map[string]*tensor.Dense{"x": column(1, 2)}, map[string]*tensor.Dense{"y": column(1, 2)}, estimator.TensorInput{BatchSize: 2})
	_, err = est.Evaluate(context.Background(), in)
	for _, want := range []string{"tower 0", "eval mode", `"iou"`, "numClasses"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
}
