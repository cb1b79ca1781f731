package replicate_test

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/towerflow/towerflow/internal/vartest"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// batchesOf is an input that yields bs once each.
func batchesOf(bs []sharding.Batch) estimator.InputFn {
	return func(context.Context) iter.Seq2[estimator.Batch, error] {
		return func(yield func(estimator.Batch, error) bool) {
			for _, b := range bs {
				if !yield(b, nil) {
					return
				}
			}
		}
	}
}

// mlpBatches are steps batches of rows rows of mlpData.
func mlpBatches(steps, rows int, dt tensor.Dtype) []sharding.Batch {
	var bs []sharding.Batch
	for i := range steps {
		f, l := mlpData(rows, dt, uint64(10+i))
		bs = append(bs, sharding.Batch{Features: f, Labels: l})
	}
	return bs
}

// TestComputeApplyEqualsTrain: computing a batch's gradients and applying
// them equals one Train step on it, bit for bit — every variable, optimizer
// slots and global step included — for SGD, Momentum and Adam, one to four
// towers on uneven shards, float32 and float64, by name or flat, and with
// state updates (batch norm's moving statistics, counters).
func TestComputeApplyEqualsTrain(t *testing.T) {
	opts := map[string]func() optimizers.Optimizer{
		"sgd":      func() optimizers.Optimizer { return optimizers.SGD(0.3) },
		"momentum": func() optimizers.Optimizer { return optimizers.Momentum(0.2, 0.9) },
		"adam":     func() optimizers.Optimizer { return optimizers.Adam(0.05) },
	}
	type tc struct {
		name    string
		fn      model.Fn
		towers  int
		params  model.Params
		batches []sharding.Batch
		flat    bool
		opt     func() optimizers.Optimizer // for a model without train ops
	}
	var tests []tc
	for _, opt := range []string{"sgd", "momentum", "adam"} {
		for n := 1; n <= 4; n++ {
			p := model.Params{"dtype": tensor.Float64, "opt": opts[opt]}
			tests = append(tests, tc{fmt.Sprintf("mlp/%s/towers%d", opt, n), mlpModel, n, p, mlpBatches(3, 7, tensor.Float64), n%2 == 0, nil})
		}
	}
	p32 := model.Params{"dtype": tensor.Float32, "opt": opts["adam"]}
	tests = append(tests,
		tc{"mlp/float32/towers3/flat", mlpModel, 3, p32, mlpBatches(3, 10, tensor.Float32), true, nil},
		tc{"mlp/float32/towers2", mlpModel, 2, p32, mlpBatches(3, 10, tensor.Float32), false, nil},
		tc{"batch norm/towers1", bnModel(false), 1, nil, bnBatches(3, 9), false, nil},
		tc{"batch norm/towers3", bnModel(false), 3, nil, bnBatches(3, 9), true, nil},
		tc{"counters/towers2", statefulModel, 2, nil, []sharding.Batch{stateBatch(5, 1), stateBatch(5, 2)}, false, opts["adam"]},
		tc{"scalar variables/towers2", scalarModel, 2, nil, []sharding.Batch{stateBatch(5, 1), stateBatch(5, 2)}, false, opts["momentum"]},
		tc{"scalar variables/towers2/flat", scalarModel, 2, nil, []sharding.Batch{stateBatch(5, 1), stateBatch(5, 2)}, true, opts["momentum"]},
	)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newEst := func() *estimator.Estimator {
				cfg := replicate.Config{Devices: towers.CPUs(tt.towers)}
				if tt.opt != nil {
					cfg.Optimizer = tt.opt()
				}
				est, err := estimator.New(replicate.ModelFn(tt.fn, cfg),
					estimator.RunConfig{Seed: 3, LogEvery: -1, Params: tt.params})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { est.Close() })
				return est
			}
			trained, stepped := newEst(), newEst()
			var losses, computed []float64
			err := trained.Train(ctx, batchesOf(tt.batches), estimator.OnStep(func(_ int64, loss float64) { losses = append(losses, loss) }))
			if err != nil {
				t.Fatal(err)
			}
			for i, b := range tt.batches {
				g, err := stepped.ComputeGradients(ctx, b)
				if err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
				computed = append(computed, g.Loss)
				if tt.flat {
					g.ByName = nil
				}
				if err := stepped.ApplyGradients(ctx, g); err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
			}
			if diff := cmp.Diff(losses, computed); diff != "" {
				t.Errorf("losses (-train +compute):\n%s", diff)
			}
			if diff := cmp.Diff(vartest.Variables(t, trained), vartest.Variables(t, stepped)); diff != "" {
				t.Errorf("variables (-train +compute/apply):\n%s", diff)
			}
		})
	}
}

