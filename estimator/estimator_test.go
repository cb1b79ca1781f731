package estimator_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/towerflow/towerflow/internal/vartest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

var relApprox = cmpopts.EquateApprox(1e-12, 1e-12)

// lineModel is y = w*x + b over feature "x" of shape [n, 1], with w starting
// at 2 and b at 0.5 and a mean squared error loss minimised by its own SGD
// train op, so it needs no replicate.Config.Optimizer. It predicts
//
//	"y":    [n, 1], rank 2
//	"flat": [n],    rank 1 (y reshaped)
//	"pair": [n, 2], (y, x) side by side
//
// with eval metrics "mae" (mean |y - label|) and "mean_y", and three export
// signatures: the default a regression of y, "classify" with only scores
// (y), and "predict" with flat and pair.
func lineModel(t *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
	x, ok := f["x"]
	if !ok {
		return nil, fmt.Errorf("no feature x")
	}
	w := t.MustVariable("w", tensor.Float64, nil, towers.Constant(2))
	b := t.MustVariable("b", tensor.Float64, nil, towers.Constant(0.5))
	y := G.Must(G.Add(G.Must(G.Mul(x, w)), b))
	flat := G.Must(G.Reshape(y, tensor.Shape{x.Shape()[0]}))
	pair := G.Must(G.Concat(1, y, x))
	spec := &model.Spec{
		Predictions: map[string]*G.Node{"y": y, "flat": flat, "pair": pair},
		ExportOutputs: map[string]model.ExportOutput{
			model.DefaultServingSignature: model.RegressionOutput{Value: y},
			"classify":                    model.ClassificationOutput{Scores: y},
			"predict":                     model.PredictOutput{Outputs: map[string]*G.Node{"flat": flat, "pair": pair}},
		},
	}
	if mode == model.Predict {
		return spec, nil
	}
	diff := G.Must(G.Sub(y, l["y"]))
	spec.Loss = G.Must(G.Mean(G.Must(G.Square(diff))))
	spec.EvalMetrics = map[string]metrics.Bound{
		"mae":    metrics.Mean(G.Must(G.Abs(diff))),
		"mean_y": metrics.Mean(y),
	}
	spec.TrainOps = []model.TrainOp{{Optimizer: optimizers.SGD(0.01)}}
	return spec, nil
}

func cpuDevices(n int) []towers.Device {
	ds := make([]towers.Device, n)
	for i := range ds {
		ds[i] = towers.CPU(i)
	}
	return ds
}

// replicated is lineModel (or fn) on n CPU towers with BatchMean, so that
// its losses equal one device's.
func replicated(fn model.Fn, n int) *replicate.Model {
	return replicate.ModelFn(fn, replicate.Config{Devices: cpuDevices(n), Reduction: replicate.BatchMean})
}

func newEstimator(t *testing.T, mdl *replicate.Model) *estimator.Estimator {
	t.Helper()
	est, err := estimator.New(mdl, estimator.RunConfig{Seed: 1, LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { est.Close() })
	return est
}

func column(vals ...float64) *tensor.Dense {
	return tensor.New(tensor.WithShape(len(vals), 1), tensor.WithBacking(vals))
}

// lineInput feeds x and labels y = x (labels left out when withLabels is
// false) in batches of batch rows, one epoch, in order.
func lineInput(t *testing.T, xs []float64, batch int, withLabels bool) estimator.InputFn {
	t.Helper()
	var labels map[string]*tensor.Dense
	if withLabels {
		labels = map[string]*tensor.Dense{"y": column(slices.Clone(xs)...)}
	}
	in, err := estimator.FromTensors(map[string]*tensor.Dense{"x": column(slices.Clone(xs)...)}, labels, estimator.TensorInput{BatchSize: batch})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func xs(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i + 1)
	}
	return out
}

// TestEvaluate: with w = 2, b = 0.5 and labels = x = 1..4, y = 2x + 0.5 and
// y - label = x + 0.5 = 1.5, 2.5, 3.5, 4.5.
func TestEvaluate(t *testing.T) {
	tests := []struct {
		name  string
		batch int
		opts  []estimator.EvalOption
		want  map[string]float64
	}{
		// Batch losses (1.5²+2.5²)/2 = 4.25 and (3.5²+4.5²)/2 = 16.25.
		{"two batches", 2, nil, map[string]float64{"loss": 10.25, "global_step": 0, "mae": 3, "mean_y": 5.5}},
		{"one batch", 4, nil, map[string]float64{"loss": 10.25, "global_step": 0, "mae": 3, "mean_y": 5.5}},
		// Batch losses (1.5²+2.5²+3.5²)/3 and 4.5²; mae and mean_y are over
		// examples, whatever the batching.
		{"uneven batches", 3, nil, map[string]float64{"loss": (20.75/3 + 20.25) / 2, "global_step": 0, "mae": 3, "mean_y": 5.5}},
		{"EvalSteps(1)", 2, []estimator.EvalOption{estimator.EvalSteps(1)}, map[string]float64{"loss": 4.25, "global_step": 0, "mae": 2, "mean_y": 3.5}},
		{"EvalSteps(3) beyond the input", 2, []estimator.EvalOption{estimator.EvalSteps(3)}, map[string]float64{"loss": 10.25, "global_step": 0, "mae": 3, "mean_y": 5.5}},
		{"EvalSteps(0) is no limit", 1, []estimator.EvalOption{estimator.EvalSteps(0)}, map[string]float64{"loss": (2.25 + 6.25 + 12.25 + 20.25) / 4, "global_step": 0, "mae": 3, "mean_y": 5.5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est := newEstimator(t, replicate.ModelFn(lineModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}))
			in := lineInput(t, xs(4), tc.batch, true)
			for i := range 2 { // metrics start from zero on every call
				got, err := est.Evaluate(context.Background(), in, tc.opts...)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, got, relApprox); diff != "" {
					t.Errorf("evaluation %d (-want +got):\n%s", i+1, diff)
				}
			}
		})
	}
}

