package replicate_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// statefulModel is a linear model with three state updates: an int64 and
// a float64 counter incremented by one in each tower's step (AssignAdd),
// and a moving mean of the features, 0.9·moving + 0.1·mean(x) (Assign).
func statefulModel(s *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, _ model.Params) (*model.Spec, error) {
	x := features.Get("x")
	w := s.MustVariable("w", tensor.Float64, tensor.Shape{1, 1}, towers.Constant(0.5))
	s.MustVariable("count", tensor.Int64, tensor.Shape{}, nil, towers.NotTrainable())
	s.MustVariable("countf", tensor.Float64, tensor.Shape{}, nil, towers.NotTrainable())
	moving := s.MustVariable("moving", tensor.Float64, tensor.Shape{}, nil, towers.NotTrainable())
	pred := G.Must(G.Mul(x, w))
	spec := &model.Spec{Predictions: map[string]*G.Node{"y": pred}}
	if mode == model.Predict {
		return spec, nil
	}
	spec.Loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, labels.Get("y")))))))
	one := G.NewScalar(s.Graph(), tensor.Int64, G.WithName(s.Name("one")), G.WithValue(int64(1)))
	onef := G.NewScalar(s.Graph(), tensor.Float64, G.WithName(s.Name("onef")), G.WithValue(1.0))
	next := G.Must(G.Add(G.Must(G.Mul(G.NewConstant(0.9), moving)), G.Must(G.Mul(G.NewConstant(0.1), G.Must(G.Mean(x))))))
	for _, err := range []error{s.AssignAdd("count", one), s.AssignAdd("countf", onef), s.Assign("moving", next)} {
		if err != nil {
			return nil, err
		}
	}
	return spec, nil
}

func stateBatch(rows int, seed uint64) sharding.Batch {
	r := rand.New(rand.NewPCG(seed, 1))
	xs, ys := make([]float64, rows), make([]float64, rows)
	for i := range xs {
		xs[i] = r.NormFloat64() + 3
		ys[i] = 2 * xs[i]
	}
	return sharding.Batch{
		Features: map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{rows, 1}, xs)},
		Labels:   map[string]*tensor.Dense{"y": numeric.Over(tensor.Shape{rows, 1}, ys)},
	}
}

// trainState runs steps training steps of fn on n towers and returns the
// variables.
func trainState(t *testing.T, fn model.Fn, n, rows, steps int) map[string][]float64 {
	t.Helper()
	e, err := replicate.NewEngine(replicate.ModelFn(fn, replicate.Config{Devices: towers.CPUs(n), Optimizer: optimizers.SGD(0.01)}), replicate.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i := range steps {
		if _, err := e.TrainStep(context.Background(), stateBatch(rows, uint64(i)), replicate.StepHooks{}); err != nil {
			t.Fatal(err)
		}
	}
	vars := map[string][]float64{}
	for _, name := range []string{"w", "count", "countf", "moving"} {
		v, err := e.Store().Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if vars[name], err = numeric.SliceFloat64s(v.Data()); err != nil {
			t.Fatal(err)
		}
	}
	return vars
}

// TestStateUpdates: deltas from every tower are all applied (a counter
// incremented by one in each tower's step grows by the number of towers),
// and assigned values are the batch-weighted mean of the towers', so a
// moving mean of the features on N towers, uneven shards included, equals
// one device's on the whole batch.
func TestStateUpdates(t *testing.T) {
	const steps = 3
	one := trainState(t, statefulModel, 1, 11, steps)
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("towers%d", n), func(t *testing.T) {
			got := trainState(t, statefulModel, n, 11, steps)
			want := map[string][]float64{
				"w": one["w"], "moving": one["moving"],
				"count": {float64(n * steps)}, "countf": {float64(n * steps)},
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
				t.Errorf("%d towers (-want +got):\n%s", n, diff)
			}
		})
	}
	if one["moving"][0] == 0 {
		t.Error("the moving mean was never assigned")
	}
}

