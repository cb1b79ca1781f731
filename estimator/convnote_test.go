package estimator_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/dnnl"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// convModel convolves a (N, 1, 4, 4) image of dtype dt with a 3×3 kernel,
// or multiplies it by a scalar without conv.
func convModel(dt tensor.Dtype, conv bool) model.Fn {
	return func(s *towers.Scope, mode model.Mode, f model.Features, _ model.Labels, _ model.Params) (*model.Spec, error) {
		var pred *G.Node
		if conv {
			k := s.MustVariable("k", dt, tensor.Shape{2, 1, 3, 3}, towers.Constant(0.1))
			var err error
			if pred, err = layers.Conv2D(f["x"], k, nil, layers.Conv{}); err != nil {
				return nil, err
			}
		} else {
			c := s.MustVariable("c", dt, tensor.Shape{1, 1, 1, 1}, towers.Constant(0.1))
			pred = G.Must(G.BroadcastHadamardProd(f["x"], c, nil, []byte{0, 1, 2, 3}))
		}
		return &model.Spec{
			Predictions: map[string]*G.Node{"pred": pred},
			Loss:        G.Must(G.Mean(G.Must(G.Square(pred)))),
			TrainOps:    []model.TrainOp{{Optimizer: optimizers.SGD(0.01)}},
		}, nil
	}
}

// imageInput yields batches of batch (1, 4, 4) images of dtype dt.
func imageInput(t *testing.T, dt tensor.Dtype, rows, batch int) estimator.InputFn {
	t.Helper()
	x := tensor.New(tensor.WithShape(rows, 1, 4, 4), tensor.Of(dt))
	in, err := estimator.FromTensors(map[string]*tensor.Dense{"x": x}, nil, estimator.TensorInput{BatchSize: batch, Epochs: estimator.Forever})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestSlowConvolutionsNote: training a float32 convolution in a build
// without oneDNN logs SlowConvolutionsNote once, through the caller's
// logger, whatever the number of runs and builds; a build with oneDNN, a
// float64 convolution, a model without one, or evaluation alone, never.
func TestSlowConvolutionsNote(t *testing.T) {
	once := 1
	if dnnl.Built {
		once = 0
	}
	tests := []struct {
		name  string
		dt    tensor.Dtype
		conv  bool
		train bool
		want  int
	}{
		{"float32 convolution", tensor.Float32, true, true, once},
		{"evaluated only", tensor.Float32, true, false, 0},
		{"float64 convolution", tensor.Float64, true, true, 0},
		{"no convolution", tensor.Float32, false, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logged strings.Builder
			est, err := estimator.New(replicate.ModelFn(convModel(tc.dt, tc.conv), replicate.Config{Devices: []towers.Device{towers.CPU(0)}}),
				estimator.RunConfig{LogEvery: -1, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer est.Close()
			ctx := context.Background()
			for _, batch := range []int{2, 3} { // two runs, each with its own build
				if tc.train {
					err = est.Train(ctx, imageInput(t, tc.dt, 6, batch), estimator.Steps(2))
				} else {
					_, err = est.Evaluate(ctx, imageInput(t, tc.dt, 6, batch), estimator.EvalSteps(1))
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			got := strings.Count(logged.String(), estimator.SlowConvolutionsNote)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("notes logged (-want +got):\n%s\nlog:\n%s", diff, logged.String())
			}
		})
	}
}
