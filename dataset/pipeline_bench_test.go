package dataset_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

const benchWidth = 32

// benchMLP is a small float32 network, 32 inputs, 64 tanh units, one
// output, with a mean squared error loss.
func benchMLP(t *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
	w1 := t.MustVariable("hidden/w", tensor.Float32, tensor.Shape{benchWidth, 64}, towers.GlorotUniform())
	b1 := t.MustVariable("hidden/b", tensor.Float32, tensor.Shape{64}, towers.Zeros())
	w2 := t.MustVariable("out/w", tensor.Float32, tensor.Shape{64, 1}, towers.GlorotUniform())
	h := G.Must(G.Tanh(G.Must(G.BroadcastAdd(G.Must(G.Mul(f["x"], w1)), b1, nil, []byte{0}))))
	y := G.Must(G.Mul(h, w2))
	spec := &model.Spec{Predictions: map[string]*G.Node{"y": y}}
	if mode == model.Predict {
		return spec, nil
	}
	spec.Loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(y, l["y"]))))))
	spec.TrainOps = []model.TrainOp{{Optimizer: optimizers.SGD(0.01)}}
	return spec, nil
}

// waitClock is a hook that times, between one step's AfterStep and the
// next one's BeforeStep, what the run loop does between steps: mostly
// waiting for the input's next batch.
type waitClock struct {
	estimator.BaseHook
	after       time.Time
	wait, total time.Duration
	steps       int
}

func (h *waitClock) BeforeStep(context.Context, int64) (estimator.StepRequest, error) {
	if !h.after.IsZero() {
		h.wait += time.Since(h.after)
	}
	return estimator.StepRequest{}, nil
}

func (h *waitClock) AfterStep(context.Context, estimator.StepResult) (bool, error) {
	now := time.Now()
	if !h.after.IsZero() {
		h.total += now.Sub(h.after)
		h.steps++
	}
	h.after = now
	return false, nil
}

// BenchmarkTrainFromFiles trains the small MLP on two towers for 300
// steps of 256 records from a generated TFRecord file of 50000 records,
// read by a Pipeline (shuffle buffer 4096, one parse worker, 4 batches
// ahead), against the same rows in memory (FromTensors). It reports the
// share of the step time spent between steps, waiting for input
// (%wait), and the time a step:
//
//	go test -run '^$' -bench '^BenchmarkTrainFromFiles$' -benchtime 1x ./dataset
func BenchmarkTrainFromFiles(b *testing.B) {
	const rows, batch, steps = 50000, 256, 300
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, rows*benchWidth)
	y := make([]float32, rows)
	path := filepath.Join(b.TempDir(), "train.tfrecord")
	w, err := dataset.CreateRecords(path, "")
	if err != nil {
		b.Fatal(err)
	}
	for i := range rows {
		row := x[i*benchWidth : (i+1)*benchWidth]
		for j := range row {
			row[j] = rng.Float32()*2 - 1
		}
		y[i] = row[0] - 0.5*row[1]*row[2]
		if err := w.WriteExample(dataset.Example{"x": {Floats: row}, "y": {Floats: []float32{y[i]}}}); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	inputs := []struct {
		name string
		make func() (estimator.InputFn, error)
	}{
		{"files", func() (estimator.InputFn, error) {
			return dataset.Pipeline{
				Files: []string{path},
				Spec: map[string]dataset.FeatureSpec{
					"x": {Dtype: tensor.Float32, Shape: []int{benchWidth}},
					"y": {Dtype: tensor.Float32, Shape: []int{1}, Label: true},
				},
				BatchSize: batch, Epochs: estimator.Forever, ShuffleBuffer: 4096, Seed: 1, Workers: 1, Prefetch: 4,
			}.Input()
		}},
		{"tensors", func() (estimator.InputFn, error) {
			return estimator.FromTensors(
				map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(rows, benchWidth), tensor.WithBacking(x))},
				map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(rows, 1), tensor.WithBacking(y))},
				estimator.TensorInput{BatchSize: batch, Epochs: estimator.Forever, Shuffle: true, Seed: 1})
		}},
	}
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			var clock waitClock
			for range b.N {
				input, err := in.make()
				if err != nil {
					b.Fatal(err)
				}
				est, err := estimator.New(replicate.ModelFn(benchMLP, replicate.Config{
					Devices: []towers.Device{towers.CPU(0), towers.CPU(1)}, Reduction: replicate.BatchMean,
				}), estimator.RunConfig{Seed: 1, LogEvery: -1})
				if err != nil {
					b.Fatal(err)
				}
				clock.after = time.Time{}
				if err := est.Train(context.Background(), input, estimator.Steps(steps), estimator.Hooks(&clock)); err != nil {
					b.Fatal(err)
				}
				est.Close()
			}
			b.ReportMetric(100*clock.wait.Seconds()/clock.total.Seconds(), "%wait")
			b.ReportMetric(float64(clock.total.Microseconds())/float64(clock.steps), "µs/step")
		})
	}
}
