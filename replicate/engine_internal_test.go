package replicate

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/google/go-cmp/cmp"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/tower"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// TestBuildsAreBounded: predicting with many batch sizes keeps at most
// maxBuilds sets of towers, and evicted sizes build again when they return.
func TestBuildsAreBounded(t *testing.T) {
	fn := func(tw *towers.Scope, _ model.Mode, f model.Features, _ model.Labels, _ model.Params) (*model.Spec, error) {
		c := tw.MustVariable("c", tensor.Float64, nil, towers.Constant(2))
		return &model.Spec{Predictions: map[string]*G.Node{"y": G.Must(G.Mul(f["x"], c))}}, nil
	}
	e, err := NewEngine(ModelFn(fn, Config{Devices: []towers.Device{towers.CPU(0)}}), EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, rows := range append([]int{1}, seq(2, maxBuilds+10)...) {
		b := sharding.Batch{Features: map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{rows, 1}, make([]float64, rows))}}
		if _, err := e.PredictStep(context.Background(), b); err != nil {
			t.Fatalf("%d rows: %v", rows, err)
		}
		if n := len(e.builds); n > maxBuilds {
			t.Fatalf("%d builds kept, at most %d allowed", n, maxBuilds)
		}
	}
	if _, ok := e.builds[signature(model.Predict, []sharding.Batch{{Features: map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{1, 1}, []float64{0})}}})]; ok {
		t.Errorf("the least recently used build (1 row) was not evicted")
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// TestPrepareReusesShards: a batch prepared again (the same tensors over
// the same memory, as FromTensors hands out after Release) is fed as it was
// split the first time; a batch of other tensors, or whose shard header an
// op reshaped in place, is split afresh. The towers run either way (a
// reshaped header fed again would fail the run).
func TestPrepareReusesShards(t *testing.T) {
	fn := func(tw *towers.Scope, _ model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
		w := tw.MustVariable("w", tensor.Float64, tensor.Shape{2, 1}, towers.Constant(0.5))
		pred := G.Must(G.Mul(f["x"], w))
		loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, l["y"]))))))
		return &model.Spec{Predictions: map[string]*G.Node{"y": pred}, Loss: loss}, nil
	}
	batch := func() sharding.Batch {
		return sharding.Batch{
			Features: map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{4, 2}, []float64{1, 2, 3, 4, 5, 6, 7, 8})},
			Labels:   map[string]*tensor.Dense{"y": numeric.Over(tensor.Shape{4, 1}, make([]float64, 4))},
		}
	}
	for _, c := range []struct {
		name   string
		second func(first sharding.Batch, e *Engine) sharding.Batch // what the second prepare gets
		reuse  bool
	}{
		{"same batch", func(first sharding.Batch, _ *Engine) sharding.Batch { return first }, true},
		{"same batch, new values", func(first sharding.Batch, _ *Engine) sharding.Batch {
			first.Features["x"].Data().([]float64)[0] = 9
			return first
		}, true},
		{"other tensors", func(sharding.Batch, *Engine) sharding.Batch { return batch() }, false},
		{"a shard reshaped in place", func(first sharding.Batch, e *Engine) sharding.Batch {
			s, _ := e.splits.lookup(model.Eval, first)
			if err := s.shards[0].Features["x"].Reshape(4); err != nil {
				t.Fatal(err)
			}
			return first
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := NewEngine(ModelFn(fn, Config{Devices: []towers.Device{towers.CPU(0), towers.CPU(1)}}), EngineConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			first := batch()
			if _, err := e.prepare(model.Eval, first); err != nil {
				t.Fatal(err)
			}
			was, _ := e.splits.lookup(model.Eval, first)
			wasShard := was.shards[1].Features["x"]
			second := c.second(first, e)
			b, err := e.prepare(model.Eval, second)
			if err != nil {
				t.Fatal(err)
			}
			now, ok := e.splits.lookup(model.Eval, second)
			if !ok {
				t.Fatal("no split remembered for the second batch")
			}
			if reused := now.shards[1].Features["x"] == wasShard; reused != c.reuse {
				t.Errorf("shards reused: %v, want %v", reused, c.reuse)
			}
			if err := tower.RunAll(context.Background(), b.towers, (*tower.Tower).Run); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestBuildRefusesMismatchedRestore: a build whose model asks for a
// variable restored from a checkpoint (VarSpec.From) with another shape is
// refused, with the variable named, and so is the next one, until a
// checkpoint of the model's shape is restored.
func TestBuildRefusesMismatchedRestore(t *testing.T) {
	fn := func(tw *towers.Scope, _ model.Mode, f model.Features, _ model.Labels, _ model.Params) (*model.Spec, error) {
		c := tw.MustVariable("c", tensor.Float64, tensor.Shape{1}, towers.Constant(2))
		return &model.Spec{Predictions: map[string]*G.Node{"y": G.Must(G.Mul(f["x"], c))}}, nil
	}
	e, err := NewEngine(ModelFn(fn, Config{Devices: []towers.Device{towers.CPU(0)}}), EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, _, err := e.Store().GetOrCreate(towers.VarSpec{Name: "c", Dtype: tensor.Float64, Shape: tensor.Shape{3}, From: "ckpt-7"}); err != nil {
		t.Fatal(err)
	}
	b := sharding.Batch{Features: map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{2, 1}, []float64{1, 2})}}
	_, err = e.PredictStep(context.Background(), b)
	want := `predict: replicate: the model's variables do not match the checkpoint restored: variable "c" has shape [1] dtype float64 in the model but shape [3] dtype float64 in checkpoint ckpt-7`
	if err == nil || err.Error() != want {
		t.Fatalf("PredictStep = %v, want %q", err, want)
	}
	if _, err = e.PredictStep(context.Background(), b); err == nil || err.Error() != want {
		t.Fatalf("PredictStep again = %v, want %q", err, want)
	}
	if _, _, err := e.Store().GetOrCreate(towers.VarSpec{Name: "c", Dtype: tensor.Float64, Shape: tensor.Shape{1}, From: "ckpt-8"}); err != nil {
		t.Fatal(err)
	}
	e.Store().Restored("c") // as checkpoint.Reader.Restore says once it has read the value
	if _, err := e.PredictStep(context.Background(), b); err != nil {
		t.Errorf("PredictStep after a checkpoint that fits: %v", err)
	}
}

// TestMismatchRefusesCachedBuilds: once a Predict build has met a restored
// variable of another shape, the Train build made before it is refused
// too, and so is applying gradients; nothing changes the variables.
func TestMismatchRefusesCachedBuilds(t *testing.T) {
	fn := func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
		w := tw.MustVariable("w", tensor.Float64, tensor.Shape{1, 1}, towers.Constant(2))
		y := G.Must(G.Mul(f["x"], w))
		if mode == model.Predict {
			s := tw.MustVariable("stat", tensor.Float64, tensor.Shape{2}, towers.Constant(7), towers.NotTrainable())
			y = G.Must(G.Add(y, G.Must(G.Sum(s))))
			return &model.Spec{Predictions: map[string]*G.Node{"y": y}}, nil
		}
		loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(y, l["y"]))))))
		return &model.Spec{Loss: loss, Predictions: map[string]*G.Node{"y": y}}, nil
	}
	e, err := NewEngine(ModelFn(fn, Config{Devices: []towers.Device{towers.CPU(0)}, Optimizer: optimizers.SGD(0.1)}), EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, _, err := e.Store().GetOrCreate(towers.VarSpec{Name: "stat", Dtype: tensor.Float64, Shape: tensor.Shape{3}, From: "ckpt-7"}); err != nil {
		t.Fatal(err)
	}
	x := numeric.Over(tensor.Shape{2, 1}, []float64{1, 2})
	train := sharding.Batch{Features: map[string]*tensor.Dense{"x": x}, Labels: map[string]*tensor.Dense{"y": numeric.Over(tensor.Shape{2, 1}, []float64{1, 1})}}
	_, grads, err := e.ComputeGradients(context.Background(), train, StepHooks{}) // the Train build, cached
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.Store().Lookup("w")
	if err != nil {
		t.Fatal(err)
	}
	before := slices.Clone(w.Data().([]float64))
	why := `variable "stat" has shape [2] dtype float64 in the model but shape [3] dtype float64 in checkpoint ckpt-7`
	_, err = e.PredictStep(context.Background(), sharding.Batch{Features: map[string]*tensor.Dense{"x": x}})
	type got struct{ Predict, Train, Apply bool }
	g := got{Predict: err != nil && strings.Contains(err.Error(), why)}
	_, err = e.TrainStep(context.Background(), train, StepHooks{})
	g.Train = err != nil && strings.Contains(err.Error(), why)
	err = e.ApplyGradients(context.Background(), grads)
	g.Apply = err != nil && strings.Contains(err.Error(), why)
	if diff := cmp.Diff(got{true, true, true}, g); diff != "" {
		t.Errorf("refused (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, w.Data()); diff != "" {
		t.Errorf("w changed (-before +after):\n%s", diff)
	}
}

// TestEvictionKeepsTheLatestTrainBuild: predicting with many batch sizes
// after a training step evicts older builds but not the training one,
// whose plans applying gradients reads.
func TestEvictionKeepsTheLatestTrainBuild(t *testing.T) {
	fn := func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
		w := tw.MustVariable("w", tensor.Float64, tensor.Shape{1, 1}, towers.Constant(2))
		y := G.Must(G.Mul(f["x"], w))
		spec := &model.Spec{Predictions: map[string]*G.Node{"y": y}}
		if mode != model.Predict {
			spec.Loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(y, l["y"]))))))
		}
		return spec, nil
	}
	e, err := NewEngine(ModelFn(fn, Config{Devices: []towers.Device{towers.CPU(0)}, Optimizer: optimizers.SGD(0.1)}), EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	train := sharding.Batch{Features: map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{2, 1}, []float64{1, 2})},
		Labels: map[string]*tensor.Dense{"y": numeric.Over(tensor.Shape{2, 1}, []float64{1, 1})}}
	_, grads, err := e.ComputeGradients(context.Background(), train, StepHooks{})
	if err != nil {
		t.Fatal(err)
	}
	for rows := 1; rows <= maxBuilds+5; rows++ {
		b := sharding.Batch{Features: map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{rows, 1}, make([]float64, rows))}}
		if _, err := e.PredictStep(context.Background(), b); err != nil {
			t.Fatalf("%d rows: %v", rows, err)
		}
	}
	kept := slices.ContainsFunc(slices.Collect(maps.Values(e.builds)), func(b *build) bool { return b == e.last })
	if diff := cmp.Diff(true, kept); diff != "" {
		t.Errorf("the latest training build kept (-want +got):\n%s", diff)
	}
	if err := e.ApplyGradients(context.Background(), grads); err != nil {
		t.Errorf("applying gradients after the predictions: %v", err)
	}
}