// TestEvaluateReportsGlobalStep: global_step is the step after training,
// and evaluation does not change variables or the step.
func TestEvaluateReportsGlobalStep(t *testing.T) {
	est := newEstimator(t, replicate.ModelFn(lineModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}))
	in := lineInput(t, xs(4), 2, true)
	if err := est.Train(context.Background(), in, estimator.Steps(2)); err != nil {
		t.Fatal(err)
	}
	before := vartest.Variables(t, est)
	first, err := est.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if first["global_step"] != 2 {
		t.Errorf("global_step %v, want 2", first["global_step"])
	}
	second, err := est.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("second evaluation differs (-first +second):\n%s", diff)
	}
	if diff := cmp.Diff(before, vartest.Variables(t, est)); diff != "" {
		t.Errorf("evaluation changed variables (-before +after):\n%s", diff)
	}
}

func TestTrainStepLimits(t *testing.T) {
	forever := func(t *testing.T) estimator.InputFn {
		in, err := estimator.FromTensors(map[string]*tensor.Dense{"x": column(1, 2)}, map[string]*tensor.Dense{"y": column(1, 2)}, estimator.TensorInput{BatchSize: 2, Epochs: estimator.Forever})
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	twoBatches := func(t *testing.T) estimator.InputFn { return lineInput(t, xs(4), 2, true) }
	// One Estimator goes through the calls in order.
	calls := []struct {
		name      string
		input     func(*testing.T) estimator.InputFn
		opts      []estimator.TrainOption
		wantStep  int64
		wantSteps int // OnStep calls
	}{
		{"Steps(3)", forever, []estimator.TrainOption{estimator.Steps(3)}, 3, 3},
		{"MaxSteps(2) already passed", forever, []estimator.TrainOption{estimator.MaxSteps(2)}, 3, 0},
		{"MaxSteps(3) already reached", forever, []estimator.TrainOption{estimator.MaxSteps(3)}, 3, 0},
		{"Steps(2) adds", forever, []estimator.TrainOption{estimator.Steps(2)}, 5, 2},
		{"MaxSteps(7)", forever, []estimator.TrainOption{estimator.MaxSteps(7)}, 7, 2},
		{"Steps and MaxSteps: the smaller limit", forever, []estimator.TrainOption{estimator.Steps(10), estimator.MaxSteps(9)}, 9, 2},
		{"MaxSteps and Steps: the smaller limit", forever, []estimator.TrainOption{estimator.MaxSteps(100), estimator.Steps(1)}, 10, 1},
		{"input ends before Steps", twoBatches, []estimator.TrainOption{estimator.Steps(10)}, 12, 2},
		{"no limit: until the input ends", twoBatches, nil, 14, 2},
	}
	est := newEstimator(t, replicate.ModelFn(lineModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}))
	for _, c := range calls {
		before := vartest.Variables(t, est)
		var steps []int64
		opts := append(slices.Clone(c.opts), estimator.OnStep(func(step int64, _ float64) { steps = append(steps, step) }))
		if err := est.Train(context.Background(), c.input(t), opts...); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := est.GlobalStep(); got != c.wantStep {
			t.Errorf("%s: global step %d, want %d", c.name, got, c.wantStep)
		}
		var wantSteps []int64
		for s := c.wantStep - int64(c.wantSteps) + 1; s <= c.wantStep; s++ {
			wantSteps = append(wantSteps, s)
		}
		if diff := cmp.Diff(wantSteps, steps, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: OnStep steps (-want +got):\n%s", c.name, diff)
		}
		after := vartest.Variables(t, est)
		if changed := !cmp.Equal(before["w"], after["w"]); changed != (c.wantSteps > 0) {
			t.Errorf("%s: w went from %v to %v after %d steps", c.name, before["w"], after["w"], c.wantSteps)
		}
	}
	if err := est.Train(context.Background(), forever(t), estimator.Steps(-1)); err == nil || !strings.Contains(err.Error(), "Steps(-1)") {
		t.Errorf("Steps(-1): got %v, want an error naming it", err)
	}
}

