//go:build !race

// The race detector makes sync.Pool (which gorgonia's tensors borrow shapes
// from) drop items at random, so allocation counts are only compared
// without it.

package replicate

import (
	"context"
	"fmt"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// TestTrainStepAllocationsDoNotGrowWithTheModel: a training step of two
// towers allocates as many times for a hidden layer of 4096 units (64
// chunks of gradient to sum and update) as for one of 512 (8 chunks): the
// replication layer allocates nothing per chunk, and nothing that grows
// with the variables' size.
func TestTrainStepAllocationsDoNotGrowWithTheModel(t *testing.T) {
	allocs := map[int]float64{}
	for _, hidden := range []int{512, 4096} {
		t.Run(fmt.Sprint(hidden), func(t *testing.T) {
			fn := func(tw *towers.Scope, _ model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
				w1 := tw.MustVariable("w1", tensor.Float32, tensor.Shape{256, hidden}, towers.GlorotUniform())
				b1 := tw.MustVariable("b1", tensor.Float32, tensor.Shape{hidden}, towers.Zeros())
				w2 := tw.MustVariable("w2", tensor.Float32, tensor.Shape{hidden, 10}, towers.GlorotUniform())
				b2 := tw.MustVariable("b2", tensor.Float32, tensor.Shape{10}, towers.Zeros())
				h := G.Must(layers.Dense(f["x"], w1, b1, layers.ReLU))
				p := G.Must(layers.Dense(h, w2, b2, layers.Linear))
				return &model.Spec{Loss: G.Must(layers.MeanSquaredError(p, l["y"]))}, nil
			}
			e, err := NewEngine(ModelFn(fn, Config{Devices: []towers.Device{towers.CPU(0), towers.CPU(1)}, Optimizer: optimizers.SGD(0.01)}), EngineConfig{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			batch := sharding.Batch{
				Features: map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{64, 256}, make([]float32, 64*256))},
				Labels:   map[string]*tensor.Dense{"y": numeric.Over(tensor.Shape{64, 10}, make([]float32, 64*10))},
			}
			step := func() {
				if _, err := e.TrainStep(context.Background(), batch, StepHooks{}); err != nil {
					t.Fatal(err)
				}
			}
			step() // build the towers
			allocs[hidden] = testing.AllocsPerRun(10, step)
		})
	}
	if allocs[4096] > allocs[512] {
		t.Errorf("a step allocates %v times with 4096 hidden units, %v with 512", allocs[4096], allocs[512])
	}
}

// TestClippingAllocatesNothing: a training step that clips its gradients
// by global norm and by value allocates as often as one that does not.
func TestClippingAllocatesNothing(t *testing.T) {
	allocs := map[bool]float64{}
	for _, clip := range []bool{false, true} {
		fn := func(tw *towers.Scope, _ model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
			w := tw.MustVariable("w", tensor.Float32, tensor.Shape{64, 10}, towers.GlorotUniform())
			b := tw.MustVariable("b", tensor.Float32, tensor.Shape{10}, towers.Zeros())
			p := G.Must(layers.Dense(f["x"], w, b, layers.Linear))
			return &model.Spec{Loss: G.Must(layers.MeanSquaredError(p, l["y"]))}, nil
		}
		cfg := Config{Devices: []towers.Device{towers.CPU(0), towers.CPU(1)}, Optimizer: optimizers.SGD(0.01)}
		if clip {
			cfg.Clip = model.Clip{GlobalNorm: 1e-3, Value: 1e-4}
		}
		e, err := NewEngine(ModelFn(fn, cfg), EngineConfig{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		x, y := make([]float32, 32*64), make([]float32, 32*10)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		batch := sharding.Batch{
			Features: map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{32, 64}, x)},
			Labels:   map[string]*tensor.Dense{"y": numeric.Over(tensor.Shape{32, 10}, y)},
		}
		step := func() {
			if _, err := e.TrainStep(context.Background(), batch, StepHooks{}); err != nil {
				t.Fatal(err)
			}
		}
		step()
		if _, ok := e.GradientNorm(); ok != clip {
			t.Fatalf("clip %t: GradientNorm ok %t", clip, ok)
		}
		allocs[clip] = testing.AllocsPerRun(10, step)
	}
	t.Logf("allocations per step of 2 towers: %v clipping, %v not", allocs[true], allocs[false])
	if allocs[true] > allocs[false] {
		t.Errorf("a step that clips allocates %v times, one that does not %v", allocs[true], allocs[false])
	}
}
