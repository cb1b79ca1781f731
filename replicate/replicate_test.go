package replicate_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// constModel is the seeds' model: c (initially 10) times the features, with
// the absolute difference to the labels summed as the loss.
func constModel(t *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, _ model.Params) (*model.Spec, error) {
	c, err := t.Variable("c", tensor.Float64, tensor.Shape{1, 1}, towers.Constant(10))
	if err != nil {
		return nil, err
	}
	pred := G.Must(G.Mul(features["x"], c))
	spec := &model.Spec{Predictions: map[string]*G.Node{"y": pred}}
	if mode != model.Predict {
		spec.Loss = G.Must(G.Sum(G.Must(G.Abs(G.Must(G.Sub(pred, labels["y"]))))))
	}
	return spec, nil
}

// getModel is constModel reading its feature and label with Get, by the
// names given.
func getModel(feature, label string) model.Fn {
	return func(t *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
		in := model.Features{"x": f.Get(feature)}
		var labels model.Labels
		if mode != model.Predict {
			labels = model.Labels{"y": l.Get(label)}
		}
		return constModel(t, mode, in, labels, p)
	}
}

func column(vals ...float64) *tensor.Dense {
	return tensor.New(tensor.WithShape(len(vals), 1), tensor.WithBacking(vals))
}

func TestSeedNumbers(t *testing.T) {
	tests := []struct {
		name      string
		model     *replicate.Model
		wantLoss  float64
		wantAfter float64
	}{
		{"SUM two towers", replicate.ModelFn(constModel, replicate.Config{Devices: towers.CPUs(2), Reduction: replicate.Sum, Optimizer: optimizers.SGD(1)}), 27, 7},
		{"MEAN two towers", replicate.ModelFn(constModel, replicate.Config{Devices: towers.CPUs(2), Reduction: replicate.Mean, Optimizer: optimizers.SGD(1)}), 13.5, 8.5},
		{"one tower", replicate.ModelFn(constModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}, Optimizer: optimizers.SGD(1)}), 27, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est, err := estimator.New(tc.model, estimator.RunConfig{LogEvery: -1})
			if err != nil {
				t.Fatal(err)
			}
			input, err := estimator.FromTensors(map[string]*tensor.Dense{"x": column(1, 2)}, map[string]*tensor.Dense{"y": column(1, 2)}, estimator.TensorInput{BatchSize: 2})
			if err != nil {
				t.Fatal(err)
			}
			var losses []float64
			if err := est.Train(context.Background(), input, estimator.Steps(1), estimator.OnStep(func(_ int64, l float64) { losses = append(losses, l) })); err != nil {
				t.Fatal(err)
			}
			c, err := est.VariableValue("c")
			if err != nil {
				t.Fatal(err)
			}
			got := struct {
				Losses []float64
				C      []float64
				Step   int64
			}{losses, c.Data().([]float64), est.GlobalStep()}
			want := struct {
				Losses []float64
				C      []float64
				Step   int64
			}{[]float64{tc.wantLoss}, []float64{tc.wantAfter}, 1}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("after one step (-want +got):\n%s", diff)
			}
		})
	}
}