// TestTrainEmptyInput: an input that yields no batch is an error of a
// model not yet trained, and no error once trained (an input resumed
// past its end: nothing left to train on).
func TestTrainEmptyInput(t *testing.T) {
	empty := func(context.Context) iter.Seq2[estimator.Batch, error] {
		return func(func(estimator.Batch, error) bool) {}
	}
	est := newEstimator(t, replicate.ModelFn(lineModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}))
	type got struct {
		Err  string
		Step int64
	}
	if err := est.Train(context.Background(), empty); !errors.Is(err, estimator.ErrNoBatches) {
		t.Errorf("Train of an empty input: %v, want an error wrapping ErrNoBatches", err)
	}
	if _, err := est.Evaluate(context.Background(), empty); !errors.Is(err, estimator.ErrNoBatches) {
		t.Errorf("Evaluate of an empty input: %v, want an error wrapping ErrNoBatches", err)
	}
	for _, c := range []struct {
		name  string
		input estimator.InputFn
		want  got
	}{
		{"untrained", empty, got{"train: input yielded no batches: nothing was trained", 0}},
		{"two steps", lineInput(t, xs(4), 2, true), got{"", 2}},
		{"trained", empty, got{"", 2}},
	} {
		var g got
		if err := est.Train(context.Background(), c.input); err != nil {
			g.Err = err.Error()
		}
		g.Step = est.GlobalStep()
		if diff := cmp.Diff(c.want, g); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}

// TestNoBatches: an input whose first item is an error wrapping
// ErrNoBatches (a dataset.Pipeline over files without records) is an
// error of Train and Evaluate, with its reason, and no predictions.
func TestNoBatches(t *testing.T) {
	why := fmt.Errorf("%w: the files hold no records: a.csv", estimator.ErrNoBatches)
	noBatches := func(context.Context) iter.Seq2[estimator.Batch, error] {
		return func(yield func(estimator.Batch, error) bool) { yield(estimator.Batch{}, why) }
	}
	est := newEstimator(t, replicate.ModelFn(lineModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}))
	must := func(err error) {
		t.Helper()
		if !errors.Is(err, estimator.ErrNoBatches) || !strings.Contains(err.Error(), "a.csv") {
			t.Errorf("error %v, want one wrapping ErrNoBatches and naming a.csv", err)
		}
	}
	must(est.Train(context.Background(), noBatches))
	if err := est.Train(context.Background(), lineInput(t, xs(4), 2, true)); err != nil {
		t.Fatal(err)
	}
	_, err := est.Evaluate(context.Background(), noBatches)
	must(err)
	for p, err := range est.Predict(context.Background(), noBatches) {
		t.Errorf("Predict yielded %v, %v; want nothing", p, err)
	}
}

// predRow is one Prediction as plain values.
type predRow map[string]struct {
	Shape []int
	Data  []float64
}

func toRow(t *testing.T, p estimator.Prediction) predRow {
	t.Helper()
	out := predRow{}
	for k, v := range p {
		d, err := numeric.Float64s(v)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = struct {
			Shape []int
			Data  []float64
		}{[]int(v.Shape().Clone()), d}
	}
	return out
}

// wantLineRows is lineModel's predictions for each x.
func wantLineRows(xs []float64) []predRow {
	var out []predRow
	for _, x := range xs {
		y := 2*x + 0.5
		out = append(out, predRow{
			"y":    {Shape: []int{1}, Data: []float64{y}},
			"flat": {Shape: []int{}, Data: []float64{y}},
			"pair": {Shape: []int{2}, Data: []float64{y, x}},
		})
	}
	return out
}

func predictRows(t *testing.T, est *estimator.Estimator, in estimator.InputFn) []predRow {
	t.Helper()
	var out []predRow
	for p, err := range est.Predict(context.Background(), in) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, toRow(t, p))
	}
	return out
}