// scalarModel is y = x·w + b with scalar w and b.
func scalarModel(s *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
	w := s.MustVariable("w", tensor.Float64, nil, towers.Constant(0.5))
	b := s.MustVariable("b", tensor.Float64, nil, towers.Constant(0.1))
	pred := G.Must(G.Add(G.Must(G.Mul(f.Get("x"), w)), b))
	spec := &model.Spec{Predictions: map[string]*G.Node{"y": pred}}
	if mode != model.Predict {
		spec.Loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, l.Get("y")))))))
	}
	return spec, nil
}

// bnBatches are steps batches of rows rows for bnModel.
func bnBatches(steps, rows int) []sharding.Batch {
	r := rand.New(rand.NewPCG(7, 8))
	var bs []sharding.Batch
	for range steps {
		xs, ys := make([]float64, rows*16), make([]float64, rows)
		for i := range xs {
			xs[i] = r.NormFloat64()*2 + 1
		}
		for i := range ys {
			ys[i] = xs[16*i+5] - xs[16*i+10]
		}
		bs = append(bs, sharding.Batch{
			Features: map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{rows, 1, 4, 4}, xs)},
			Labels:   map[string]*tensor.Dense{"y": numeric.Over(tensor.Shape{rows, 1}, ys)},
		})
	}
	return bs
}