// mlpModel is a small two-layer network whose loss is the mean squared
// error over the shard, with metrics of three kinds and an export output.
// params["opt"] chooses the optimizer; params["dtype"] the float type;
// params["layers"], when true, writes the hidden layer (with a rectifier
// instead of tanh) and the loss with package layers.
func mlpModel(t *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, p model.Params) (*model.Spec, error) {
	dt := p["dtype"].(tensor.Dtype)
	withLayers, _ := p["layers"].(bool)
	w1 := t.MustVariable("dense/kernel", dt, tensor.Shape{3, 4}, towers.GlorotUniform())
	b1 := t.MustVariable("dense/bias", dt, tensor.Shape{4}, towers.RandomUniform(-0.1, 0.1))
	w2 := t.MustVariable("out/kernel", dt, tensor.Shape{4, 1}, towers.GlorotUniform())
	var h *G.Node
	if withLayers {
		h = G.Must(layers.Dense(features["x"], w1, b1, layers.ReLU))
	} else {
		h = G.Must(G.Tanh(G.Must(G.BroadcastAdd(G.Must(G.Mul(features["x"], w1)), b1, nil, []byte{0}))))
	}
	logit := G.Must(G.Mul(h, w2))
	prob := G.Must(G.Sigmoid(logit))
	spec := &model.Spec{
		Predictions:   map[string]*G.Node{"prob": prob, "hidden": h},
		ExportOutputs: map[string]model.ExportOutput{model.DefaultServingSignature: model.ClassificationOutput{Scores: prob}},
	}
	if mode == model.Predict {
		return spec, nil
	}
	y := labels["y"]
	diff := G.Must(G.Sub(prob, y))
	spec.Loss = G.Must(G.Mean(G.Must(G.Square(diff))))
	if withLayers {
		spec.Loss = G.Must(layers.MeanSquaredError(prob, y))
	}
	half := G.NewConstant(0.5)
	if dt == tensor.Float32 {
		half = G.NewConstant(float32(0.5))
	}
	class := G.Must(G.Gt(prob, half, true))
	spec.EvalMetrics = map[string]metrics.Bound{
		"accuracy": metrics.Accuracy(y, class),
		"auc":      metrics.AUC(y, prob),
		"mse":      metrics.Mean(G.Must(G.Square(diff))),
	}
	spec.TrainOps = []model.TrainOp{{Optimizer: p["opt"].(func() optimizers.Optimizer)()}}
	return spec, nil
}

func mlpData(n int, dt tensor.Dtype, seed uint64) (map[string]*tensor.Dense, map[string]*tensor.Dense) {
	r := rand.New(rand.NewPCG(seed, 2))
	xs, ys := make([]float64, 3*n), make([]float64, n)
	for i := range n {
		s := 0.0
		for j := range 3 {
			xs[3*i+j] = r.Float64()*2 - 1
			s += xs[3*i+j] * float64(j+1)
		}
		if s > 0 {
			ys[i] = 1
		}
	}
	x, y := numeric.NewSlice(dt, 3*n), numeric.NewSlice(dt, n)
	_ = numeric.SetFloat64s(x, xs)
	_ = numeric.SetFloat64s(y, ys)
	return map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{n, 3}, x)}, map[string]*tensor.Dense{"y": numeric.Over(tensor.Shape{n, 1}, y)}
}

type runResult struct {
	Vars    map[string][]float64
	Scores  map[string]float64
	Preds   [][]float64
	Exports []float64
}