func TestPredict(t *testing.T) {
	tests := []struct {
		name   string
		model  *replicate.Model
		rows   int
		batch  int
		labels bool
	}{
		{"one device", replicate.ModelFn(lineModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), 5, 2, false},
		{"one device, labels ignored", replicate.ModelFn(lineModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), 5, 2, true},
		{"one device, one batch", replicate.ModelFn(lineModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), 3, 10, false},
		{"one device, batches of one row", replicate.ModelFn(lineModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), 3, 1, false},
		{"two towers", replicated(lineModel, 2), 5, 2, false},
		// 7 rows in batches of 3: the last batch has 1 row for 3 towers.
		{"three towers, final batch of one row", replicated(lineModel, 3), 7, 3, false},
		{"three towers, every batch of one row", replicated(lineModel, 3), 2, 1, false},
		{"four towers, batch of two rows", replicated(lineModel, 4), 6, 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est := newEstimator(t, tc.model)
			got := predictRows(t, est, lineInput(t, xs(tc.rows), tc.batch, tc.labels))
			if diff := cmp.Diff(wantLineRows(xs(tc.rows)), got); diff != "" {
				t.Errorf("predictions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPredictStopsWhenConsumerStops(t *testing.T) {
	est := newEstimator(t, replicate.ModelFn(lineModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}))
	n := 0
	for _, err := range est.Predict(context.Background(), lineInput(t, xs(10), 3, false)) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 4 {
			break
		}
	}
	// The Estimator is usable afterwards.
	if got := predictRows(t, est, lineInput(t, xs(2), 2, false)); len(got) != 2 {
		t.Errorf("%d predictions after an early break, want 2", len(got))
	}
}

// TestTowersMatchOneDevice: training, evaluation and prediction on a final
// batch with fewer rows than towers give one device's numbers.
func TestTowersMatchOneDevice(t *testing.T) {
	type result struct {
		Scores map[string]float64
		Vars   map[string][]float64
		Preds  []predRow
	}
	run := func(t *testing.T, mdl *replicate.Model) result {
		est := newEstimator(t, mdl)
		ctx := context.Background()
		// 7 rows in batches of 3: 3, 3 and 1, 3, 3.
		train, err := estimator.FromTensors(map[string]*tensor.Dense{"x": column(xs(7)...)}, map[string]*tensor.Dense{"y": column(xs(7)...)},
			estimator.TensorInput{BatchSize: 3, Epochs: estimator.Forever, Shuffle: true, Seed: 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := est.Train(ctx, train, estimator.Steps(5)); err != nil {
			t.Fatal(err)
		}
		var r result
		// 7 rows in batches of 3: 3, 3 and 1.
		if r.Scores, err = est.Evaluate(ctx, lineInput(t, xs(7), 3, true)); err != nil {
			t.Fatal(err)
		}
		r.Vars = vartest.Variables(t, est)
		r.Preds = predictRows(t, est, lineInput(t, xs(7), 3, false))
		return r
	}
	want := run(t, replicate.ModelFn(lineModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}))
	for _, n := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("%d towers", n), func(t *testing.T) {
			if diff := cmp.Diff(want, run(t, replicated(lineModel, n)), relApprox); diff != "" {
				t.Errorf("towers differ from one device (-one +towers):\n%s", diff)
			}
		})
	}
}

func TestPredictBatchesExportOutputs(t *testing.T) {
	x := xs(5)
	// Expected outputs over the whole input, concatenated over batches.
	wantY, wantPair := make([]float64, 5), make([]float64, 10)
	for i, v := range x {
		wantY[i] = 2*v + 0.5
		wantPair[2*i], wantPair[2*i+1] = 2*v+0.5, v
	}
	type output struct {
		Shape []int
		Data  []float64
	}
	want := map[string]map[string]output{
		model.DefaultServingSignature: {"outputs": {[]int{5, 1}, wantY}},
		"classify":                    {"scores": {[]int{5, 1}, wantY}}, // no "classes"
		"predict":                     {"flat": {[]int{5}, wantY}, "pair": {[]int{5, 2}, wantPair}},
	}
	for _, tc := range []struct {
		name  string
		model *replicate.Model
		batch int
	}{
		{"one device", replicate.ModelFn(lineModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), 2},
		{"two towers", replicated(lineModel, 2), 2},
		{"three towers", replicated(lineModel, 3), 5},
		{"three towers, final batch smaller than the towers", replicated(lineModel, 3), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			est := newEstimator(t, tc.model)
			got := map[string]map[string]output{}
			batches := 0
			for out, err := range est.PredictBatches(context.Background(), lineInput(t, x, tc.batch, false)) {
				if err != nil {
					t.Fatal(err)
				}
				batches++
				if diff := cmp.Diff([]string{"flat", "pair", "y"}, slices.Sorted(maps.Keys(out.Predictions))); diff != "" {
					t.Errorf("batch %d prediction names (-want +got):\n%s", batches, diff)
				}
				for sig, outs := range out.ExportOutputs {
					if got[sig] == nil {
						got[sig] = map[string]output{}
					}
					for name, v := range outs {
						d, err := numeric.Float64s(v)
						if err != nil {
							t.Fatal(err)
						}
						o := got[sig][name]
						if o.Shape == nil {
							o.Shape = slices.Clone([]int(v.Shape()))
						} else {
							o.Shape[0] += v.Shape()[0]
						}
						o.Data = append(o.Data, d...)
						got[sig][name] = o
					}
				}
			}
			if wantBatches := (len(x) + tc.batch - 1) / tc.batch; batches != wantBatches {
				t.Errorf("%d batches, want %d", batches, wantBatches)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("export outputs (-want +got):\n%s", diff)
			}
		})
	}
}

