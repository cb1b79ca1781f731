package linreg_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

type trained struct {
	W, B   float64
	Scores map[string]float64
}

// train trains the way examples/linear/main.go does: 1000 examples, batches
// of 100 shuffled with seed 1, SGD 0.5, BatchMean, to step 400.
func train(t *testing.T, n int) (trained, *estimator.Estimator) {
	t.Helper()
	mdl := replicate.ModelFn(linreg.Model,
		replicate.Config{Devices: towers.CPUs(n), Optimizer: optimizers.SGD(0.5), Reduction: replicate.BatchMean})
	est, err := estimator.New(mdl, estimator.RunConfig{Seed: 1, LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { est.Close() })
	features, labels := linreg.Data(1000, 1)
	in, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 100, Epochs: estimator.Forever, Shuffle: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := est.Train(ctx, in, estimator.MaxSteps(400)); err != nil {
		t.Fatal(err)
	}
	eval, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	var r trained
	if r.Scores, err = est.Evaluate(ctx, eval); err != nil {
		t.Fatal(err)
	}
	w, err := est.VariableValue("w")
	if err != nil {
		t.Fatal(err)
	}
	b, err := est.VariableValue("b")
	if err != nil {
		t.Fatal(err)
	}
	r.W, r.B = w.Data().(float64), b.Data().(float64)
	return r, est
}

func TestTrainLearnsTheLine(t *testing.T) {
	one, _ := train(t, 1)
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d towers", n), func(t *testing.T) {
			got := one
			if n > 1 {
				got, _ = train(t, n)
				// BatchMean: N towers train exactly like one device.
				if diff := cmp.Diff(one, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) <= 1e-12 })); diff != "" {
					t.Errorf("%d towers differ from one (-one +towers):\n%s", n, diff)
				}
			}
			if math.Abs(got.W-linreg.TrueW) > 0.01 || math.Abs(got.B-linreg.TrueB) > 0.01 {
				t.Errorf("w=%v b=%v, want within 0.01 of %v, %v", got.W, got.B, linreg.TrueW, linreg.TrueB)
			}
			if got.Scores["global_step"] != 400 {
				t.Errorf("global_step %v, want 400", got.Scores["global_step"])
			}
			if got.Scores["mean_abs_error"] > 0.01 || got.Scores["loss"] > 1e-4 {
				t.Errorf("scores %v, want a near-zero error", got.Scores)
			}
		})
	}
}

func TestPredictAfterTraining(t *testing.T) {
	_, est := train(t, 2)
	xs := []float64{0, 0.25, 0.5, 1, 2}
	in, err := estimator.FromTensors(map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(len(xs), 1), tensor.WithBacking(xs))}, nil, estimator.TensorInput{BatchSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for out, err := range est.PredictBatches(context.Background(), in) {
		if err != nil {
			t.Fatal(err)
		}
		y := out.Predictions["y"].Data().([]float64)
		reg := out.ExportOutputs[model.DefaultServingSignature]["outputs"].Data().([]float64)
		if diff := cmp.Diff(y, reg); diff != "" {
			t.Errorf("regression output differs from prediction y (-y +outputs):\n%s", diff)
		}
		for _, v := range y {
			if want := linreg.TrueW*xs[i] + linreg.TrueB; math.Abs(v-want) > 0.02 {
				t.Errorf("x=%v: y=%v, want about %v", xs[i], v, want)
			}
			i++
		}
	}
	if i != len(xs) {
		t.Errorf("%d predictions, want %d", i, len(xs))
	}
}

func TestData(t *testing.T) {
	f, l := linreg.Data(50, 3)
	again, _ := linreg.Data(50, 3)
	other, _ := linreg.Data(50, 4)
	x, y := f["x"].Data().([]float64), l["y"].Data().([]float64)
	if diff := cmp.Diff([]int{50, 1}, []int(f["x"].Shape())); diff != "" {
		t.Errorf("x shape (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{50, 1}, []int(l["y"].Shape())); diff != "" {
		t.Errorf("y shape (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(x, again["x"].Data()); diff != "" {
		t.Errorf("same seed, different data (-first +second):\n%s", diff)
	}
	if cmp.Equal(x, other["x"].Data()) {
		t.Error("seeds 3 and 4 gave the same data")
	}
	for i := range x {
		if x[i] < 0 || x[i] >= 1 {
			t.Errorf("x[%d] = %v, outside [0, 1)", i, x[i])
		}
		if want := linreg.TrueW*x[i] + linreg.TrueB; y[i] != want {
			t.Errorf("y[%d] = %v, want %v", i, y[i], want)
		}
	}
}

func TestModelErrors(t *testing.T) {
	x := map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(2, 1), tensor.WithBacking([]float64{1, 2}))}
	z := map[string]*tensor.Dense{"z": tensor.New(tensor.WithShape(2, 1), tensor.WithBacking([]float64{1, 2}))}
	tests := []struct {
		name           string
		model          *replicate.Model
		features, labs map[string]*tensor.Dense
		want           []string
	}{
		{"feature x missing", replicate.ModelFn(linreg.Model, replicate.Config{Devices: towers.CPUs(1), Optimizer: optimizers.SGD(0.5)}), z, x, []string{"tower 0", `feature "x" is not in the batch, which has features ["z"]`}},
		{"label y missing", replicate.ModelFn(linreg.Model, replicate.Config{Devices: towers.CPUs(2), Optimizer: optimizers.SGD(0.5)}), x, z, []string{"tower 0", `label "y" is not in the batch, which has labels ["z"]`}},
		{"no optimizer on one device", replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), x, map[string]*tensor.Dense{"y": x["x"]}, []string{"no train ops", "optimizer"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est, err := estimator.New(tc.model, estimator.RunConfig{LogEvery: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer est.Close()
			in, err := estimator.FromTensors(tc.features, tc.labs, estimator.TensorInput{BatchSize: 2})
			if err != nil {
				t.Fatal(err)
			}
			err = est.Train(context.Background(), in, estimator.Steps(1))
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}