func trainEvalPredict(t *testing.T, mdl *replicate.Model, dt tensor.Dtype, opt func() optimizers.Optimizer, batch, steps int, withLayers bool) runResult {
	t.Helper()
	ctx := context.Background()
	est, err := estimator.New(mdl, estimator.RunConfig{Seed: 7, LogEvery: -1, Params: model.Params{"dtype": dt, "opt": opt, "layers": withLayers}})
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	feats, labels := mlpData(40, dt, 3)
	train, err := estimator.FromTensors(feats, labels, estimator.TensorInput{BatchSize: batch, Epochs: estimator.Forever, Shuffle: true, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := est.Train(ctx, train, estimator.Steps(int64(steps))); err != nil {
		t.Fatal(err)
	}
	eval, _ := estimator.FromTensors(feats, labels, estimator.TensorInput{BatchSize: batch})
	scores, err := est.Evaluate(ctx, eval)
	if err != nil {
		t.Fatal(err)
	}
	res := runResult{Vars: map[string][]float64{}, Scores: scores}
	for _, name := range est.VariableNames() {
		v, _ := est.VariableValue(name)
		res.Vars[name], _ = numeric.Float64s(v)
	}
	pred, _ := estimator.FromTensors(feats, nil, estimator.TensorInput{BatchSize: batch})
	for p, err := range est.Predict(ctx, pred) {
		if err != nil {
			t.Fatal(err)
		}
		prob, _ := numeric.Float64s(p["prob"])
		hidden, _ := numeric.Float64s(p["hidden"])
		res.Preds = append(res.Preds, append(prob, hidden...))
	}
	for out, err := range est.PredictBatches(ctx, pred) {
		if err != nil {
			t.Fatal(err)
		}
		s, _ := numeric.Float64s(out.ExportOutputs[model.DefaultServingSignature]["scores"])
		res.Exports = append(res.Exports, s...)
	}
	return res
}

// TestTowersEqualOneDevice is the property that matters most: N towers and
// one device give the same variables, metrics and predictions, with
// gorgonia's ops and with package layers (whose ops keep their outputs from
// run to run, in every tower). Batches of 13 of the 40 rows end each epoch
// with a batch of 1 row, which trains on one tower.
func TestTowersEqualOneDevice(t *testing.T) {
	opts := map[string]func() optimizers.Optimizer{
		"SGD":  func() optimizers.Optimizer { return optimizers.SGD(0.3) },
		"Adam": func() optimizers.Optimizer { return optimizers.Adam(0.01) },
	}
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		tol := 1e-12
		if dt == tensor.Float32 {
			tol = 2e-5
		}
		for optName, opt := range opts {
			for _, withLayers := range []bool{false, true} {
				for _, batch := range []int{12, 10, 7, 13} {
					want := trainEvalPredict(t, replicate.ModelFn(mlpModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), dt, opt, batch, 6, withLayers)
					if len(want.Preds) != 40 || len(want.Exports) != 40 {
						t.Fatalf("one device: %d predictions, %d export rows, want 40", len(want.Preds), len(want.Exports))
					}
					for n := 1; n <= 4; n++ {
						t.Run(fmt.Sprintf("%v/%s/layers=%t/batch%d/towers%d", dt, optName, withLayers, batch, n), func(t *testing.T) {
							mdl := replicate.ModelFn(mlpModel, replicate.Config{Devices: towers.CPUs(n), Reduction: replicate.BatchMean})
							got := trainEvalPredict(t, mdl, dt, opt, batch, 6, withLayers)
							if diff := cmp.Diff(want, got, cmpopts.EquateApprox(tol, tol)); diff != "" {
								t.Errorf("%d towers differ from one device (-one +towers):\n%s", n, diff)
							}
						})
					}
				}
			}
		}
	}
}

func TestSpecFieldsAndNames(t *testing.T) {
	var names [][]string
	mdl := func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
		spec, err := constModel(tw, mode, f, l, p)
		n, _ := tw.VariableNode("c")
		names = append(names, []string{tw.Device().String(), n.Name(), f["x"].Name()})
		return spec, err
	}
	est, err := estimator.New(replicate.ModelFn(mdl, replicate.Config{Devices: mustParseDevices(t, "/cpu:0", "/device:CPU:1", "/CPU:2"), Optimizer: optimizers.SGD(1)}), estimator.RunConfig{LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := estimator.FromTensors(map[string]*tensor.Dense{"x": column(1, 2, 3)}, map[string]*tensor.Dense{"y": column(1, 2, 3)}, estimator.TensorInput{BatchSize: 3})
	if err := est.Train(context.Background(), in, estimator.Steps(1)); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"/device:CPU:0", "c", "features/x"},
		{"/device:CPU:1", "tower_1/c", "tower_1/features/x"},
		{"/device:CPU:2", "tower_2/c", "tower_2/features/x"},
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("tower names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"global_step", "c"}, est.VariableNames()); diff != "" {
		t.Errorf("variables (-want +got):\n%s", diff)
	}
}

// TestTwoTrainOps: two losses each minimising its own variables, and two
// optimizers on one loss.
func TestTwoTrainOps(t *testing.T) {
	mdl := func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
		a := tw.MustVariable("a", tensor.Float64, nil, towers.Constant(1))
		b := tw.MustVariable("b", tensor.Float64, nil, towers.Constant(1))
		x := f["x"]
		la := G.Must(G.Sum(G.Must(G.Mul(x, a))))
		lb := G.Must(G.Sum(G.Must(G.Mul(x, G.Must(G.Mul(b, b))))))
		total := G.Must(G.Add(la, lb))
		return &model.Spec{Loss: total, TrainOps: []model.TrainOp{
			{Loss: la, Optimizer: optimizers.SGD(0.1), Vars: []string{"a", "b"}}, // b has no gradient: skipped
			{Loss: lb, Optimizer: optimizers.SGD(0.01), Vars: []string{"b"}},
			{Optimizer: optimizers.Momentum(0.5, 0.9)},
		}}, nil
	}
	run := func(devs int) map[string]float64 {
		// The losses sum over examples: SUM, TensorFlow's reduction.
		est, err := estimator.New(replicate.ModelFn(mdl, replicate.Config{Devices: towers.CPUs(devs), Reduction: replicate.Sum}), estimator.RunConfig{LogEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		in, _ := estimator.FromTensors(map[string]*tensor.Dense{"x": column(1, 2, 3, 4)}, nil, estimator.TensorInput{BatchSize: 4})
		if err := est.Train(context.Background(), in, estimator.Steps(1)); err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, n := range []string{"a", "b"} {
			v, _ := est.VariableValue(n)
			out[n] = v.Data().(float64)
		}
		return out
	}
	// sum x = 10. a: SGD 0.1 on dla/da = 10 -> 0, then Momentum 0.5 on
	// d(total)/da = 10 -> -5. b: SGD 0.01 on dlb/db = 2*b*10 = 20 -> 0.8,
	// then Momentum on 20 (gradients are read before any update) -> -9.2.
	want := map[string]float64{"a": -5, "b": -9.2}
	for _, n := range []int{1, 2, 3} {
		if diff := cmp.Diff(want, run(n), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
			t.Errorf("%d towers (-want +got):\n%s", n, diff)
		}
	}
}

func TestErrors(t *testing.T) {
	twoRows := map[string]*tensor.Dense{"x": column(1, 2)}
	threeRows := map[string]*tensor.Dense{"x": column(1, 2, 3)}
	labels2 := map[string]*tensor.Dense{"y": column(1, 2)}
	variant := func(change func(tw *towers.Scope) (*model.Spec, error)) model.Fn {
		return func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
			if tw.Index() == 1 {
				return change(tw)
			}
			return constModel(tw, mode, f, l, p)
		}
	}
	sgd := optimizers.SGD(1)
	tests := []struct {
		name     string
		model    *replicate.Model
		features map[string]*tensor.Dense
		labels   map[string]*tensor.Dense
		want     []string // substrings of the error
	}{
		{"reduction NONE", replicate.ModelFn(constModel, replicate.Config{Reduction: replicate.None}), twoRows, labels2, []string{"NONE"}},
		{"device twice", replicate.ModelFn(constModel, replicate.Config{Devices: []towers.Device{towers.CPU(0), towers.CPU(0)}}), twoRows, labels2, []string{"/device:CPU:0", "twice"}},
		{"labels disagree with features", replicate.ModelFn(constModel, replicate.Config{Devices: towers.CPUs(2), Optimizer: sgd}), threeRows, labels2, []string{`"y"`, "2 rows", `"x"`, "3"}},
		{"panic in tower 1", replicate.ModelFn(variant(func(*towers.Scope) (*model.Spec, error) { panic("boom") }), replicate.Config{Devices: towers.CPUs(2), Optimizer: sgd}), twoRows, labels2, []string{"tower 1 (/device:CPU:1)", "train", "boom"}},
		{"error in tower 1", replicate.ModelFn(variant(func(*towers.Scope) (*model.Spec, error) { return nil, errors.New("no can do") }), replicate.Config{Devices: towers.CPUs(2), Optimizer: sgd}), twoRows, labels2, []string{"tower 1", "train", "no can do"}},
		{"variable tower 0 did not create", replicate.ModelFn(variant(func(tw *towers.Scope) (*model.Spec, error) {
			_, err := tw.Variable("extra", tensor.Float64, nil, nil)
			return nil, err
		}), replicate.Config{Devices: towers.CPUs(2), Optimizer: sgd}), twoRows, labels2, []string{"tower 1", `"extra"`, "not created by tower 0"}},
		{"variable shape differs", replicate.ModelFn(variant(func(tw *towers.Scope) (*model.Spec, error) {
			_, err := tw.Variable("c", tensor.Float64, tensor.Shape{2, 2}, nil)
			return nil, err
		}), replicate.Config{Devices: towers.CPUs(2), Optimizer: sgd}), twoRows, labels2, []string{"tower 1", `"c"`, "(2, 2)", "(1, 1)"}},
		{"fewer variables", replicate.ModelFn(variant(func(tw *towers.Scope) (*model.Spec, error) {
			return &model.Spec{Loss: G.NewConstant(1.0)}, nil
		}), replicate.Config{Devices: towers.CPUs(2), Optimizer: sgd}), twoRows, labels2, []string{"tower 1", "different variables"}},
		{"different train ops", replicate.ModelFn(func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
			spec, err := constModel(tw, mode, f, l, p)
			lr := 1.0
			if tw.Index() == 1 {
				lr = 2
			}
			spec.TrainOps = []model.TrainOp{{Optimizer: optimizers.SGD(lr)}}
			return spec, err
		}, replicate.Config{Devices: towers.CPUs(2)}), twoRows, labels2, []string{"tower 1", "different train ops"}},
		{"no loss", replicate.ModelFn(func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
			spec, err := constModel(tw, mode, f, l, p)
			spec.Loss = nil
			return spec, err
		}, replicate.Config{Devices: towers.CPUs(2), Optimizer: sgd}), twoRows, labels2, []string{"tower 0", "no loss"}},
		{"no optimizer", replicate.ModelFn(constModel, replicate.Config{Devices: towers.CPUs(2)}), twoRows, labels2, []string{"no train ops", "optimizer"}},
		{"optimizer and train ops", replicate.ModelFn(func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
			spec, err := constModel(tw, mode, f, l, p)
			spec.TrainOps = []model.TrainOp{{Optimizer: optimizers.SGD(1)}}
			return spec, err
		}, replicate.Config{Devices: towers.CPUs(2), Optimizer: sgd}), twoRows, labels2, []string{"tower 0", "train ops", "optimizer", "would not be used"}},
		{"missing feature read from the map", replicate.ModelFn(constModel, replicate.Config{Devices: towers.CPUs(2), Optimizer: sgd}), map[string]*tensor.Dense{"z": column(1, 2)}, labels2,
			[]string{"tower 0", "panic", `the batch has features ["z"] and labels ["y"]`}},
		{"missing feature read with Get", replicate.ModelFn(getModel("x", "y"), replicate.Config{Devices: towers.CPUs(2), Optimizer: sgd}), map[string]*tensor.Dense{"z": column(1, 2)}, labels2,
			[]string{"tower 0 (/device:CPU:0), train mode: model function: feature \"x\" is not in the batch, which has features [\"z\"]"}},
		{"missing label read with Get", replicate.ModelFn(getModel("x", "w"), replicate.Config{Devices: towers.CPUs(2), Optimizer: sgd}), twoRows, labels2,
			[]string{"tower 0 (/device:CPU:0), train mode: model function: label \"w\" is not in the batch, which has labels [\"y\"]"}},
		{"a zero-sized dimension", replicate.ModelFn(constModel, replicate.Config{Devices: towers.CPUs(2), Optimizer: sgd}), map[string]*tensor.Dense{"x": tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(2, 0))}, labels2,
			[]string{`feature "x"`, "shape (2, 0)", "zero-sized"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est, err := estimator.New(tc.model, estimator.RunConfig{LogEvery: -1})
			if err == nil {
				in, ierr := estimator.FromTensors(tc.features, tc.labels, estimator.TensorInput{BatchSize: 3})
				if ierr != nil {
					err = ierr
				} else {
					err = est.Train(context.Background(), in, estimator.Steps(1))
				}
			}
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}