// sparseModel predicts "p" = s·v + x for a sparse feature s of dense shape
// [n, 3] and a dense feature x [n, 1], v = (1, 10, 100), and "s", the
// densified feature as the model saw it. It records the shape of s on every
// tower it is built on.
func sparseModel(shapes *[][]int) model.Fn {
	return func(t *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
		s, x := f["s"], f["x"]
		if s == nil || x == nil {
			return nil, fmt.Errorf("features %v: want s and x", slices.Sorted(maps.Keys(f)))
		}
		*shapes = append(*shapes, slices.Clone([]int(s.Shape())))
		v := t.MustVariable("v", tensor.Float64, tensor.Shape{3, 1}, towers.Values(column(1, 10, 100)))
		p := G.Must(G.Add(G.Must(G.Mul(s, v)), x))
		spec := &model.Spec{Predictions: map[string]*G.Node{"p": p, "s": G.Must(G.Mul(s, G.NewConstant(1.0)))}}
		if mode != model.Predict {
			spec.Loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(p, l["y"]))))))
			spec.EvalMetrics = map[string]metrics.Bound{"mean_p": metrics.Mean(p)}
		}
		return spec, nil
	}
}

// sparseInput yields one batch of 5 rows: x = 0.5 for every row and a
// sparse s with entries (0,0)=1, (1,2)=2, (3,1)=3, (3,2)=4, (4,0)=5, listed
// out of order; labels y = 0.
func sparseInput(ctx context.Context) iter.Seq2[estimator.Batch, error] {
	return func(yield func(estimator.Batch, error) bool) {
		yield(estimator.Batch{
			Features: map[string]*tensor.Dense{"x": column(0.5, 0.5, 0.5, 0.5, 0.5)},
			Labels:   map[string]*tensor.Dense{"y": column(0, 0, 0, 0, 0)},
			Sparse: map[string]sharding.SparseCOO{"s": {
				Indices:    [][]int{{3, 2}, {0, 0}, {4, 0}, {1, 2}, {3, 1}},
				Values:     tensor.New(tensor.WithShape(5), tensor.WithBacking([]float64{4, 1, 5, 2, 3})),
				DenseShape: []int{5, 3},
			}},
		}, nil)
	}
}

func TestSparseFeature(t *testing.T) {
	dense := [][]float64{{1, 0, 0}, {0, 0, 2}, {0, 0, 0}, {0, 3, 4}, {5, 0, 0}}
	var want []predRow
	for _, r := range dense {
		want = append(want, predRow{
			"p": {Shape: []int{1}, Data: []float64{r[0] + 10*r[1] + 100*r[2] + 0.5}},
			"s": {Shape: []int{3}, Data: r},
		})
	}
	tests := []struct {
		towers     int
		wantShapes [][]int // of s, per tower
	}{
		{1, [][]int{{5, 3}}},
		{2, [][]int{{3, 3}, {2, 3}}},
		{3, [][]int{{2, 3}, {2, 3}, {1, 3}}},
		{5, [][]int{{1, 3}, {1, 3}, {1, 3}, {1, 3}, {1, 3}}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d towers", tc.towers), func(t *testing.T) {
			var shapes [][]int
			mdl := replicate.ModelFn(sparseModel(&shapes), replicate.Config{Devices: []towers.Device{towers.CPU(0)}})
			if tc.towers > 1 {
				mdl = replicated(sparseModel(&shapes), tc.towers)
			}
			est := newEstimator(t, mdl)
			got := predictRows(t, est, sparseInput)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("predictions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantShapes, shapes); diff != "" {
				t.Errorf("shapes of s per tower (-want +got):\n%s", diff)
			}
			scores, err := est.Evaluate(context.Background(), sparseInput)
			if err != nil {
				t.Fatal(err)
			}
			// p = 1.5, 200.5, 0.5, 430.5, 5.5; labels 0.
			wantScores := map[string]float64{
				"mean_p":      638.5 / 5,
				"loss":        (1.5*1.5 + 200.5*200.5 + 0.5*0.5 + 430.5*430.5 + 5.5*5.5) / 5,
				"global_step": 0,
			}
			if diff := cmp.Diff(wantScores, scores, relApprox); diff != "" {
				t.Errorf("evaluation (-want +got):\n%s", diff)
			}
		})
	}
}

// cancelAfter wraps in, cancelling after the consumer took n batches.
func cancelAfter(in estimator.InputFn, n int, cancel context.CancelFunc) estimator.InputFn {
	return func(ctx context.Context) iter.Seq2[estimator.Batch, error] {
		return func(yield func(estimator.Batch, error) bool) {
			taken := 0
			for b, err := range in(ctx) {
				if !yield(b, err) {
					return
				}
				if taken++; taken == n {
					cancel()
				}
			}
		}
	}
}

