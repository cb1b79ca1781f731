package estimator

import (
	"context"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/towers"
)

// TestBuildsAreBounded: predicting with many batch sizes keeps at most
// maxBuilds sets of towers, and evicted sizes build again when they return.
func TestBuildsAreBounded(t *testing.T) {
	model := func(tw *towers.Tower, _ Mode, f, _ map[string]*G.Node, _ Params) (*Spec, error) {
		c := tw.MustVariable("c", tensor.Float64, nil, towers.Constant(2))
		return &Spec{Predictions: map[string]*G.Node{"y": G.Must(G.Mul(f["x"], c))}}, nil
	}
	est, err := New(ModelFn(model), RunConfig{LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, rows := range append([]int{1}, seq(2, maxBuilds+10)...) {
		b := Batch{Features: map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{rows, 1}, make([]float64, rows))}}
		if _, _, err := est.eng.predictStep(context.Background(), b); err != nil {
			t.Fatalf("%d rows: %v", rows, err)
		}
		if n := len(est.eng.builds); n > maxBuilds {
			t.Fatalf("%d builds kept, at most %d allowed", n, maxBuilds)
		}
	}
	if _, ok := est.eng.builds[signature(Predict, []Batch{{Features: map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{1, 1}, []float64{0})}}})]; ok {
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
	model := func(tw *towers.Tower, _ Mode, f, l map[string]*G.Node, _ Params) (*Spec, error) {
		w := tw.MustVariable("w", tensor.Float64, tensor.Shape{2, 1}, towers.Constant(0.5))
		pred := G.Must(G.Mul(f["x"], w))
		loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, l["y"]))))))
		return &Spec{Predictions: map[string]*G.Node{"y": pred}, Loss: loss}, nil
	}
	batch := func() Batch {
		return Batch{
			Features: map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{4, 2}, []float64{1, 2, 3, 4, 5, 6, 7, 8})},
			Labels:   map[string]*tensor.Dense{"y": numeric.Over(tensor.Shape{4, 1}, make([]float64, 4))},
		}
	}
	for _, c := range []struct {
		name   string
		second func(first Batch, e *engine) Batch // what the second prepare gets
		reuse  bool
	}{
		{"same batch", func(first Batch, _ *engine) Batch { return first }, true},
		{"same batch, new values", func(first Batch, _ *engine) Batch {
			first.Features["x"].Data().([]float64)[0] = 9
			return first
		}, true},
		{"other tensors", func(Batch, *engine) Batch { return batch() }, false},
		{"a shard reshaped in place", func(first Batch, e *engine) Batch {
			s, _ := e.splits.lookup(Eval, first)
			if err := s.shards[0].Features["x"].Reshape(4); err != nil {
				t.Fatal(err)
			}
			return first
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			est, err := New(ModelFn(model), RunConfig{LogEvery: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer est.Close()
			e := est.eng
			e.rep.Devices = []towers.Device{towers.CPU(0), towers.CPU(1)}
			first := batch()
			if _, err := e.prepare(Eval, first); err != nil {
				t.Fatal(err)
			}
			was, _ := e.splits.lookup(Eval, first)
			wasShard := was.shards[1].Features["x"]
			second := c.second(first, e)
			b, err := e.prepare(Eval, second)
			if err != nil {
				t.Fatal(err)
			}
			now, ok := e.splits.lookup(Eval, second)
			if !ok {
				t.Fatal("no split remembered for the second batch")
			}
			if reused := now.shards[1].Features["x"] == wasShard; reused != c.reuse {
				t.Errorf("shards reused: %v, want %v", reused, c.reuse)
			}
			if err := towers.RunAll(context.Background(), b.towers, (*towers.Tower).Run); err != nil {
				t.Fatal(err)
			}
		})
	}
}