func TestCancelledContextStopsTraining(t *testing.T) {
	est, err := estimator.New(replicate.ModelFn(constModel, replicate.Config{Devices: towers.CPUs(2), Optimizer: optimizers.SGD(0.001)}), estimator.RunConfig{LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := estimator.FromTensors(map[string]*tensor.Dense{"x": column(1, 2)}, map[string]*tensor.Dense{"y": column(1, 2)}, estimator.TensorInput{BatchSize: 2, Epochs: estimator.Forever})
	ctx, cancel := context.WithCancel(context.Background())
	err = est.Train(ctx, in, estimator.OnStep(func(step int64, _ float64) {
		if step == 5 {
			cancel()
		}
	}))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if got := est.GlobalStep(); got != 5 {
		t.Errorf("global step %d after cancelling at 5", got)
	}
}

// TestReduceGradientsHook: the hook sees the tower-summed gradients once per
// train op and step, before the optimizer; doubling them doubles the step.
func TestReduceGradientsHook(t *testing.T) {
	var seen [][]float64
	hook := func(_ context.Context, gs []replicate.Gradient) error {
		for _, g := range gs {
			v := g.Value.([]float64)
			seen = append(seen, append([]float64{}, v...))
			for i := range v {
				v[i] *= 2
			}
		}
		return nil
	}
	est, err := estimator.New(replicate.ModelFn(constModel, replicate.Config{Devices: towers.CPUs(2), Reduction: replicate.Sum, Optimizer: optimizers.SGD(1), ReduceGradients: hook}), estimator.RunConfig{LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := estimator.FromTensors(map[string]*tensor.Dense{"x": column(1, 2)}, map[string]*tensor.Dense{"y": column(1, 2)}, estimator.TensorInput{BatchSize: 2})
	if err := est.Train(context.Background(), in, estimator.Steps(1)); err != nil {
		t.Fatal(err)
	}
	c, _ := est.VariableValue("c")
	// Summed gradient 1+2 = 3, doubled to 6: c = 10 - 6 = 4.
	if diff := cmp.Diff([][]float64{{3}}, seen); diff != "" {
		t.Errorf("hook saw (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]float64{4}, c.Data()); diff != "" {
		t.Errorf("c (-want +got):\n%s", diff)
	}

	failing := func(context.Context, []replicate.Gradient) error { return errors.New("peer gone") }
	est, _ = estimator.New(replicate.ModelFn(constModel, replicate.Config{Devices: towers.CPUs(2), Reduction: replicate.Sum, Optimizer: optimizers.SGD(1), ReduceGradients: failing}), estimator.RunConfig{LogEvery: -1})
	err = est.Train(context.Background(), in, estimator.Steps(1))
	if err == nil || !strings.Contains(err.Error(), "peer gone") {
		t.Fatalf("failing hook: got %v", err)
	}
	if c, _ := est.VariableValue("c"); !cmp.Equal(c.Data(), []float64{10}) || est.GlobalStep() != 0 {
		t.Errorf("a failed reduce changed c to %v, step %d", c.Data(), est.GlobalStep())
	}
}

func TestPlacementOptions(t *testing.T) {
	tests := []struct {
		name  string
		model *replicate.Model
		want  map[string]string
	}{
		{"default on CPU:0", replicate.ModelFn(mlpModel, replicate.Config{Devices: towers.CPUs(3)}),
			map[string]string{"dense/kernel": "/device:CPU:0", "dense/bias": "/device:CPU:0", "out/kernel": "/device:CPU:0"}},
		{"round robin", replicate.ModelFn(mlpModel, replicate.Config{Devices: towers.CPUs(3), Placement: towers.RoundRobin(towers.CPU(1), towers.CPU(2))}),
			// The model's variables in creation order; global_step stays on CPU:0.
			map[string]string{"dense/kernel": "/device:CPU:1", "dense/bias": "/device:CPU:2", "out/kernel": "/device:CPU:1", "global_step": "/device:CPU:0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est, err := estimator.New(tc.model, estimator.RunConfig{LogEvery: -1, Params: model.Params{"dtype": tensor.Float64, "opt": func() optimizers.Optimizer { return optimizers.SGD(0.1) }}})
			if err != nil {
				t.Fatal(err)
			}
			feats, labels := mlpData(6, tensor.Float64, 1)
			in, _ := estimator.FromTensors(feats, labels, estimator.TensorInput{BatchSize: 6})
			if err := est.Train(context.Background(), in, estimator.Steps(1)); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for name := range tc.want {
				d, err := est.Store().Device(name)
				if err != nil {
					t.Fatal(err)
				}
				got[name] = d.String()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestGraphsBuiltOncePerSignature: the model function runs once per tower
// for each mode and input signature, not once per step.
func TestGraphsBuiltOncePerSignature(t *testing.T) {
	calls := map[string]int{}
	mdl := func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
		calls[fmt.Sprintf("%v/tower%d/rows%d", mode, tw.Index(), f["x"].Shape()[0])]++
		return constModel(tw, mode, f, l, p)
	}
	est, err := estimator.New(replicate.ModelFn(mdl, replicate.Config{Devices: towers.CPUs(2), Optimizer: optimizers.SGD(0.01)}), estimator.RunConfig{LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	x, y := column(1, 2, 3, 4, 5), column(1, 2, 3, 4, 5)
	// Each epoch has a batch of 3 rows (shards of 2 and 1) and one of 2
	// (shards of 1 and 1): two signatures, tower 1 seeing 1 row in both.
	in, _ := estimator.FromTensors(map[string]*tensor.Dense{"x": x}, map[string]*tensor.Dense{"y": y}, estimator.TensorInput{BatchSize: 3, Epochs: 3})
	if err := est.Train(context.Background(), in, estimator.Steps(6)); err != nil {
		t.Fatal(err)
	}
	if _, err := est.Evaluate(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"train/tower0/rows2": 1, "train/tower0/rows1": 1, "train/tower1/rows1": 2,
		"eval/tower0/rows2": 1, "eval/tower0/rows1": 1, "eval/tower1/rows1": 2,
	}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("model function calls (-want +got):\n%s", diff)
	}
	if est.GlobalStep() != 6 {
		t.Errorf("global step %d, want 6", est.GlobalStep())
	}
}

func mustParseDevices(t *testing.T, names ...string) []towers.Device {
	t.Helper()
	ds, err := towers.ParseDevices(names...)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestResumeKeepsPlacement: a run that resumes from a checkpoint places
// every variable (the model's, the optimizer's slots, the global step) on
// the device a fresh run did: the restore creates the variables before the
// model asks for them.
func TestResumeKeepsPlacement(t *testing.T) {
	dir := t.TempDir()
	m := replicate.ModelFn(mlpModel, replicate.Config{Devices: towers.CPUs(3), Placement: towers.RoundRobin(towers.CPU(1), towers.CPU(2))})
	params := model.Params{"dtype": tensor.Float64, "opt": func() optimizers.Optimizer { return optimizers.Adam(0.1) }}
	devices := func() map[string]string {
		est, err := estimator.New(m, estimator.RunConfig{ModelDir: dir, LogEvery: -1, Params: params})
		if err != nil {
			t.Fatal(err)
		}
		defer est.Close()
		feats, labels := mlpData(6, tensor.Float64, 1)
		in, _ := estimator.FromTensors(feats, labels, estimator.TensorInput{BatchSize: 6})
		if err := est.Train(context.Background(), in, estimator.Steps(1)); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, name := range est.VariableNames() {
			d, err := est.Store().Device(name)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = d.String()
		}
		return out
	}
	fresh := devices()
	if fresh["dense/kernel"] != "/device:CPU:1" || fresh["dense/bias"] != "/device:CPU:2" {
		t.Fatalf("fresh run placed %v: not round robin", fresh)
	}
	if diff := cmp.Diff(fresh, devices()); diff != "" {
		t.Errorf("resumed run's devices differ (-fresh +resumed):\n%s", diff)
	}
}