func TestCancelledContext(t *testing.T) {
	for _, after := range []int{0, 1, 2} { // batches before cancelling
		t.Run(fmt.Sprintf("after %d batches", after), func(t *testing.T) {
			est := newEstimator(t, replicated(lineModel, 2))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if after == 0 {
				cancel()
			}
			// Evaluate: 10 rows in batches of 2.
			scores, err := est.Evaluate(ctx, cancelAfter(lineInput(t, xs(10), 2, true), after, cancel))
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Evaluate: got %v, %v, want context.Canceled", scores, err)
			}

			ctx, cancel = context.WithCancel(context.Background())
			defer cancel()
			if after == 0 {
				cancel()
			}
			var preds int
			var errs []error
			for p, err := range est.Predict(ctx, cancelAfter(lineInput(t, xs(10), 2, false), after, cancel)) {
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if len(errs) > 0 {
					t.Fatal("prediction after an error")
				}
				if p == nil {
					t.Fatal("nil prediction without an error")
				}
				preds++
			}
			if len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
				t.Errorf("Predict: errors %v, want one context.Canceled", errs)
			}
			if preds != 2*after {
				t.Errorf("Predict: %d predictions before the error, want %d", preds, 2*after)
			}
		})
	}
}

func TestEvaluateInputErrors(t *testing.T) {
	boom := errors.New("boom")
	failing := func(context.Context) iter.Seq2[estimator.Batch, error] {
		return func(yield func(estimator.Batch, error) bool) { yield(estimator.Batch{}, boom) }
	}
	empty := func(context.Context) iter.Seq2[estimator.Batch, error] {
		return func(func(estimator.Batch, error) bool) {}
	}
	badRows := func(context.Context) iter.Seq2[estimator.Batch, error] {
		return func(yield func(estimator.Batch, error) bool) {
			yield(estimator.Batch{Features: map[string]*tensor.Dense{"x": column(1, 2)}, Labels: map[string]*tensor.Dense{"y": column(1)}}, nil)
		}
	}
	tests := []struct {
		name  string
		input estimator.InputFn
		is    error
		want  []string
	}{
		{"nil input", nil, nil, []string{"evaluate", "nil input"}},
		{"input error", failing, boom, []string{"evaluate", "input at batch 0", "boom"}},
		{"no batches", empty, nil, []string{"evaluate", "no batches"}},
		{"rows disagree", badRows, nil, []string{"evaluate", "batch 0", `label "y"`, "1 rows"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est := newEstimator(t, replicate.ModelFn(lineModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}))
			_, err := est.Evaluate(context.Background(), tc.input)
			wanterr.Mentions(t, err, tc.want...)
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v does not wrap %v", err, tc.is)
			}
			var n int
			for _, err := range est.Predict(context.Background(), tc.input) {
				if tc.name == "no batches" {
					t.Fatalf("Predict on an empty input yielded (%v)", err)
				}
				n++
				if err == nil {
					t.Fatal("Predict: no error")
				}
				if tc.is != nil && !errors.Is(err, tc.is) {
					t.Errorf("Predict: error %v does not wrap %v", err, tc.is)
				}
			}
			if tc.name != "no batches" && n != 1 {
				t.Errorf("Predict yielded %d times, want one error", n)
			}
		})
	}
}

// onTower runs change on the given tower and lineModel elsewhere; tower -1
// means every tower.
func onTower(tower int, change func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels) (*model.Spec, error)) model.Fn {
	return func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
		if tower < 0 || tw.Index() == tower {
			return change(tw, mode, f, l)
		}
		return lineModel(tw, mode, f, l, p)
	}
}

// tweak runs lineModel and then edits its spec.
func tweak(edit func(s *model.Spec, f map[string]*G.Node)) func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels) (*model.Spec, error) {
	return func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels) (*model.Spec, error) {
		s, err := lineModel(tw, mode, f, l, nil)
		if err == nil {
			edit(s, f)
		}
		return s, err
	}
}

