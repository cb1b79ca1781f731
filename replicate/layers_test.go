package replicate_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/towerflow/towerflow/internal/vartest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// convNet is a small convolutional network written with package layers,
// of dtype dt: conv 3×3×filters (same padding, bias, ReLU) on 1-channel
// images → max-pool 2 → dense 1, mean squared error; with a train op of
// opt when opt is not nil (else the Config's optimizer trains it).
func convNet(dt tensor.Dtype, filters int, opt optimizers.Optimizer) model.Fn {
	return func(t *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, _ model.Params) (*model.Spec, error) {
		x := features["x"]
		flatDim := filters * (x.Shape()[2] / 2) * (x.Shape()[3] / 2)
		k := t.MustVariable("conv/kernel", dt, tensor.Shape{filters, 1, 3, 3}, towers.GlorotUniform())
		b := t.MustVariable("conv/bias", dt, tensor.Shape{filters}, towers.RandomUniform(-0.1, 0.1))
		w := t.MustVariable("out/kernel", dt, tensor.Shape{flatDim, 1}, towers.GlorotUniform())
		c, err := layers.Conv2D(x, k, b, layers.Conv{Padding: [2]int{1, 1}, Activation: layers.ReLU})
		if err != nil {
			return nil, err
		}
		p, err := layers.MaxPool2D(c, [2]int{2, 2}, [2]int{})
		if err != nil {
			return nil, err
		}
		flat, err := G.Reshape(p, tensor.Shape{x.Shape()[0], flatDim})
		if err != nil {
			return nil, err
		}
		y, err := layers.Dense(flat, w, nil, layers.Linear)
		if err != nil {
			return nil, err
		}
		spec := &model.Spec{Predictions: map[string]*G.Node{"y": y}}
		if mode == model.Predict {
			return spec, nil
		}
		if spec.Loss, err = layers.MeanSquaredError(y, labels["y"]); err != nil {
			return nil, err
		}
		if opt != nil {
			spec.TrainOps = []model.TrainOp{{Optimizer: opt}}
		}
		return spec, nil
	}
}

// TestCNNTowersEqualOneDevice: the layers' convolution and pooling ops
// (which keep outputs and pooling positions between runs, per tower) train
// the same on N towers as on one device, on uneven shards too.
func TestCNNTowersEqualOneDevice(t *testing.T) {
	const rows = 24
	r := rand.New(rand.NewPCG(3, 4))
	xs, ys := make([]float64, rows*36), make([]float64, rows)
	for i := range xs {
		xs[i] = r.NormFloat64()
	}
	for i := range ys {
		ys[i] = xs[36*i+7] - xs[36*i+20]
	}
	feats := map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{rows, 1, 6, 6}, xs)}
	labels := map[string]*tensor.Dense{"y": numeric.Over(tensor.Shape{rows, 1}, ys)}
	train := func(mdl *replicate.Model) map[string][]float64 {
		est, err := estimator.New(mdl, estimator.RunConfig{Seed: 5, LogEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer est.Close()
		in, err := estimator.FromTensors(feats, labels, estimator.TensorInput{BatchSize: 7, Epochs: estimator.Forever})
		if err != nil {
			t.Fatal(err)
		}
		if err := est.Train(context.Background(), in, estimator.Steps(8)); err != nil {
			t.Fatal(err)
		}
		return vartest.Variables(t, est)
	}
	want := train(replicate.ModelFn(convNet(tensor.Float64, 3, optimizers.SGD(0.05)), replicate.Config{Devices: []towers.Device{towers.CPU(0)}}))
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("towers%d", n), func(t *testing.T) {
			got := train(replicate.ModelFn(convNet(tensor.Float64, 3, optimizers.SGD(0.05)), replicate.Config{Devices: towers.CPUs(n), Reduction: replicate.BatchMean}))
			if diff := cmp.Diff(want, got, cmpopts.EquateApprox(1e-12, 1e-12)); diff != "" {
				t.Errorf("%d towers differ from one device (-one +towers):\n%s", n, diff)
			}
		})
	}
}