// TestComputeGradientsTouchesNothing: computing gradients changes no
// variable — optimizer slots (not even created before the first apply),
// moving statistics, global step — and applying them does.
func TestComputeGradientsTouchesNothing(t *testing.T) {
	ctx := context.Background()
	est, err := estimator.New(replicate.ModelFn(bnModel(false), replicate.Config{Devices: towers.CPUs(2)}), estimator.RunConfig{Seed: 3, LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	bs := bnBatches(3, 8)
	isSlot := func(name string) bool { return strings.Contains(name, "/Momentum/") }
	slots := func() []string {
		var out []string
		for _, n := range est.VariableNames() {
			if isSlot(n) {
				out = append(out, n)
			}
		}
		return out
	}
	g, err := est.ComputeGradients(ctx, bs[0])
	if err != nil {
		t.Fatal(err)
	}
	if s := slots(); len(s) > 0 {
		t.Errorf("computing gradients created optimizer slots %v", s)
	}
	if err := est.ApplyGradients(ctx, g); err != nil {
		t.Fatal(err)
	}
	if len(slots()) == 0 {
		t.Fatalf("no optimizer slots after applying gradients: variables %v", est.VariableNames())
	}
	before := vartest.Variables(t, est)
	if _, err := est.ComputeGradients(ctx, bs[1]); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, vartest.Variables(t, est)); diff != "" {
		t.Errorf("computing gradients changed variables (-before +after):\n%s", diff)
	}
	g, err = est.ComputeGradients(ctx, bs[2])
	if err != nil {
		t.Fatal(err)
	}
	if err := est.ApplyGradients(ctx, g); err != nil {
		t.Fatal(err)
	}
	after := vartest.Variables(t, est)
	for _, name := range []string{"bn1/moving_mean", "d1/kernel/Momentum/momentum", model.GlobalStepName} {
		if cmp.Equal(before[name], after[name]) {
			t.Errorf("applying gradients left %s at %v", name, after[name])
		}
	}
}

// twoOpsModel minimizes a and b with two train ops each.
func twoOpsModel(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
	a := tw.MustVariable("a", tensor.Float64, nil, towers.Constant(1))
	b := tw.MustVariable("b", tensor.Float64, nil, towers.Constant(1))
	la := G.Must(G.Sum(G.Must(G.Mul(f["x"], a))))
	lb := G.Must(G.Sum(G.Must(G.Mul(f["x"], G.Must(G.Mul(b, b))))))
	return &model.Spec{Loss: G.Must(G.Add(la, lb)), TrainOps: []model.TrainOp{
		{Loss: la, Optimizer: optimizers.SGD(0.1), Vars: []string{"a"}},
		{Optimizer: optimizers.SGD(0.1)},
	}}, nil
}

// TestGradientErrors: gradients with a wrong name, shape, dtype or length
// are errors listing what was expected, and change nothing; so are a model
// that minimizes a variable twice, applying before any towers exist, and
// compute or apply across processes.
func TestGradientErrors(t *testing.T) {
	ctx := context.Background()
	newEst := func() *estimator.Estimator {
		est, err := estimator.New(replicate.ModelFn(mlpModel, replicate.Config{Devices: towers.CPUs(2)}),
			estimator.RunConfig{Seed: 3, LogEvery: -1, Params: model.Params{"dtype": tensor.Float64, "opt": func() optimizers.Optimizer { return optimizers.Adam(0.1) }}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { est.Close() })
		return est
	}
	batch := mlpBatches(1, 6, tensor.Float64)[0]
	const expected = "dense/kernel (3, 4) float64, dense/bias (4) float64, out/kernel (4, 1) float64"
	dense := func(shape tensor.Shape, dt tensor.Dtype) *tensor.Dense {
		return numeric.Over(shape, numeric.NewSlice(dt, shape.TotalSize()))
	}
	tests := []struct {
		name   string
		change func(g *estimator.Gradients)
		want   []string
	}{
		{"unknown name", func(g *estimator.Gradients) { g.ByName["dense/kernal"] = g.ByName["dense/kernel"] }, []string{`"dense/kernal"`, expected}},
		{"missing name", func(g *estimator.Gradients) { delete(g.ByName, "dense/bias") }, []string{`no gradient of "dense/bias"`, expected}},
		{"wrong shape", func(g *estimator.Gradients) { g.ByName["out/kernel"] = dense(tensor.Shape{1, 4}, tensor.Float64) }, []string{`"out/kernel" has shape (1, 4)`, expected}},
		{"wrong dtype", func(g *estimator.Gradients) { g.ByName["dense/bias"] = dense(tensor.Shape{4}, tensor.Float32) }, []string{`"dense/bias" has shape (4) dtype float32`, expected}},
		{"nil tensor", func(g *estimator.Gradients) { g.ByName["dense/bias"] = nil }, []string{`"dense/bias" has no value`, expected}},
		{"flat too short", func(g *estimator.Gradients) { g.ByName, g.Flat = nil, g.Flat[1:] }, []string{"flat gradients of 19 values, the weights have 20", expected}},
		{"flat too long", func(g *estimator.Gradients) { g.ByName, g.Flat = nil, append(g.Flat, 0) }, []string{"21 values", expected}},
		{"none", func(g *estimator.Gradients) { g.ByName, g.Flat = nil, nil }, []string{"set Gradients.ByName or Gradients.Flat"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			est := newEst()
			g, err := est.ComputeGradients(ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			before := vartest.Variables(t, est)
			tt.change(&g)
			err = est.ApplyGradients(ctx, g)
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("got error %v, want one containing %q", err, w)
				}
			}
			if diff := cmp.Diff(before, vartest.Variables(t, est)); diff != "" {
				t.Errorf("a failed apply changed variables (-before +after):\n%s", diff)
			}
		})
	}

	t.Run("apply first", func(t *testing.T) {
		err := newEst().ApplyGradients(ctx, estimator.Gradients{Flat: make([]float64, 20)})
		if err == nil || !strings.Contains(err.Error(), "no training towers yet") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("two train ops", func(t *testing.T) {
		est, err := estimator.New(replicate.ModelFn(twoOpsModel, replicate.Config{Devices: towers.CPUs(2)}), estimator.RunConfig{LogEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer est.Close()
		_, err = est.ComputeGradients(ctx, sharding.Batch{Features: map[string]*tensor.Dense{"x": column(1, 2, 3)}})
		if want := `variable "a" is minimized by train ops 0 and 1`; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error containing %q", err, want)
		}
		if err := est.ApplyGradients(ctx, estimator.Gradients{Flat: []float64{1, 1}}); err == nil || !strings.Contains(err.Error(), `variable "a"`) {
			t.Errorf("apply: got %v", err)
		}
	})
	t.Run("across processes", func(t *testing.T) {
		comms := collective.Local(2)
		defer comms[0].Close()
		defer comms[1].Close()
		e, err := replicate.NewEngine(replicate.ModelFn(constModel, replicate.Config{Devices: towers.CPUs(1), Processes: comms[0]}), replicate.EngineConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		b := sharding.Batch{Features: map[string]*tensor.Dense{"x": column(1)}, Labels: map[string]*tensor.Dense{"y": column(1)}}
		if _, _, err := e.ComputeGradients(ctx, b, replicate.StepHooks{}); err == nil || !strings.Contains(err.Error(), "not supported across processes") {
			t.Errorf("compute: got %v", err)
		}
		if err := e.ApplyGradients(ctx, nil); err == nil || !strings.Contains(err.Error(), "not supported across processes") {
			t.Errorf("apply: got %v", err)
		}
	})
}