func TestEvaluatePredictModelErrors(t *testing.T) {
	const eval, predict = model.Eval, model.Predict
	one := func(fn model.Fn) *replicate.Model {
		return replicate.ModelFn(fn, replicate.Config{Devices: []towers.Device{towers.CPU(0)}})
	}
	two := func(fn model.Fn) *replicate.Model { return replicated(fn, 2) }
	nilSpec := func(*towers.Scope, model.Mode, model.Features, model.Labels) (*model.Spec, error) {
		return nil, nil
	}
	tests := []struct {
		name  string
		model *replicate.Model
		mode  model.Mode
		want  []string
	}{
		{"nil spec, eval", one(onTower(-1, nilSpec)), eval, []string{"tower 0", "eval mode", "nil spec"}},
		{"nil spec, predict", one(onTower(-1, nilSpec)), predict, []string{"tower 0", "predict mode", "nil spec"}},
		{"nil spec on tower 1", two(onTower(1, nilSpec)), eval, []string{"tower 1 (/device:CPU:1)", "eval mode", "nil spec"}},
		{"model error on tower 1", two(onTower(1, func(*towers.Scope, model.Mode, model.Features, model.Labels) (*model.Spec, error) {
			return nil, errors.New("no can do")
		})), predict, []string{"tower 1", "predict mode", "no can do"}},
		{"panic on tower 1", two(onTower(1, func(*towers.Scope, model.Mode, model.Features, model.Labels) (*model.Spec, error) {
			panic("boom")
		})), eval, []string{"tower 1 (/device:CPU:1)", "eval mode", "panic", "boom"}},
		{"predict spec without predictions", one(onTower(-1, tweak(func(s *model.Spec, _ map[string]*G.Node) {
			s.Predictions, s.ExportOutputs = nil, nil
		}))), predict, []string{"tower 0", "predict mode", "no predictions"}},
		{"nil prediction", one(onTower(-1, tweak(func(s *model.Spec, _ map[string]*G.Node) {
			s.Predictions["y"] = nil
		}))), predict, []string{"tower 0", "predict mode", `prediction "y" is nil`}},
		{"scalar prediction", one(onTower(-1, tweak(func(s *model.Spec, _ map[string]*G.Node) {
			s.Predictions["total"] = G.Must(G.Sum(s.Predictions["y"]))
		}))), predict, []string{"tower 0", "predict", `prediction "total"`, "batch along dimension 0"}},
		{"prediction with the wrong rows", one(onTower(-1, tweak(func(s *model.Spec, _ map[string]*G.Node) {
			s.Predictions["col"] = G.Must(G.Sum(s.Predictions["pair"], 0)) // [2] for a shard of 3 rows
		}))), predict, []string{"tower 0", "predict", `prediction "col"`, "3 rows", "batch along dimension 0"}},
		{"scalar export output", one(onTower(-1, tweak(func(s *model.Spec, _ map[string]*G.Node) {
			s.ExportOutputs["total"] = model.RegressionOutput{Value: G.Must(G.Sum(s.Predictions["y"]))}
		}))), predict, []string{"tower 0", "predict", `export output "outputs" of signature "total"`, "batch along dimension 0"}},
		{"eval spec without loss", one(onTower(-1, tweak(func(s *model.Spec, _ map[string]*G.Node) { s.Loss = nil }))), eval, []string{"tower 0", "eval mode", "no loss"}},
		{"eval loss not a scalar", one(onTower(-1, tweak(func(s *model.Spec, _ map[string]*G.Node) { s.Loss = s.Predictions["y"] }))), eval, []string{"tower 0", "eval mode", "loss must be a scalar"}},
		{"eval metric named loss", one(onTower(-1, tweak(func(s *model.Spec, _ map[string]*G.Node) {
			s.EvalMetrics["loss"] = metrics.Mean(s.Loss)
		}))), eval, []string{"tower 0", "eval mode", `eval metric "loss"`, "clashes"}},
		{"eval metric named global_step", one(onTower(-1, tweak(func(s *model.Spec, _ map[string]*G.Node) {
			s.EvalMetrics["global_step"] = metrics.Mean(s.Loss)
		}))), eval, []string{"tower 0", "eval mode", `eval metric "global_step"`, "clashes"}},
		{"eval metric without constructor", one(onTower(-1, tweak(func(s *model.Spec, _ map[string]*G.Node) {
			s.EvalMetrics["mae"] = metrics.Bound{}
		}))), eval, []string{"tower 0", "eval mode", `eval metric "mae"`, "no constructor"}},
		{"towers build different metric names", two(onTower(1, tweak(func(s *model.Spec, _ map[string]*G.Node) {
			s.EvalMetrics["mae2"] = s.EvalMetrics["mae"]
			delete(s.EvalMetrics, "mae")
		}))), eval, []string{"tower 1 (/device:CPU:1)", "eval mode", "different eval metrics"}},
		{"towers build different metric kinds", two(onTower(1, tweak(func(s *model.Spec, f map[string]*G.Node) {
			s.EvalMetrics["mae"] = metrics.AUC(f["x"], f["x"])
		}))), eval, []string{"tower 1", "eval mode", "different eval metrics"}},
		{"towers build different predictions", two(onTower(1, tweak(func(s *model.Spec, _ map[string]*G.Node) {
			delete(s.Predictions, "pair")
		}))), predict, []string{"tower 1 (/device:CPU:1)", "predict mode", "different predictions"}},
		{"towers build different export outputs", two(onTower(1, tweak(func(s *model.Spec, _ map[string]*G.Node) {
			s.ExportOutputs["classify"] = model.ClassificationOutput{Classes: s.Predictions["y"]}
		}))), predict, []string{"tower 1", "predict mode", "different export outputs"}},
		{"towers build different variables", two(onTower(1, func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels) (*model.Spec, error) {
			tw.MustVariable("w", tensor.Float64, nil, nil)
			return &model.Spec{Predictions: map[string]*G.Node{"y": f["x"]}, Loss: G.NewConstant(1.0)}, nil
		})), predict, []string{"tower 1", "predict mode", "different variables"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est := newEstimator(t, tc.model)
			// 6 rows in batches of 3: every tower gets rows.
			switch tc.mode {
			case model.Eval:
				scores, err := est.Evaluate(context.Background(), lineInput(t, xs(6), 3, true))
				if err == nil {
					t.Fatalf("no error; scores %v", scores)
				}
				wanterr.Mentions(t, err, append([]string{"evaluate"}, tc.want...)...)
			case model.Predict:
				n := 0
				for p, err := range est.Predict(context.Background(), lineInput(t, xs(6), 3, false)) {
					if n++; n > 1 {
						t.Fatal("Predict yielded after an error")
					}
					if err == nil {
						t.Fatalf("no error; prediction %v", p)
					}
					wanterr.Mentions(t, err, append([]string{"predict"}, tc.want...)...)
				}
				if n == 0 {
					t.Fatal("Predict yielded nothing, want an error")
				}
			}
		})
	}
}

