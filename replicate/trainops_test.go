package replicate_test

import (
	"context"
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// TestTwoOptimizersOneLoss: two train ops minimise the same loss over
// disjoint variables, each with its own optimizer (a wide-and-deep model's
// linear and DNN parts, TensorFlow's DNNLinearCombined): each variable
// gets its gradient of the loss, on any number of towers.
func TestTwoOptimizersOneLoss(t *testing.T) {
	mdl := func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
		a := tw.MustVariable("a", tensor.Float64, nil, towers.Constant(1))
		b := tw.MustVariable("b", tensor.Float64, nil, towers.Constant(1))
		x := f["x"]
		// Both parts meet in one sum, as the two parts' logits do.
		total := G.Must(G.Add(G.Must(G.Sum(G.Must(G.Mul(x, a)))), G.Must(G.Sum(G.Must(G.Mul(x, G.Must(G.Mul(b, b))))))))
		return &model.Spec{Loss: total, TrainOps: []model.TrainOp{
			{Optimizer: optimizers.SGD(0.1), Vars: []string{"a"}},
			{Optimizer: optimizers.Adagrad(0.5, optimizers.InitialAccumulator(0)), Vars: []string{"b"}},
		}}, nil
	}
	run := func(devs int) map[string]float64 {
		est, err := estimator.New(replicate.ModelFn(mdl, replicate.Config{Devices: towers.CPUs(devs), Reduction: replicate.Sum}), estimator.RunConfig{LogEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer est.Close()
		in, _ := estimator.FromTensors(map[string]*tensor.Dense{"x": column(1, 2, 3, 4)}, nil, estimator.TensorInput{BatchSize: 4})
		if err := est.Train(context.Background(), in, estimator.Steps(1)); err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, n := range est.VariableNames() {
			if v, err := est.VariableValue(n); err == nil {
				if f, ok := v.Data().(float64); ok {
					out[n] = f
				}
			}
		}
		return out
	}
	// sum x = 10. a: SGD 0.1 on d/da = 10 -> 0. b: Adagrad 0.5 on d/db =
	// 2*b*10 = 20: accumulator 400, b = 1 - 0.5*20/(20+1e-7); slots of b
	// alone.
	want := map[string]float64{"a": 0, "b": 1 - 0.5*20/(20+1e-7), "b/Adagrad/accumulator": 400}
	for _, n := range []int{1, 2, 3} {
		if diff := cmp.Diff(want, run(n), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
			t.Errorf("%d towers (-want +got):\n%s", n, diff)
		}
	}
}

// TestTrainOpGradients: every train op gets the gradients of its own loss
// with respect to its variables, whatever the other train ops differentiate
// (gorgonia keeps one gradient per node): one variable in two ops with
// different losses, two losses sharing a subgraph in either order, one loss
// over disjoint variables, and a loss made of other ops' losses. The
// gradients the optimizers would see are compared with central finite
// differences of the losses, on 1, 2 and 3 towers (Sum reduction: towers
// equal one device).
func TestTrainOpGradients(t *testing.T) {
	xs := []float64{1, 2, 3, 4}
	init := map[string]float64{"a": 1, "b": 2}
	// The losses, as gorgonia nodes over the features x ([rows, 1]) and the
	// variables, and as functions of the variables over all of xs.
	type loss struct {
		node func(x, a, b *G.Node) *G.Node
		eval func(v map[string]float64) float64
	}
	sumOver := func(f func(x float64, v map[string]float64) float64) func(map[string]float64) float64 {
		return func(v map[string]float64) float64 {
			s := 0.0
			for _, x := range xs {
				s += f(x, v)
			}
			return s
		}
	}
	// la = Σ x·a; lb = Σ x·b·b; lab = Σ (x·a)·b; lsq = Σ (x·a)², sharing
	// x·a with lab.
	la := loss{
		func(x, a, _ *G.Node) *G.Node { return G.Must(G.Sum(G.Must(G.Mul(x, a)))) },
		sumOver(func(x float64, v map[string]float64) float64 { return x * v["a"] }),
	}
	lb := loss{
		func(x, _, b *G.Node) *G.Node { return G.Must(G.Sum(G.Must(G.Mul(x, G.Must(G.Mul(b, b)))))) },
		sumOver(func(x float64, v map[string]float64) float64 { return x * v["b"] * v["b"] }),
	}
	la3 := loss{ // 3·la, over la's nodes
		func(x, a, b *G.Node) *G.Node {
			l := la.node(x, a, b)
			return G.Must(G.Add(G.Must(G.Add(l, l)), l))
		},
		func(v map[string]float64) float64 { return 3 * la.eval(v) },
	}
	lab := loss{
		func(x, a, b *G.Node) *G.Node { return G.Must(G.Sum(G.Must(G.Mul(G.Must(G.Mul(x, a)), b)))) },
		sumOver(func(x float64, v map[string]float64) float64 { return x * v["a"] * v["b"] }),
	}
	lsq := loss{
		func(x, a, _ *G.Node) *G.Node {
			h := G.Must(G.Mul(x, a))
			return G.Must(G.Sum(G.Must(G.HadamardProd(h, h))))
		},
		sumOver(func(x float64, v map[string]float64) float64 { return x * v["a"] * x * v["a"] }),
	}
	total := loss{ // la + 2·lb, over la's and lb's nodes
		func(x, a, b *G.Node) *G.Node {
			l := lb.node(x, a, b)
			return G.Must(G.Add(G.Must(G.Add(la.node(x, a, b), l)), l))
		},
		func(v map[string]float64) float64 { return la.eval(v) + 2*lb.eval(v) },
	}
	type op struct {
		loss loss
		vars []string // nil: every trainable variable
		want []string // the variables the loss depends on
	}
	tests := []struct {
		name string
		spec loss // Spec.Loss
		ops  []op
	}{
		{"one variable, two losses", la, []op{
			{la, []string{"a"}, []string{"a"}},
			{la3, []string{"a"}, []string{"a"}},
		}},
		{"one variable, two losses, the larger first", la, []op{
			{la3, []string{"a"}, []string{"a"}},
			{la, []string{"a"}, []string{"a"}},
		}},
		{"two losses sharing a subgraph", lab, []op{
			{lab, []string{"a", "b"}, []string{"a", "b"}},
			{lsq, []string{"a", "b"}, []string{"a"}},
		}},
		{"two losses sharing a subgraph, the other order", lab, []op{
			{lsq, []string{"a"}, []string{"a"}},
			{lab, nil, []string{"a", "b"}},
		}},
		{"one loss, disjoint variables", total, []op{
			{total, []string{"a"}, []string{"a"}},
			{total, []string{"b"}, []string{"b"}},
		}},
		{"a loss and its parts", total, []op{
			{la, []string{"a", "b"}, []string{"a"}},
			{lb, []string{"b"}, []string{"b"}},
			{total, nil, []string{"a", "b"}},
		}},
		{"one loss twice and another", la, []op{
			{la, []string{"a"}, []string{"a"}},
			{la3, []string{"a"}, []string{"a"}},
			{la, []string{"a"}, []string{"a"}},
		}},
	}
	const h = 1e-4
	for _, tt := range tests {
		// Central differences at the initial values: exact up to rounding
		// for these polynomials of degree two.
		want := make([]map[string]float64, len(tt.ops))
		for k, o := range tt.ops {
			want[k] = map[string]float64{}
			for _, name := range o.want {
				up, down := maps.Clone(init), maps.Clone(init)
				up[name] += h
				down[name] -= h
				want[k][name] = (o.loss.eval(up) - o.loss.eval(down)) / (2 * h)
			}
		}
		mdl := func(tw *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
			a := tw.MustVariable("a", tensor.Float64, nil, towers.Constant(init["a"]))
			b := tw.MustVariable("b", tensor.Float64, nil, towers.Constant(init["b"]))
			x := f["x"]
			spec := &model.Spec{Loss: tt.spec.node(x, a, b)}
			for _, o := range tt.ops {
				spec.TrainOps = append(spec.TrainOps, model.TrainOp{Loss: o.loss.node(x, a, b), Optimizer: optimizers.SGD(0.1), Vars: o.vars})
			}
			return spec, nil
		}
		for _, devs := range []int{1, 2, 3} {
			var got []map[string]float64
			record := func(_ context.Context, gs []replicate.Gradient) error {
				m := map[string]float64{}
				for _, g := range gs {
					m[g.Variable.Name()] = g.Value.([]float64)[0]
				}
				got = append(got, m)
				return nil
			}
			cfg := replicate.Config{Devices: towers.CPUs(devs), Reduction: replicate.Sum, ReduceGradients: record}
			est, err := estimator.New(replicate.ModelFn(mdl, cfg), estimator.RunConfig{LogEvery: -1})
			if err != nil {
				t.Fatal(err)
			}
			in, _ := estimator.FromTensors(map[string]*tensor.Dense{"x": column(xs...)}, nil, estimator.TensorInput{BatchSize: len(xs)})
			err = est.Train(context.Background(), in, estimator.Steps(1))
			est.Close()
			if err != nil {
				t.Fatalf("%s, %d towers: %v", tt.name, devs, err)
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateApprox(1e-9, 1e-9)); diff != "" {
				t.Errorf("%s, %d towers: gradients per train op (-want +got):\n%s", tt.name, devs, diff)
			}
		}
	}
}
