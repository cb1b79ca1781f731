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

// bnModel: conv 3×3×4 → batch norm (+ReLU) → dense over the flattened map
// → batch norm over features → dense 1, mean squared error, momentum SGD.
func bnModel(perTower bool) model.Fn { return bnModelFormat(perTower, layers.NCHW, false) }

// bnModelFormat is bnModel with the first batch normalization in format:
// with NHWC the convolution's output is transposed to (N, H, W, C) for it.
// With residual, both add a side input (layers.BatchNormAdd): the first a
// 1×1 convolution of the images, the second another dense layer over the
// flattened map, with a ReLU.
func bnModelFormat(perTower bool, format layers.Format, residual bool) model.Fn {
	return func(s *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, _ model.Params) (*model.Spec, error) {
		x := features.Get("x")
		train := mode == model.Train
		k := s.MustVariable("conv/kernel", tensor.Float64, tensor.Shape{4, 1, 3, 3}, towers.GlorotUniform())
		c, err := layers.Conv2D(x, k, nil, layers.Conv{Padding: [2]int{1, 1}})
		if err != nil {
			return nil, err
		}
		if format == layers.NHWC {
			if c, err = G.Transpose(c, 0, 2, 3, 1); err != nil {
				return nil, err
			}
		}
		bn1 := layers.BatchNormConfig{Momentum: 0.9, Activation: layers.ReLU, PerTower: perTower, Format: format}
		var h *G.Node
		if residual {
			// The side input is the images, broadcast over the 4 channels
			// by a 1×1 convolution.
			k := s.MustVariable("side1/kernel", tensor.Float64, tensor.Shape{4, 1, 1, 1}, towers.GlorotUniform())
			side, err := layers.Conv2D(x, k, nil, layers.Conv{})
			if err == nil && format == layers.NHWC {
				side, err = G.Transpose(side, 0, 2, 3, 1)
			}
			if err != nil {
				return nil, err
			}
			h, err = layers.BatchNormAdd(s, "bn1", c, side, train, bn1)
			if err != nil {
				return nil, err
			}
		} else if h, err = layers.BatchNorm(s, "bn1", c, train, bn1); err != nil {
			return nil, err
		}
		flat, err := G.Reshape(h, tensor.Shape{x.Shape()[0], 4 * 16})
		if err != nil {
			return nil, err
		}
		w1 := s.MustVariable("d1/kernel", tensor.Float64, tensor.Shape{64, 5}, towers.GlorotUniform())
		d, err := layers.Dense(flat, w1, nil, layers.Linear)
		if err != nil {
			return nil, err
		}
		if residual {
			w := s.MustVariable("side/kernel", tensor.Float64, tensor.Shape{64, 5}, towers.GlorotUniform())
			side, err := layers.Dense(flat, w, nil, layers.Linear)
			if err != nil {
				return nil, err
			}
			d, err = layers.BatchNormAdd(s, "bn2", d, side, train, layers.BatchNormConfig{PerTower: perTower, Activation: layers.ReLU})
			if err != nil {
				return nil, err
			}
		} else if d, err = layers.BatchNorm(s, "bn2", d, train, layers.BatchNormConfig{PerTower: perTower}); err != nil {
			return nil, err
		}
		w2 := s.MustVariable("d2/kernel", tensor.Float64, tensor.Shape{5, 1}, towers.GlorotUniform())
		y, err := layers.Dense(d, w2, nil, layers.Linear)
		if err != nil {
			return nil, err
		}
		spec := &model.Spec{Predictions: map[string]*G.Node{"y": y}}
		if mode == model.Predict {
			return spec, nil
		}
		spec.Loss, err = layers.MeanSquaredError(y, labels.Get("y"))
		spec.TrainOps = []model.TrainOp{{Optimizer: optimizers.Momentum(0.05, 0.9)}}
		return spec, err
	}
}

// TestBatchNormTowersEqualOneDevice: with batch normalization synchronized
// over the towers (the default), N towers on uneven shards train exactly
// like one device on the whole batch, moving statistics included, also
// when an epoch's last batch has fewer rows than towers (batches of 11:
// 11, 11, 1); per tower (PerTower), each shard is normalized with its own
// statistics, and training differs from one device's. Images are
// normalized channels first (NCHW) and channels last (NHWC), and both
// normalizations also with a side input (BatchNormAdd), whose gradient
// reaches the sides' variables.
func TestBatchNormTowersEqualOneDevice(t *testing.T) {
	const rows = 23
	r := rand.New(rand.NewPCG(7, 8))
	xs, ys := make([]float64, rows*16), make([]float64, rows)
	for i := range xs {
		xs[i] = r.NormFloat64()*2 + 1
	}
	for i := range ys {
		ys[i] = xs[16*i+5] - xs[16*i+10]
	}
	feats := map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{rows, 1, 4, 4}, xs)}
	labels := map[string]*tensor.Dense{"y": numeric.Over(tensor.Shape{rows, 1}, ys)}
	train := func(fn model.Fn, n, batch int, steps ...int64) map[string][]float64 {
		est, err := estimator.New(replicate.ModelFn(fn, replicate.Config{Devices: towers.CPUs(n)}), estimator.RunConfig{Seed: 5, LogEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer est.Close()
		in, err := estimator.FromTensors(feats, labels, estimator.TensorInput{BatchSize: batch, Epochs: estimator.Forever})
		if err != nil {
			t.Fatal(err)
		}
		if err := est.Train(context.Background(), in, estimator.Steps(append(steps, 4)[0])); err != nil {
			t.Fatal(err)
		}
		return vartest.Variables(t, est)
	}
	for _, residual := range []bool{false, true} {
		for _, format := range []layers.Format{layers.NCHW, layers.NHWC} {
			name := format.String()
			if residual {
				name += "/residual"
			}
			for _, batch := range []int{rows, 11} {
				want := train(bnModelFormat(false, format, residual), 1, batch)
				if want["bn1/moving_mean"][0] == 0 || want["bn2/moving_variance"][0] == 1 {
					t.Fatalf("%s: moving statistics were not updated: %v", name, want)
				}
				if residual {
					one := train(bnModelFormat(false, format, residual), 1, batch, 1)
					for _, k := range []string{"side1/kernel", "side/kernel"} {
						if cmp.Equal(want[k], one[k]) {
							t.Fatalf("%s: %s is the same after 1 and 4 steps: no gradient reaches it", name, k)
						}
					}
				}
				for _, n := range []int{2, 3, 4} {
					t.Run(fmt.Sprintf("%s/synced/batch%d/towers%d", name, batch, n), func(t *testing.T) {
						got := train(bnModelFormat(false, format, residual), n, batch)
						if diff := cmp.Diff(want, got, cmpopts.EquateApprox(1e-9, 1e-12)); diff != "" {
							t.Errorf("%d towers differ from one device (-one +towers):\n%s", n, diff)
						}
					})
				}
			}
			t.Run(name+"/per tower", func(t *testing.T) {
				one := train(bnModelFormat(true, format, residual), 1, rows)
				got := train(bnModelFormat(true, format, residual), 3, rows)
				if cmp.Equal(one["d2/kernel"], got["d2/kernel"], cmpopts.EquateApprox(1e-9, 1e-12)) {
					t.Errorf("per-tower statistics trained exactly like one device: the option does nothing")
				}
			})
		}
	}
}