// TestErrorThenSuccess: a failed build leaves the Estimator usable.
func TestErrorThenSuccess(t *testing.T) {
	fail := true
	mdl := func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
		if fail {
			return nil, errors.New("not yet")
		}
		return lineModel(tw, mode, f, l, p)
	}
	est := newEstimator(t, replicated(mdl, 2))
	in := lineInput(t, xs(4), 2, true)
	if _, err := est.Evaluate(context.Background(), in); err == nil {
		t.Fatal("no error")
	}
	fail = false
	got, err := est.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]float64{"loss": 10.25, "global_step": 0, "mae": 3, "mean_y": 5.5}, got, relApprox); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestNilExportOutputIsAnError: an export output that is nil, or that holds
// a nil node, is a model error naming the tower, the mode and the output,
// like a nil prediction; it must not panic (a panic inside PredictBatches
// also leaves the Estimator locked, so this test does not Close it).
func TestNilExportOutputIsAnError(t *testing.T) {
	tests := []struct {
		name string
		edit func(s *model.Spec)
		want []string
	}{
		{"nil output", func(s *model.Spec) { s.ExportOutputs["bad"] = nil }, []string{`"bad"`, "nil"}},
		{"nil node in a predict output", func(s *model.Spec) {
			s.ExportOutputs["bad"] = model.PredictOutput{Outputs: map[string]*G.Node{"a": nil}}
		}, []string{`"bad"`, `"a"`, "nil"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mdl := onTower(-1, tweak(func(s *model.Spec, _ map[string]*G.Node) { tc.edit(s) }))
			est, err := estimator.New(replicate.ModelFn(mdl, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{LogEvery: -1})
			if err != nil {
				t.Fatal(err)
			}
			var got error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("Predict panicked: %v", r)
					}
				}()
				for _, err := range est.Predict(context.Background(), lineInput(t, xs(2), 2, false)) {
					got = err
					break
				}
			}()
			wanterr.Mentions(t, got, append([]string{"tower 0", "predict mode"}, tc.want...)...)
		})
	}
}

// TestPredictWithOnlyExportOutputs: Spec documents Predictions as required
// in Predict mode, but a spec with only export outputs passes the check;
// Predict then yields nothing at all for the input. It should yield one
// Prediction per example or an error, not silently drop every example.
func TestPredictWithOnlyExportOutputs(t *testing.T) {
	mdl := onTower(-1, tweak(func(s *model.Spec, _ map[string]*G.Node) { s.Predictions = nil }))
	est := newEstimator(t, replicate.ModelFn(mdl, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}))
	preds, errs := 0, 0
	for _, err := range est.Predict(context.Background(), lineInput(t, xs(3), 2, false)) {
		if err != nil {
			errs++
			continue
		}
		preds++
	}
	if preds != 3 && errs == 0 {
		t.Errorf("Predict yielded %d predictions and no error for 3 examples", preds)
	}
}

// TestConcurrentUse: the Estimator's methods are safe for concurrent use,
// and a Predict loop body may call them (the race detector checks the rest).
func TestConcurrentUse(t *testing.T) {
	est := newEstimator(t, replicated(lineModel, 2))
	ctx := context.Background()
	train, err := estimator.FromTensors(map[string]*tensor.Dense{"x": column(xs(4)...)}, map[string]*tensor.Dense{"y": column(xs(4)...)},
		estimator.TensorInput{BatchSize: 2, Epochs: estimator.Forever})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	go func() { errs <- est.Train(ctx, train, estimator.Steps(20)) }()
	go func() {
		_, err := est.Evaluate(ctx, lineInput(t, xs(6), 2, true))
		errs <- err
	}()
	go func() {
		for _, err := range est.Predict(ctx, lineInput(t, xs(6), 2, false)) {
			if err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	go func() {
		for range 10 {
			est.GlobalStep()
			if _, err := est.VariableValue("global_step"); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := est.GlobalStep(); got != 20 {
		t.Errorf("global step %d, want 20", got)
	}
	// Inside a Predict loop: the Estimator is not locked between batches.
	n := 0
	for _, err := range est.Predict(ctx, lineInput(t, xs(4), 2, false)) {
		if err != nil {
			t.Fatal(err)
		}
		if _, err := est.Evaluate(ctx, lineInput(t, xs(2), 2, true)); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 4 {
		t.Errorf("%d predictions, want 4", n)
	}
}