// TestStateUpdateErrors: updates the engine cannot apply are build errors
// naming what is wrong.
func TestStateUpdateErrors(t *testing.T) {
	tests := []struct {
		name string
		fn   model.Fn
		want string
	}{
		{"towers differ", func(s *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
			if s.Index() == 1 {
				return constModel(s, mode, f, l, p)
			}
			spec, err := constModel(s, mode, f, l, p)
			if err != nil {
				return nil, err
			}
			c, _ := s.VariableNode("c")
			return spec, s.Assign("c", G.Must(G.Mul(G.NewConstant(2.0), c)))
		}, "tower 1 (/device:CPU:1), train mode: model function declared different state updates than tower 0"},
		{"assign an int", func(s *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
			spec, err := constModel(s, mode, f, l, p)
			if err != nil {
				return nil, err
			}
			n := s.MustVariable("n", tensor.Int64, tensor.Shape{}, nil, towers.NotTrainable())
			return spec, s.Assign("n", n)
		}, `Assign("n"): the variable has dtype int64`},
		{"global step", func(s *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
			spec, err := constModel(s, mode, f, l, p)
			if err != nil {
				return nil, err
			}
			gs := s.MustVariable(model.GlobalStepName, tensor.Int64, tensor.Shape{}, nil, towers.NotTrainable())
			return spec, s.AssignAdd(model.GlobalStepName, gs)
		}, `state update of "global_step": the global step is incremented by the engine`},
		{"not asked for", func(s *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
			spec, err := constModel(s, mode, f, l, p)
			if err != nil {
				return nil, err
			}
			return spec, s.Assign("elsewhere", spec.Loss)
		}, `Assign("elsewhere"): the tower has not asked for the variable`},
		{"wrong shape", func(s *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
			spec, err := constModel(s, mode, f, l, p)
			if err != nil {
				return nil, err
			}
			return spec, s.Assign("c", spec.Loss)
		}, `Assign("c"): value`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := replicate.NewEngine(replicate.ModelFn(tc.fn, replicate.Config{Devices: towers.CPUs(2), Optimizer: optimizers.SGD(0.01)}), replicate.EngineConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			batch := sharding.Batch{Features: map[string]*tensor.Dense{"x": column(1, 2, 3, 4)}, Labels: map[string]*tensor.Dense{"y": column(2, 4, 6, 8)}}
			_, err = e.TrainStep(context.Background(), batch, replicate.StepHooks{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// setModel is statefulModel with the moving mean written by gorgonia's
// G.Set instead of Scope.Assign.
func setModel(s *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, p model.Params) (*model.Spec, error) {
	x := features.Get("x")
	w := s.MustVariable("w", tensor.Float64, tensor.Shape{1, 1}, towers.Constant(0.5))
	s.MustVariable("count", tensor.Int64, tensor.Shape{}, nil, towers.NotTrainable())
	s.MustVariable("countf", tensor.Float64, tensor.Shape{}, nil, towers.NotTrainable())
	moving := s.MustVariable("moving", tensor.Float64, tensor.Shape{}, nil, towers.NotTrainable())
	pred := G.Must(G.Mul(x, w))
	spec := &model.Spec{Predictions: map[string]*G.Node{"y": pred}}
	if mode == model.Predict {
		return spec, nil
	}
	spec.Loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, labels.Get("y")))))))
	next := G.Must(G.Add(G.Must(G.Mul(G.NewConstant(0.9), moving)), G.Must(G.Mul(G.NewConstant(0.1), G.Must(G.Mean(x))))))
	G.Set(moving, next)
	return spec, nil
}

// TestGSetIsAnUpdate: gorgonia's G.Set of a variable, which its tape
// machine silently ignores, is a state update: it writes the variable as
// Scope.Assign does; a Set of anything else is an error naming the node.
func TestGSetIsAnUpdate(t *testing.T) {
	want := trainState(t, statefulModel, 1, 11, 3)["moving"]
	for _, n := range []int{1, 2} {
		got := trainState(t, setModel, n, 11, 3)["moving"]
		if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
			t.Errorf("%d towers: moving mean set with G.Set (-Assign +Set):\n%s", n, diff)
		}
	}
	bad := func(s *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
		spec, err := constModel(s, mode, f, l, p)
		if err != nil {
			return nil, err
		}
		G.Set(spec.Predictions["y"], spec.Predictions["y"])
		return spec, nil
	}
	e, err := replicate.NewEngine(replicate.ModelFn(bad, replicate.Config{Devices: towers.CPUs(1), Optimizer: optimizers.SGD(0.01)}), replicate.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	batch := sharding.Batch{Features: map[string]*tensor.Dense{"x": column(1, 2)}, Labels: map[string]*tensor.Dense{"y": column(2, 4)}}
	_, err = e.TrainStep(context.Background(), batch, replicate.StepHooks{})
	if want := "which is not a variable of the tower"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("G.Set of a prediction: err = %v, want one containing %q", err, want)
	}
}
