package estimator_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// recorder logs every hook call.
type recorder struct {
	name   string
	calls  *[]string
	stopAt int64
	fetch  []string
	values map[string][]float64
}

func (r *recorder) Begin(_ context.Context, info estimator.RunInfo) error {
	*r.calls = append(*r.calls, fmt.Sprintf("%s begin %d", r.name, info.StartStep))
	return nil
}

func (r *recorder) BeforeStep(_ context.Context, step int64) (estimator.StepRequest, error) {
	*r.calls = append(*r.calls, fmt.Sprintf("%s before %d", r.name, step))
	return estimator.StepRequest{Fetch: r.fetch}, nil
}

func (r *recorder) AfterStep(_ context.Context, res estimator.StepResult) (bool, error) {
	*r.calls = append(*r.calls, fmt.Sprintf("%s after %d", r.name, res.Step))
	for k, v := range res.Values {
		r.values[k] = append(r.values[k], v.Data().([]float64)...)
	}
	return r.stopAt > 0 && res.Step >= r.stopAt, nil
}

func (r *recorder) End(_ context.Context, _ estimator.RunInfo, cause error) error {
	*r.calls = append(*r.calls, fmt.Sprintf("%s end %v", r.name, cause != nil))
	return nil
}

// scaleModel: pred = x*c with c initially 1, loss = mean((pred-y)^2) with
// SGD; a feature value of NaN makes the loss NaN.
func scaleModel(t *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
	c := t.MustVariable("c", tensor.Float64, tensor.Shape{1, 1}, towers.Constant(1))
	pred := G.Must(G.Mul(f["x"], c))
	spec := &model.Spec{Predictions: map[string]*G.Node{"pred": pred}}
	if mode != model.Predict {
		spec.Loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, l["y"]))))))
		spec.TrainOps = []model.TrainOp{{Optimizer: optimizers.SGD(0.1)}}
	}
	return spec, nil
}

func scaleInput(t *testing.T, xs ...float64) estimator.InputFn {
	t.Helper()
	ys := make([]float64, len(xs))
	for i, x := range xs {
		ys[i] = 2 * x
	}
	in, err := estimator.FromTensors(
		map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(len(xs), 1), tensor.WithBacking(xs))},
		map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(len(ys), 1), tensor.WithBacking(ys))},
		estimator.TensorInput{BatchSize: 1, Epochs: estimator.Forever})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestHookOrderStopAndFetch(t *testing.T) {
	est, err := estimator.New(replicate.ModelFn(scaleModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	a := &recorder{name: "a", calls: &calls, fetch: []string{"c"}, values: map[string][]float64{}}
	b := &recorder{name: "b", calls: &calls, stopAt: 2, fetch: []string{"pred"}, values: map[string][]float64{}}
	if err := est.Train(context.Background(), scaleInput(t, 1), estimator.Hooks(a, b)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"a begin 0", "b begin 0",
		"a before 0", "b before 0", "a after 1", "b after 1",
		"a before 1", "b before 1", "a after 2", "b after 2",
		"a end false", "b end false",
	}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	// c: 1 -> 1 - 0.1*2*(1-2) = 1.2 -> 1.2 + 0.2*0.8 = 1.36. pred is read
	// in the step, before the update: 1 then 1.2.
	if diff := cmp.Diff(map[string][]float64{"c": {1.2, 1.36}}, a.values, cmpApprox); diff != "" {
		t.Errorf("fetched c (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string][]float64{"pred": {1, 1.2}}, b.values, cmpApprox); diff != "" {
		t.Errorf("fetched pred (-want +got):\n%s", diff)
	}
	if err := est.Train(context.Background(), scaleInput(t, 1), estimator.Steps(1), estimator.Hooks(&recorder{name: "x", calls: &calls, fetch: []string{"nope"}})); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown fetch: %v", err)
	}
}

func TestNaNGuardKeepsLastGoodVariables(t *testing.T) {
	est, err := estimator.New(replicate.ModelFn(scaleModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	r := &recorder{name: "r", calls: &calls, values: map[string][]float64{}}
	err = est.Train(context.Background(), scaleInput(t, 1, 1, math.NaN(), 1), estimator.Hooks(r))
	if !errors.Is(err, estimator.ErrNonFiniteLoss) {
		t.Fatalf("got %v, want ErrNonFiniteLoss", err)
	}
	c, _ := est.VariableValue("c")
	if diff := cmp.Diff([]float64{1.36}, c.Data(), cmpApprox); diff != "" {
		t.Errorf("c after the NaN step (-want +got):\n%s", diff)
	}
	if est.GlobalStep() != 2 {
		t.Errorf("global step %d, want 2", est.GlobalStep())
	}
	if got := calls[len(calls)-1]; got != "r end true" {
		t.Errorf("last call %q, want the end hook with the cause", got)
	}
}

// TestEvalReadsValuesAsComputed: gorgonia reuses a node's memory once its
// last use has passed (here pred, consumed by the loss's subtraction); the
// engine must read metric inputs and predictions as they were computed.
func TestEvalReadsValuesAsComputed(t *testing.T) {
	mdl := func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
		spec, err := scaleModel(tw, mode, f, l, p)
		if mode == model.Eval {
			spec.EvalMetrics = map[string]metrics.Bound{"mean_pred": metrics.Mean(spec.Predictions["pred"])}
		}
		return spec, err
	}
	est, err := estimator.New(replicate.ModelFn(mdl, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	xs := []float64{1, 2, 3}
	in, _ := estimator.FromTensors(
		map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(3, 1), tensor.WithBacking(xs))},
		map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(3, 1), tensor.WithBacking([]float64{0, 0, 0}))},
		estimator.TensorInput{BatchSize: 3})
	got, err := est.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	// c = 1: pred = x, mean 2; loss = mean(x^2) = 14/3.
	want := map[string]float64{"mean_pred": 2, "loss": 14.0 / 3, "global_step": 0}
	if diff := cmp.Diff(want, got, cmpApprox); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
