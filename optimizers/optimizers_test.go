package optimizers_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/towers"
)

// valueGrad is the smallest gorgonia.ValueGrad: a weight value and its
// gradient, which the solvers update (weights) and zero (gradient) in place.
type valueGrad struct{ v, g G.Value }

func (x *valueGrad) Value() G.Value         { return x.v }
func (x *valueGrad) Grad() (G.Value, error) { return x.g, nil }

var testVars = []struct {
	name  string
	shape tensor.Shape
}{
	{"dense/kernel", tensor.Shape{3, 4}},
	{"dense/bias", tensor.Shape{4}},
	{"scale", nil}, // a scalar
}

// newStore returns a store holding testVars of dtype dt, randomly
// initialised, created as model code creates them (through a scope, so
// that placement places them), seed 7 unless cfg says otherwise.
func newStore(t testing.TB, dt tensor.Dtype, cfg towers.StoreConfig) (*towers.Store, []*towers.Variable) {
	t.Helper()
	if cfg.Seed == 0 {
		cfg.Seed = 7
	}
	store := towers.NewStore(cfg)
	scope := towers.NewScope(0, 1, towers.CPU(0), store, nil)
	var vars []*towers.Variable
	for _, tv := range testVars {
		if _, err := scope.Variable(tv.name, dt, tv.shape, towers.RandomNormal(0, 1)); err != nil {
			t.Fatal(err)
		}
		v, err := store.Lookup(tv.name)
		if err != nil {
			t.Fatal(err)
		}
		vars = append(vars, v)
	}
	return store, vars
}

// randGrads draws one gradient per variable from N(0, 1).
func randGrads(r *rand.Rand, vars []*towers.Variable) []any {
	grads := make([]any, len(vars))
	for i, v := range vars {
		vals := make([]float64, v.Size())
		for k := range vals {
			vals[k] = r.NormFloat64()
		}
		grads[i] = convert(v.Dtype(), vals)
	}
	return grads
}

func convert(dt tensor.Dtype, vals []float64) any {
	if dt == tensor.Float64 {
		return slices.Clone(vals)
	}
	out := make([]float32, len(vals))
	for i, x := range vals {
		out[i] = float32(x)
	}
	return out
}

func cloneAll(xs []any) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		switch x := x.(type) {
		case []float32:
			out[i] = slices.Clone(x)
		case []float64:
			out[i] = slices.Clone(x)
		case []int64:
			out[i] = slices.Clone(x)
		default:
			out[i] = x
		}
	}
	return out
}

// gorgoniaValue returns a gorgonia value holding a copy of data: a
// *tensor.Dense of the given shape, or for a scalar shape a *G.F32 or *G.F64
// (gorgonia's scalar values), or a one-element vector when scalarAsVector.
func gorgoniaValue(shape tensor.Shape, data any, scalarAsVector bool) G.Value {
	data = cloneAll([]any{data})[0]
	if len(shape) == 0 {
		if scalarAsVector {
			return tensor.New(tensor.WithShape(1), tensor.WithBacking(data))
		}
		switch d := data.(type) {
		case []float32:
			return G.NewF32(d[0])
		case []float64:
			return G.NewF64(d[0])
		}
	}
	return tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(data))
}

// gorgoniaData returns the elements of a value made by gorgoniaValue.
func gorgoniaData(v G.Value) any {
	switch v := v.(type) {
	case *G.F32:
		return []float32{float32(*v)}
	case *G.F64:
		return []float64{float64(*v)}
	case *tensor.Dense:
		return cloneAll([]any{v.Data()})[0]
	}
	panic(fmt.Sprintf("unexpected value %T", v))
}

func tolerance(dt tensor.Dtype) cmp.Option {
	if dt == tensor.Float32 {
		return cmpopts.EquateApprox(1e-5, 1e-6)
	}
	return cmpopts.EquateApprox(1e-12, 1e-12)
}

func data(vars []*towers.Variable) []any {
	out := make([]any, len(vars))
	for i, v := range vars {
		out[i] = v.Data()
	}
	return cloneAll(out)
}

// TestAgainstGorgonia runs each optimizer and the matching gorgonia solver
// on the same weights and random gradients for several steps and compares
// the weights after every step.
func TestAgainstGorgonia(t *testing.T) {
	const steps = 6
	tests := []struct {
		name   string
		opt    optimizers.Optimizer
		solver func() G.Solver
		// gorgonia v0.9.18's Momentum never stores the accumulator of a
		// scalar (*F32, *F64) weight, so its scalars get plain SGD steps;
		// such cases hold the scalar as a one-element vector instead.
		scalarAsVector bool
	}{
		{
			name:   "SGD",
			opt:    optimizers.SGD(0.1),
			solver: func() G.Solver { return G.NewVanillaSolver(G.WithLearnRate(0.1)) },
		},
		{
			// TensorFlow's update, accum = m*accum + g; w -= lr*accum, and
			// gorgonia's, c = m*c - lr*g; w += c, are one: both start at zero
			// and by induction c = -lr*accum at every step (for a constant
			// lr), so w moves by the same amount. Only rounding differs.
			name:           "Momentum",
			opt:            optimizers.Momentum(0.05, 0.9),
			solver:         func() G.Solver { return G.NewMomentum(G.WithLearnRate(0.05), G.WithMomentum(0.9)) },
			scalarAsVector: true,
		},
		{
			name:   "Adam/defaults",
			opt:    optimizers.Adam(0.001),
			solver: func() G.Solver { return G.NewAdamSolver(G.WithLearnRate(0.001)) },
		},
		{
			name: "Adam/options",
			opt:  optimizers.Adam(0.02, optimizers.Beta1(0.8), optimizers.Beta2(0.95), optimizers.Epsilon(1e-4), optimizers.Named("adam_2")),
			solver: func() G.Solver {
				return G.NewAdamSolver(G.WithLearnRate(0.02), G.WithBeta1(0.8), G.WithBeta2(0.95), G.WithEps(1e-4))
			},
		},
		{
			// gorgonia's RMSProp adds eps inside the square root, Keras's
			// outside: with eps 0 the rules are one.
			name:           "RMSProp/eps0",
			opt:            optimizers.RMSProp(0.01, optimizers.Rho(0.8), optimizers.Epsilon(0)),
			solver:         func() G.Solver { return G.NewRMSPropSolver(G.WithLearnRate(0.01), G.WithRho(0.8), G.WithEps(0)) },
			scalarAsVector: true,
		},
		{
			// Likewise Adagrad. gorgonia's AdaGradSolver ignores WithLearnRate
			// and WithEps: its lr is 0.001 and its eps 1e-8, inside the root,
			// over accumulators from 0, which is Keras's rule with eps 0 and
			// accumulators from 1e-8.
			name:           "Adagrad/eps0",
			opt:            optimizers.Adagrad(0.001, optimizers.InitialAccumulator(1e-8), optimizers.Epsilon(0)),
			solver:         func() G.Solver { return G.NewAdaGradSolver() },
			scalarAsVector: true,
		},
	}
	for _, tt := range tests {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(tt.name+"/"+dt.String(), func(t *testing.T) {
				store, vars := newStore(t, dt, towers.StoreConfig{})
				model := make([]*valueGrad, len(vars))
				vgs := make([]G.ValueGrad, len(vars))
				for i, v := range vars {
					model[i] = &valueGrad{v: gorgoniaValue(v.Shape(), v.Data(), tt.scalarAsVector)}
					vgs[i] = model[i]
				}
				solver := tt.solver()
				initial := data(vars)
				r := rand.New(rand.NewPCG(1, 2))
				for step := 1; step <= steps; step++ {
					grads := randGrads(r, vars)
					for i, v := range vars {
						// The solvers overwrite and zero the gradient: give each a copy.
						model[i].g = gorgoniaValue(v.Shape(), grads[i], tt.scalarAsVector)
					}
					if err := solver.Step(vgs); err != nil {
						t.Fatalf("gorgonia step %d: %v", step, err)
					}
					if err := tt.opt.Apply(store, vars, grads); err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
					want := make([]any, len(model))
					for i, m := range model {
						want[i] = gorgoniaData(m.v)
					}
					if diff := cmp.Diff(want, data(vars), tolerance(dt)); diff != "" {
						t.Fatalf("step %d: weights differ from gorgonia's (-gorgonia +ours):\n%s", step, diff)
					}
				}
				if cmp.Equal(initial, data(vars), tolerance(dt)) {
					t.Errorf("weights did not move")
				}
				if strings.HasPrefix(tt.name, "Adam") {
					it, err := store.Value(tt.opt.Name() + "/iterations")
					if err != nil {
						t.Fatal(err)
					}
					if got := it.Data(); got != int64(steps) {
						t.Errorf("%s/iterations = %v, want %d", tt.opt.Name(), got, steps)
					}
				}
			})
		}
	}
}

func TestSlots(t *testing.T) {
	tests := []struct {
		name  string
		opt   optimizers.Optimizer
		slots []string // per variable
		extra []string // not per variable
	}{
		{name: "SGD", opt: optimizers.SGD(0.1)},
		{name: "Momentum", opt: optimizers.Momentum(0.1, 0.9), slots: []string{"Momentum/momentum"}},
		{name: "Momentum/nesterov", opt: optimizers.Momentum(0.1, 0.9, optimizers.UseNesterov(), optimizers.Named("nag")), slots: []string{"nag/momentum"}},
		{name: "Adam", opt: optimizers.Adam(0.1), slots: []string{"Adam/m", "Adam/v"}, extra: []string{"Adam/iterations"}},
		{name: "Adam/named", opt: optimizers.Adam(0.1, optimizers.Named("tower/adam")), slots: []string{"tower/adam/m", "tower/adam/v"}, extra: []string{"tower/adam/iterations"}},
		{name: "RMSProp", opt: optimizers.RMSProp(0.1), slots: []string{"RMSProp/rms"}},
		{name: "Adagrad", opt: optimizers.Adagrad(0.1, optimizers.Named("ada")), slots: []string{"ada/accumulator"}},
		{name: "FTRL", opt: optimizers.FTRL(0.1), slots: []string{"Ftrl/accumulator", "Ftrl/linear"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, vars := newStore(t, tensor.Float32, towers.StoreConfig{Placement: towers.RoundRobin(towers.CPU(0), towers.CPU(1))})
			devices := []towers.Device{towers.CPU(0), towers.CPU(1), towers.CPU(0)}
			for i, v := range vars {
				if v.Device() != devices[i] {
					t.Fatalf("%s on %v, want %v", v.Name(), v.Device(), devices[i])
				}
			}
			// Vars in reverse order: the iteration count goes with the least
			// name, dense/bias, whatever the order.
			rvars := slices.Clone(vars)
			slices.Reverse(rvars)
			for step := int64(1); step <= 2; step++ {
				if err := tt.opt.Apply(store, rvars, randGrads(rand.New(rand.NewPCG(1, 2)), rvars)); err != nil {
					t.Fatal(err)
				}
				wantNames := []string{"dense/kernel", "dense/bias", "scale"}
				for _, v := range rvars {
					for _, s := range tt.slots {
						wantNames = append(wantNames, v.Name()+"/"+s)
					}
				}
				wantNames = append(wantNames, tt.extra...)
				if diff := cmp.Diff(wantNames, store.Names()); diff != "" {
					t.Fatalf("store names (-want +got):\n%s", diff)
				}
				for _, v := range vars {
					for _, s := range tt.slots {
						sv, err := store.Lookup(v.Name() + "/" + s)
						if err != nil {
							t.Fatal(err)
						}
						type info struct {
							Shape     string
							Dtype     string
							Trainable bool
							Device    towers.Device
						}
						got := info{fmt.Sprint(sv.Shape()), sv.Dtype().String(), sv.Trainable(), sv.Device()}
						want := info{fmt.Sprint(v.Shape()), v.Dtype().String(), false, v.Device()}
						if diff := cmp.Diff(want, got); diff != "" {
							t.Errorf("slot %s (-want +got):\n%s", sv.Name(), diff)
						}
					}
				}
				for _, name := range tt.extra {
					it, err := store.Lookup(name)
					if err != nil {
						t.Fatal(err)
					}
					if it.Dtype() != tensor.Int64 || len(it.Shape()) != 0 || it.Trainable() || it.Device() != towers.CPU(1) {
						t.Errorf("%s: dtype %v shape %v trainable %v device %v, want int64 scalar, non-trainable, on CPU:1 with dense/bias",
							name, it.Dtype(), it.Shape(), it.Trainable(), it.Device())
					}
					if diff := cmp.Diff([]int64{step}, it.Data()); diff != "" {
						t.Errorf("%s after %d steps (-want +got):\n%s", name, step, diff)
					}
				}
			}
		})
	}
}

// TestNilGradient checks that a nil gradient leaves its variable and slots
// untouched while the other variables step.
func TestNilGradient(t *testing.T) {
	for _, opt := range []optimizers.Optimizer{optimizers.SGD(0.1), optimizers.Momentum(0.1, 0.9), optimizers.Adam(0.1), optimizers.RMSProp(0.1), optimizers.Adagrad(0.1), optimizers.FTRL(0.1)} {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(opt.Name()+"/"+dt.String(), func(t *testing.T) {
				store, vars := newStore(t, dt, towers.StoreConfig{})
				r := rand.New(rand.NewPCG(3, 4))
				if err := opt.Apply(store, vars, randGrads(r, vars)); err != nil {
					t.Fatal(err)
				}
				snapshot := func() map[string]any {
					out := map[string]any{}
					for _, v := range store.Variables() {
						out[v.Name()] = cloneAll([]any{v.Data()})[0]
					}
					return out
				}
				before := snapshot()
				grads := randGrads(r, vars)
				grads[1] = nil // dense/bias
				if dt == tensor.Float32 {
					grads[2] = []float32(nil) // scale: a nil slice is no gradient too
				} else {
					grads[2] = []float64(nil)
				}
				if err := opt.Apply(store, vars, grads); err != nil {
					t.Fatal(err)
				}
				after := snapshot()
				for name, b := range before {
					changed := !cmp.Equal(b, after[name])
					wantChanged := strings.HasPrefix(name, "dense/kernel") || strings.HasSuffix(name, "/iterations")
					if changed != wantChanged {
						t.Errorf("%s changed = %v, want %v (before %v, after %v)", name, changed, wantChanged, b, after[name])
					}
				}
				// A variable that never had a gradient gets no slots.
				fresh, _, err := store.GetOrCreate(towers.VarSpec{Name: "fresh", Dtype: dt, Shape: tensor.Shape{2}, Trainable: true})
				if err != nil {
					t.Fatal(err)
				}
				n := len(store.Names())
				if err := opt.Apply(store, []*towers.Variable{fresh}, []any{nil}); err != nil {
					t.Fatal(err)
				}
				if got := len(store.Names()); got != n {
					t.Errorf("store has %d variables after a nil gradient, want %d: %v", got, n, store.Names())
				}
			})
		}
	}
}

func newVar(t testing.TB, store *towers.Store, name string, dt tensor.Dtype, shape tensor.Shape, vals ...float64) *towers.Variable {
	t.Helper()
	init := towers.Zeros()
	if vals != nil {
		init = towers.Values(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(convert(dt, vals))))
	}
	v, _, err := store.GetOrCreate(towers.VarSpec{Name: name, Dtype: dt, Shape: shape, Init: init, Trainable: true})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestHandComputed checks one or two steps against values worked out by hand.
func TestHandComputed(t *testing.T) {
	// Adam, lr 0.1, defaults, w = 1, g = 2 then -1.
	m1, v1 := 0.1*2, 0.001*4
	adam1 := 1 - 0.1*(m1/0.1)/(math.Sqrt(v1/0.001)+1e-8) // = 1 - 0.1*2/(2+1e-8) ≈ 0.9
	m2, v2 := 0.9*m1+0.1*-1, 0.999*v1+0.001*1
	adam2 := adam1 - 0.1*(m2/(1-0.9*0.9))/(math.Sqrt(v2/(1-0.999*0.999))+1e-8)
	// RMSProp, lr 0.1, defaults (rho 0.9, eps 1e-7 outside the root), w = 1, g = 2 then -1.
	ms1, ms2 := 0.1*4, 0.9*0.1*4+0.1*1
	rms1 := 1 - 0.1*2/(math.Sqrt(ms1)+1e-7)
	rms2 := rms1 + 0.1/(math.Sqrt(ms2)+1e-7)
	// Adagrad, lr 0.1, defaults (accumulator from 0.1, eps 1e-7), w = 1, g = 2 then -1.
	ada1 := 1 - 0.1*2/(math.Sqrt(4.1)+1e-7)
	ada2 := ada1 + 0.1/(math.Sqrt(5.1)+1e-7)
	sched := func(s optimizers.Schedule) optimizers.Option { return optimizers.LearningRateSchedule(s) }
	tests := []struct {
		name  string
		opt   optimizers.Optimizer
		w     float64
		grads []float64 // one per step
		want  []float64 // w after each step
	}{
		{"SGD", optimizers.SGD(1), 10, []float64{3}, []float64{7}},
		{"SGD/two", optimizers.SGD(0.5), 10, []float64{4, -2}, []float64{8, 9}},
		{"SGD/zero-lr", optimizers.SGD(0), 10, []float64{4}, []float64{10}},
		// accum = 2, w = 1 - 0.5*2 = 0; accum = 0.9*2 + 2 = 3.8, w = 0 - 0.5*3.8 = -1.9.
		{"Momentum", optimizers.Momentum(0.5, 0.9), 1, []float64{2, 2}, []float64{0, -1.9}},
		// accum = 2, w = 1 - 0.5*(2 + 0.9*2) = -0.9; accum = 3.8, w = -0.9 - 0.5*(2 + 0.9*3.8) = -3.61.
		{"Momentum/nesterov", optimizers.Momentum(0.5, 0.9, optimizers.UseNesterov()), 1, []float64{2, 2}, []float64{-0.9, -3.61}},
		{"Adam", optimizers.Adam(0.1), 1, []float64{2, -1}, []float64{adam1, adam2}},
		{"RMSProp", optimizers.RMSProp(0.1), 1, []float64{2, -1}, []float64{rms1, rms2}},
		// ms = 0.5*4 = 2, w = 1 - 0.1*2/(sqrt(2)+0.5).
		{"RMSProp/options", optimizers.RMSProp(0.1, optimizers.Rho(0.5), optimizers.Epsilon(0.5)), 1, []float64{2}, []float64{1 - 0.2/(math.Sqrt(2)+0.5)}},
		{"Adagrad", optimizers.Adagrad(0.1), 1, []float64{2, -1}, []float64{ada1, ada2}},
		// acc = 5 + 4 = 9, w = 1 - 0.1*2/(3+1) = 0.95.
		{"Adagrad/options", optimizers.Adagrad(0.1, optimizers.InitialAccumulator(5), optimizers.Epsilon(1)), 1, []float64{2}, []float64{0.95}},
		// Decoupled weight decay first scales w by 1 - lr*wd, then steps:
		// w = 10*(1 - 0.5*0.1) - 0.5*4 = 7.5; w = 7.5*0.95 + 0.5*2 = 8.125.
		{"SGD/weight-decay", optimizers.SGD(0.5, optimizers.WeightDecay(0.1)), 10, []float64{4, -2}, []float64{7.5, 8.125}},
		// decay 1 - 0.5*0.2 = 0.9: accum = 2, w = 0.9 - 0.5*2 = -0.1; accum = 3.8, w = -0.09 - 1.9 = -1.99.
		{"Momentum/weight-decay", optimizers.Momentum(0.5, 0.9, optimizers.WeightDecay(0.2)), 1, []float64{2, 2}, []float64{-0.1, -1.99}},
		// accum = 2, w = 0.9 - 0.5*(2 + 1.8) = -1; accum = 3.8, w = -0.9 - 0.5*(2 + 3.42) = -3.61.
		{"Momentum/nesterov/weight-decay", optimizers.Momentum(0.5, 0.9, optimizers.UseNesterov(), optimizers.WeightDecay(0.2)), 1, []float64{2, 2}, []float64{-1, -3.61}},
		// AdamW: w = 1*(1 - 0.1*0.5) - 0.1*2/(2+1e-8).
		{"Adam/weight-decay", optimizers.Adam(0.1, optimizers.WeightDecay(0.5)), 1, []float64{2}, []float64{0.95 - 0.2/(2+1e-8)}},
		{"RMSProp/weight-decay", optimizers.RMSProp(0.1, optimizers.WeightDecay(2)), 1, []float64{2}, []float64{0.8 - 0.2/(math.Sqrt(0.4)+1e-7)}},
		{"Adagrad/weight-decay", optimizers.Adagrad(0.1, optimizers.WeightDecay(1)), 1, []float64{2}, []float64{0.9 - 0.2/(math.Sqrt(4.1)+1e-7)}},
		// The rate at global step 0 is 1, at step 1 (past the boundary 0) 0.5; the constructor's lr is unused.
		{"SGD/schedule", optimizers.SGD(99, sched(optimizers.PiecewiseConstant([]int64{0}, []float64{1, 0.5}))), 10, []float64{4, 4}, []float64{6, 4}},
		// Weight decay follows the scheduled rate: rates 0.5 then 1;
		// w = 10*(1 - 0.5*0.1) - 0.5*4 = 7.5; w = 7.5*(1 - 0.1) - 4 = 2.75.
		{"SGD/schedule/weight-decay", optimizers.SGD(0, optimizers.WeightDecay(0.1), sched(optimizers.LinearWarmup(2, optimizers.ConstantRate(1)))),
			10, []float64{4, 4}, []float64{7.5, 2.75}},
		// Momentum with rates 1 then 0.5: accum = 2, w = 1 - 2 = -1; accum = 3.8, w = -1 - 1.9 = -2.9.
		{"Momentum/schedule", optimizers.Momentum(7, 0.9, sched(optimizers.ExponentialDecay(1, 1, 0.5, true))), 1, []float64{2, 2}, []float64{-1, -2.9}},
	}
	for _, tt := range tests {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(tt.name+"/"+dt.String(), func(t *testing.T) {
				store := towers.NewStore(towers.StoreConfig{})
				gs := newGlobalStep(t, store)
				w := newVar(t, store, "w", dt, nil, tt.w)
				for step, g := range tt.grads {
					if err := tt.opt.Apply(store, []*towers.Variable{w}, []any{convert(dt, []float64{g})}); err != nil {
						t.Fatal(err)
					}
					gs[0]++
					want := convert(dt, []float64{tt.want[step]})
					if diff := cmp.Diff(want, w.Data(), tolerance(dt)); diff != "" {
						t.Errorf("after step %d (-want +got):\n%s", step+1, diff)
					}
				}
			})
		}
	}
}

// TestResume checks that the store holds all of an optimizer's state: a new
// store restored from a copy of every variable continues exactly as the
// original does.
func TestResume(t *testing.T) {
	for _, opt := range []optimizers.Optimizer{optimizers.Momentum(0.1, 0.9), optimizers.Adam(0.01)} {
		t.Run(opt.Name(), func(t *testing.T) {
			store, vars := newStore(t, tensor.Float64, towers.StoreConfig{})
			r := rand.New(rand.NewPCG(5, 6))
			for range 3 {
				if err := opt.Apply(store, vars, randGrads(r, vars)); err != nil {
					t.Fatal(err)
				}
			}
			restored := towers.NewStore(towers.StoreConfig{})
			for _, v := range store.Variables() {
				val, err := store.Value(v.Name())
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := restored.GetOrCreate(towers.VarSpec{
					Name: v.Name(), Dtype: v.Dtype(), Shape: v.Shape(), Init: towers.Values(val), Trainable: v.Trainable(),
				}); err != nil {
					t.Fatal(err)
				}
			}
			rvars := make([]*towers.Variable, len(vars))
			for i, v := range vars {
				var err error
				if rvars[i], err = restored.Lookup(v.Name()); err != nil {
					t.Fatal(err)
				}
			}
			for range 3 {
				grads := randGrads(r, vars)
				if err := opt.Apply(store, vars, grads); err != nil {
					t.Fatal(err)
				}
				if err := opt.Apply(restored, rvars, grads); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range store.Names() {
				a, _ := store.Lookup(name)
				b, err := restored.Lookup(name)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(a.Data(), b.Data()); diff != "" {
					t.Errorf("%s differs after resuming (-original +restored):\n%s", name, diff)
				}
			}
		})
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		opt  optimizers.Optimizer
		name string
		want string
	}{
		{optimizers.SGD(0.1), "SGD", "SGD(name=SGD,lr=0.1)"},
		{optimizers.SGD(0.1, optimizers.Named("sgd_1")), "sgd_1", "SGD(name=sgd_1,lr=0.1)"},
		{optimizers.Momentum(0.01, 0.9), "Momentum", "Momentum(name=Momentum,lr=0.01,momentum=0.9,nesterov=false)"},
		{optimizers.Momentum(0.01, 0.5, optimizers.UseNesterov()), "Momentum", "Momentum(name=Momentum,lr=0.01,momentum=0.5,nesterov=true)"},
		{optimizers.Adam(0.001), "Adam", "Adam(name=Adam,lr=0.001,beta1=0.9,beta2=0.999,eps=1e-08)"},
		{optimizers.Adam(0.5, optimizers.Beta1(0), optimizers.Beta2(0.9), optimizers.Epsilon(0.1)), "Adam", "Adam(name=Adam,lr=0.5,beta1=0,beta2=0.9,eps=0.1)"},
		{optimizers.RMSProp(0.001), "RMSProp", "RMSProp(name=RMSProp,lr=0.001,rho=0.9,eps=1e-07)"},
		{optimizers.RMSProp(0.1, optimizers.Rho(0.5), optimizers.Epsilon(0)), "RMSProp", "RMSProp(name=RMSProp,lr=0.1,rho=0.5,eps=0)"},
		{optimizers.Adagrad(0.01), "Adagrad", "Adagrad(name=Adagrad,lr=0.01,initial_accumulator=0.1,eps=1e-07)"},
		{optimizers.Adagrad(0.01, optimizers.InitialAccumulator(0), optimizers.Named("ada")), "ada", "Adagrad(name=ada,lr=0.01,initial_accumulator=0,eps=1e-07)"},
		{optimizers.Adam(0.001, optimizers.WeightDecay(0.01)), "Adam", "Adam(name=Adam,lr=0.001,beta1=0.9,beta2=0.999,eps=1e-08,weight_decay=0.01)"},
		{optimizers.SGD(0.1, optimizers.LearningRateSchedule(optimizers.LinearWarmup(10, optimizers.CosineDecay(0.1, 100, 0)))), "SGD",
			"SGD(name=SGD,lr=0.1,schedule=LinearWarmup(steps=10,then=CosineDecay(lr=0.1,decay_steps=100,alpha=0)))"},
		{optimizers.SGD(-1), "SGD", `SGD(name=SGD,lr=-1,invalid="invalid optimizer configuration: learning rate -1 is not finite and non-negative")`},
		{optimizers.FTRL(0.05), "Ftrl", "Ftrl(name=Ftrl,lr=0.05,lr_power=-0.5,initial_accumulator=0.1,l1=0,l2=0,l2_shrinkage=0)"},
		{optimizers.FTRL(0.05, optimizers.LearningRatePower(-0.25), optimizers.InitialAccumulator(1), optimizers.L1(0.5), optimizers.L2(2),
			optimizers.L2Shrinkage(0.125), optimizers.Named("linear")), "linear",
			"Ftrl(name=linear,lr=0.05,lr_power=-0.25,initial_accumulator=1,l1=0.5,l2=2,l2_shrinkage=0.125)"},
		{optimizers.Adam(0.001, optimizers.Lazy()), "Adam", "Adam(name=Adam,lr=0.001,beta1=0.9,beta2=0.999,eps=1e-08,lazy=true)"},
		{optimizers.Momentum(0.01, 0.9, optimizers.Lazy()), "Momentum", "Momentum(name=Momentum,lr=0.01,momentum=0.9,nesterov=false,lazy=true)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.opt.Config(); got != tt.want {
				t.Errorf("Config() = %q, want %q", got, tt.want)
			}
			if got := tt.opt.Name(); got != tt.name {
				t.Errorf("Name() = %q, want %q", got, tt.name)
			}
		})
	}
	if a, b := optimizers.Adam(0.001), optimizers.Adam(0.001, optimizers.Beta1(0.9)); a.Config() != b.Config() {
		t.Errorf("equal optimizers have configs %q and %q", a.Config(), b.Config())
	}
	if a, b := optimizers.Adam(0.001), optimizers.Adam(0.001, optimizers.Named("other")); a.Config() == b.Config() {
		t.Errorf("differently named optimizers share config %q", a.Config())
	}
}

func TestErrors(t *testing.T) {
	f32 := func(n int) any { return make([]float32, n) }
	// setup makes a store with w, a float32 vector of 3 elements set to 1.
	type setup func(t *testing.T, store *towers.Store)
	slot := func(name string, dt tensor.Dtype, shape tensor.Shape) setup {
		return func(t *testing.T, store *towers.Store) {
			if _, _, err := store.GetOrCreate(towers.VarSpec{Name: name, Dtype: dt, Shape: shape}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name     string
		opt      optimizers.Optimizer
		setup    setup
		vars     func(store *towers.Store, w *towers.Variable) []*towers.Variable // nil: just w
		grads    []any                                                            // nil: one zero gradient
		nilStore bool
		is       error
		want     []string // substrings of the message
	}{
		{name: "negative lr", opt: optimizers.SGD(-0.1), is: optimizers.ErrConfig,
			want: []string{"optimizer SGD: invalid optimizer configuration: learning rate -0.1 is not finite and non-negative"}},
		{name: "NaN lr", opt: optimizers.Adam(math.NaN()), is: optimizers.ErrConfig, want: []string{"learning rate NaN"}},
		{name: "infinite lr", opt: optimizers.Momentum(math.Inf(1), 0.9), is: optimizers.ErrConfig, want: []string{"learning rate +Inf"}},
		{name: "negative momentum", opt: optimizers.Momentum(0.1, -0.5), is: optimizers.ErrConfig, want: []string{"momentum -0.5 is not finite and non-negative"}},
		{name: "beta1 one", opt: optimizers.Adam(0.1, optimizers.Beta1(1)), is: optimizers.ErrConfig, want: []string{"beta1 1 is not in [0, 1)"}},
		{name: "beta2 negative", opt: optimizers.Adam(0.1, optimizers.Beta2(-0.1)), is: optimizers.ErrConfig, want: []string{"beta2 -0.1 is not in [0, 1)"}},
		{name: "negative epsilon", opt: optimizers.Adam(0.1, optimizers.Epsilon(-1)), is: optimizers.ErrConfig, want: []string{"epsilon -1 is not finite"}},
		{name: "two errors", opt: optimizers.Adam(-1, optimizers.Epsilon(-1)), is: optimizers.ErrConfig,
			want: []string{"learning rate -1 is not finite and non-negative; epsilon -1"}},
		{name: "Beta1 on SGD", opt: optimizers.SGD(0.1, optimizers.Beta1(0.5)), is: optimizers.ErrConfig, want: []string{"option Beta1 applies to Adam only, not SGD"}},
		{name: "Epsilon on Momentum", opt: optimizers.Momentum(0.1, 0.9, optimizers.Epsilon(0.5)), is: optimizers.ErrConfig, want: []string{"option Epsilon applies to Adam, RMSProp and Adagrad only, not Momentum"}},
		{name: "Epsilon on SGD", opt: optimizers.SGD(0.1, optimizers.Epsilon(0.5)), is: optimizers.ErrConfig, want: []string{"option Epsilon applies to Adam, RMSProp and Adagrad only, not SGD"}},
		{name: "Rho on Adam", opt: optimizers.Adam(0.1, optimizers.Rho(0.5)), is: optimizers.ErrConfig, want: []string{"option Rho applies to RMSProp only, not Adam"}},
		{name: "rho one", opt: optimizers.RMSProp(0.1, optimizers.Rho(1)), is: optimizers.ErrConfig, want: []string{"rho 1 is not in [0, 1)"}},
		{name: "negative RMSProp epsilon", opt: optimizers.RMSProp(0.1, optimizers.Epsilon(-1e-7)), is: optimizers.ErrConfig, want: []string{"epsilon -1e-07 is not finite"}},
		{name: "InitialAccumulator on RMSProp", opt: optimizers.RMSProp(0.1, optimizers.InitialAccumulator(1)), is: optimizers.ErrConfig,
			want: []string{"option InitialAccumulator applies to Adagrad and FTRL only, not RMSProp"}},
		{name: "negative accumulator", opt: optimizers.Adagrad(0.1, optimizers.InitialAccumulator(-0.1)), is: optimizers.ErrConfig,
			want: []string{"initial accumulator -0.1 is not finite and non-negative"}},
		{name: "negative weight decay", opt: optimizers.Momentum(0.1, 0.9, optimizers.WeightDecay(-0.1)), is: optimizers.ErrConfig,
			want: []string{"weight decay -0.1 is not finite and non-negative"}},
		{name: "infinite weight decay", opt: optimizers.Adagrad(0.1, optimizers.WeightDecay(math.Inf(1))), is: optimizers.ErrConfig, want: []string{"weight decay +Inf"}},
		{name: "nil schedule", opt: optimizers.SGD(0.1, optimizers.LearningRateSchedule(nil)), is: optimizers.ErrConfig, want: []string{"learning rate schedule: nil schedule"}},
		{name: "piecewise lengths", opt: optimizers.SGD(0.1, optimizers.LearningRateSchedule(optimizers.PiecewiseConstant([]int64{1, 2}, []float64{1, 2}))),
			is: optimizers.ErrConfig, want: []string{"PiecewiseConstant: 2 values for 2 boundaries, want 3"}},
		{name: "piecewise order", opt: optimizers.Adam(0.1, optimizers.LearningRateSchedule(optimizers.PiecewiseConstant([]int64{5, 5}, []float64{1, 2, 3}))),
			is: optimizers.ErrConfig, want: []string{"PiecewiseConstant: boundaries [5 5] are not strictly increasing"}},
		{name: "piecewise value", opt: optimizers.Adam(0.1, optimizers.LearningRateSchedule(optimizers.PiecewiseConstant([]int64{5}, []float64{1, math.NaN()}))),
			is: optimizers.ErrConfig, want: []string{"PiecewiseConstant: value NaN is not finite and non-negative"}},
		{name: "constant rate", opt: optimizers.SGD(0.1, optimizers.LearningRateSchedule(optimizers.ConstantRate(-2))),
			is: optimizers.ErrConfig, want: []string{"ConstantRate: learning rate -2 is not finite"}},
		{name: "exponential steps", opt: optimizers.SGD(0.1, optimizers.LearningRateSchedule(optimizers.ExponentialDecay(0.1, 0, 0.5, false))),
			is: optimizers.ErrConfig, want: []string{"ExponentialDecay: decay steps 0 is not positive"}},
		{name: "exponential rate", opt: optimizers.SGD(0.1, optimizers.LearningRateSchedule(optimizers.ExponentialDecay(0.1, 10, math.Inf(1), false))),
			is: optimizers.ErrConfig, want: []string{"ExponentialDecay: decay rate +Inf is not finite"}},
		{name: "cosine steps", opt: optimizers.SGD(0.1, optimizers.LearningRateSchedule(optimizers.CosineDecay(0.1, -1, 0))),
			is: optimizers.ErrConfig, want: []string{"CosineDecay: decay steps -1 is not positive"}},
		{name: "cosine alpha", opt: optimizers.SGD(0.1, optimizers.LearningRateSchedule(optimizers.CosineDecay(0.1, 10, 2))),
			is: optimizers.ErrConfig, want: []string{"CosineDecay: alpha 2 is not in [0, 1]"}},
		{name: "warmup steps", opt: optimizers.SGD(0.1, optimizers.LearningRateSchedule(optimizers.LinearWarmup(-1, optimizers.ConstantRate(1)))),
			is: optimizers.ErrConfig, want: []string{"LinearWarmup: steps -1 is negative"}},
		{name: "warmup then", opt: optimizers.SGD(0.1, optimizers.LearningRateSchedule(optimizers.LinearWarmup(3, optimizers.CosineDecay(0.1, 0, 0)))),
			is: optimizers.ErrConfig, want: []string{"learning rate schedule: LinearWarmup: CosineDecay: decay steps 0 is not positive"}},
		{name: "warmup nil", opt: optimizers.SGD(0.1, optimizers.LearningRateSchedule(optimizers.LinearWarmup(3, nil))),
			is: optimizers.ErrConfig, want: []string{"LinearWarmup: nil schedule"}},
		{name: "UseNesterov on Adam", opt: optimizers.Adam(0.1, optimizers.UseNesterov()), is: optimizers.ErrConfig, want: []string{"option UseNesterov applies to Momentum only, not Adam"}},
		{name: "empty name", opt: optimizers.SGD(0.1, optimizers.Named("")), is: optimizers.ErrConfig, want: []string{`name "" is not a valid name`}},
		{name: "bad name", opt: optimizers.SGD(0.1, optimizers.Named("my adam")), is: optimizers.ErrConfig, want: []string{`name "my adam" is not a valid name`}},
		{name: "trailing slash", opt: optimizers.SGD(0.1, optimizers.Named("adam/")), is: optimizers.ErrConfig, want: []string{`name "adam/" is not a valid name`}},
		{name: "FTRL zero lr", opt: optimizers.FTRL(0), is: optimizers.ErrConfig, want: []string{"FTRL's learning rate must be positive, not 0"}},
		{name: "FTRL schedule zero", opt: optimizers.FTRL(1, optimizers.LearningRateSchedule(optimizers.PiecewiseConstant([]int64{5}, []float64{0, 1}))),
			setup: func(t *testing.T, store *towers.Store) { newGlobalStep(t, store) },
			is:    optimizers.ErrConfig, want: []string{"gives 0 at step 0: FTRL divides by its learning rate"}},
		{name: "FTRL positive power", opt: optimizers.FTRL(0.1, optimizers.LearningRatePower(0.5)), is: optimizers.ErrConfig,
			want: []string{"learning rate power 0.5 is not finite and at most 0"}},
		{name: "FTRL infinite power", opt: optimizers.FTRL(0.1, optimizers.LearningRatePower(math.Inf(-1))), is: optimizers.ErrConfig,
			want: []string{"learning rate power -Inf is not finite"}},
		{name: "FTRL negative l1", opt: optimizers.FTRL(0.1, optimizers.L1(-1)), is: optimizers.ErrConfig,
			want: []string{"l1 regularization strength -1 is not finite and non-negative"}},
		{name: "FTRL NaN l2", opt: optimizers.FTRL(0.1, optimizers.L2(math.NaN())), is: optimizers.ErrConfig,
			want: []string{"l2 regularization strength NaN is not finite"}},
		{name: "FTRL infinite shrinkage", opt: optimizers.FTRL(0.1, optimizers.L2Shrinkage(math.Inf(1))), is: optimizers.ErrConfig,
			want: []string{"l2 shrinkage regularization strength +Inf is not finite"}},
		{name: "FTRL negative accumulator", opt: optimizers.FTRL(0.1, optimizers.InitialAccumulator(-0.1)), is: optimizers.ErrConfig,
			want: []string{"initial accumulator -0.1 is not finite and non-negative"}},
		{name: "WeightDecay on FTRL", opt: optimizers.FTRL(0.1, optimizers.WeightDecay(0.1)), is: optimizers.ErrConfig,
			want: []string{"option WeightDecay does not apply to FTRL (use L2 or L2Shrinkage)"}},
		{name: "Epsilon on FTRL", opt: optimizers.FTRL(0.1, optimizers.Epsilon(0.1)), is: optimizers.ErrConfig,
			want: []string{"option Epsilon applies to Adam, RMSProp and Adagrad only, not Ftrl"}},
		{name: "L1 on Adagrad", opt: optimizers.Adagrad(0.1, optimizers.L1(0.1)), is: optimizers.ErrConfig, want: []string{"option L1 applies to FTRL only, not Adagrad"}},
		{name: "LearningRatePower on SGD", opt: optimizers.SGD(0.1, optimizers.LearningRatePower(-0.5)), is: optimizers.ErrConfig,
			want: []string{"option LearningRatePower applies to FTRL only, not SGD"}},
		{name: "Lazy on SGD", opt: optimizers.SGD(0.1, optimizers.Lazy()), is: optimizers.ErrConfig,
			want: []string{"option Lazy applies to Momentum, Adam and RMSProp only, not SGD"}},
		{name: "Lazy on FTRL", opt: optimizers.FTRL(0.1, optimizers.Lazy()), is: optimizers.ErrConfig,
			want: []string{"option Lazy applies to Momentum, Adam and RMSProp only, not Ftrl"}},
		{name: "sparse dense shape", opt: optimizers.Adam(0.1),
			grads: []any{towers.IndexedSlices{Indices: []int{0}, Values: []float32{1}, DenseShape: []int{4}}}, is: optimizers.ErrMismatch,
			want: []string{`optimizer Adam: mismatch: variable "w" has shape (3), its indexed slices dense shape [4]`}},
		{name: "sparse rank", opt: optimizers.SGD(0.1),
			grads: []any{towers.IndexedSlices{Indices: []int{0}, Values: []float32{1, 1}, DenseShape: []int{3, 2}}}, is: optimizers.ErrMismatch,
			want: []string{`variable "w" has shape (3), its indexed slices dense shape [3 2]`}},
		{name: "sparse dtype", opt: optimizers.Adagrad(0.1),
			grads: []any{towers.IndexedSlices{Indices: []int{0}, Values: []float64{1}, DenseShape: []int{3}}}, is: optimizers.ErrMismatch,
			want: []string{`variable "w" has dtype float32, its indexed slices values are a []float64`}},
		{name: "sparse id out of range", opt: optimizers.FTRL(0.1),
			grads: []any{towers.IndexedSlices{Indices: []int{1, 3}, Values: []float32{1, 1}, DenseShape: []int{3}}}, is: optimizers.ErrMismatch,
			want: []string{`optimizer Ftrl: mismatch: variable "w": indexed slices: index 3 at position 1 is out of range [0, 3)`}},
		{name: "sparse negative id", opt: optimizers.Momentum(0.1, 0.9),
			grads: []any{towers.IndexedSlices{Indices: []int{-1}, Values: []float32{1}, DenseShape: []int{3}}}, is: optimizers.ErrMismatch,
			want: []string{`variable "w": indexed slices: index -1 at position 0 is out of range [0, 3)`}},
		{name: "sparse values length", opt: optimizers.RMSProp(0.1, optimizers.Lazy()),
			grads: []any{towers.IndexedSlices{Indices: []int{0, 1}, Values: []float32{1}, DenseShape: []int{3}}}, is: optimizers.ErrMismatch,
			want: []string{`variable "w": indexed slices: 1 values for 2 rows of 1 elements`}},
		{name: "sparse second variable", opt: optimizers.SGD(0.1), is: optimizers.ErrMismatch,
			vars: func(store *towers.Store, w *towers.Variable) []*towers.Variable {
				table, _, _ := store.GetOrCreate(towers.VarSpec{Name: "table", Dtype: tensor.Float32, Shape: tensor.Shape{2, 2}, Trainable: true})
				return []*towers.Variable{w, table}
			},
			grads: []any{[]float32{1, 1, 1}, towers.IndexedSlices{Indices: []int{2}, Values: []float32{1, 1}, DenseShape: []int{2, 2}}},
			want:  []string{`variable "table": indexed slices: index 2 at position 0 is out of range [0, 2)`}},
		{name: "sparse pointer", opt: optimizers.SGD(0.1),
			grads: []any{&towers.IndexedSlices{Indices: []int{0}, Values: []float32{1}, DenseShape: []int{3}}}, is: optimizers.ErrMismatch,
			want: []string{`variable "w" (float32): gradient is a *towers.IndexedSlices, not a []float32, []float64 or towers.IndexedSlices`}},
		{name: "nil store", opt: optimizers.SGD(0.1), nilStore: true, want: []string{"optimizer SGD: nil store"}},
		{name: "length mismatch", opt: optimizers.SGD(0.1), grads: []any{f32(3), f32(3)}, is: optimizers.ErrMismatch,
			want: []string{"optimizer SGD: mismatch: 1 variables but 2 gradients"}},
		{name: "gradient dtype", opt: optimizers.Adam(0.1), grads: []any{make([]float64, 3)}, is: optimizers.ErrMismatch,
			want: []string{`variable "w" has dtype float32 and 3 elements (shape (3)), its gradient is a []float64 of 3 elements`}},
		{name: "gradient size", opt: optimizers.Momentum(0.1, 0.9), grads: []any{f32(4)}, is: optimizers.ErrMismatch,
			want: []string{`variable "w" has dtype float32 and 3 elements (shape (3)), its gradient is a []float32 of 4 elements`}},
		{name: "gradient type", opt: optimizers.SGD(0.1), grads: []any{[]int{1, 2, 3}}, is: optimizers.ErrMismatch,
			want: []string{`variable "w" (float32): gradient is a []int, not a []float32, []float64 or towers.IndexedSlices`}},
		{name: "gradient tensor", opt: optimizers.SGD(0.1), grads: []any{tensor.New(tensor.WithBacking([]float32{1, 2, 3}))}, is: optimizers.ErrMismatch,
			want: []string{`variable "w" (float32): gradient is a *tensor.Dense`}},
		{name: "non-float variable", opt: optimizers.SGD(0.1), is: optimizers.ErrMismatch,
			vars: func(store *towers.Store, w *towers.Variable) []*towers.Variable {
				v, _, _ := store.GetOrCreate(towers.VarSpec{Name: "step", Dtype: tensor.Int64})
				return []*towers.Variable{w, v}
			},
			grads: []any{f32(3), []int64{1}},
			want:  []string{`variable "step" has dtype int64, not float32 or float64`}},
		{name: "nil variable", opt: optimizers.SGD(0.1), vars: func(*towers.Store, *towers.Variable) []*towers.Variable { return []*towers.Variable{nil} },
			want: []string{"variable 0 is nil"}},
		{name: "duplicate variable", opt: optimizers.SGD(0.1), grads: []any{f32(3), f32(3)},
			vars: func(_ *towers.Store, w *towers.Variable) []*towers.Variable { return []*towers.Variable{w, w} },
			want: []string{`variable "w" is given twice (at 0 and 1)`}},
		{name: "slot shape", opt: optimizers.Momentum(0.1, 0.9), setup: slot("w/Momentum/momentum", tensor.Float32, tensor.Shape{2}),
			want: []string{`optimizer Momentum: variable "w": slot "momentum": variable "w/Momentum/momentum" exists with shape (2)`}},
		{name: "second slot dtype", opt: optimizers.Adam(0.1), setup: slot("w/Adam/v", tensor.Float64, tensor.Shape{3}),
			want: []string{`optimizer Adam: variable "w": slot "v": variable "w/Adam/v" exists with shape (3) dtype float64`}},
		{name: "iterations dtype", opt: optimizers.Adam(0.1), setup: slot("Adam/iterations", tensor.Float32, nil),
			want: []string{`optimizer Adam: iteration count: variable "Adam/iterations" exists with shape () dtype float32`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := towers.NewStore(towers.StoreConfig{})
			w := newVar(t, store, "w", tensor.Float32, tensor.Shape{3}, 1, 1, 1)
			if tt.setup != nil {
				tt.setup(t, store)
			}
			vars := []*towers.Variable{w}
			if tt.vars != nil {
				vars = tt.vars(store, w)
			}
			grads := tt.grads
			if grads == nil {
				grads = []any{[]float32{1, 1, 1}}
			}
			applyTo := store
			if tt.nilStore {
				applyTo = nil
			}
			err := tt.opt.Apply(applyTo, vars, grads)
			if err == nil {
				t.Fatal("Apply succeeded, want an error")
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q does not wrap %v", err, tt.is)
			}
			if diff := cmp.Diff([]float32{1, 1, 1}, w.Data()); diff != "" {
				t.Errorf("w changed by a failed Apply (-want +got):\n%s", diff)
			}
		})
	}
}

func ExampleSGD() {
	store := towers.NewStore(towers.StoreConfig{})
	w, _, _ := store.GetOrCreate(towers.VarSpec{
		Name: "w", Dtype: tensor.Float64, Shape: tensor.Shape{2}, Trainable: true,
		Init: towers.Values(tensor.New(tensor.WithBacking([]float64{10, 20}))),
	})
	opt := optimizers.SGD(1)
	if err := opt.Apply(store, []*towers.Variable{w}, []any{[]float64{3, -4}}); err != nil {
		fmt.Println(err)
	}
	fmt.Println(opt.Config())
	fmt.Println(w.Data())
	// Output:
	// SGD(name=SGD,lr=1)
	// [7 24]
}

func ExampleMomentum() {
	store := towers.NewStore(towers.StoreConfig{})
	w, _, _ := store.GetOrCreate(towers.VarSpec{Name: "w", Dtype: tensor.Float32, Trainable: true})
	opt := optimizers.Momentum(0.5, 0.9)
	for range 2 {
		if err := opt.Apply(store, []*towers.Variable{w}, []any{[]float32{2}}); err != nil {
			fmt.Println(err)
		}
	}
	accum, _ := store.Value("w/Momentum/momentum")
	fmt.Println(w.Data(), accum)
	// Output:
	// [-2.9] 3.8
}

func ExampleAdam() {
	store := towers.NewStore(towers.StoreConfig{})
	w, _, _ := store.GetOrCreate(towers.VarSpec{
		Name: "dense/kernel", Dtype: tensor.Float32, Shape: tensor.Shape{2}, Trainable: true,
		Init: towers.Values(tensor.New(tensor.WithBacking([]float32{1, 1}))),
	})
	opt := optimizers.Adam(0.1)
	for range 3 {
		if err := opt.Apply(store, []*towers.Variable{w}, []any{[]float32{0.5, -2}}); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Println(opt.Config())
	fmt.Println(store.Names())
	it, _ := store.Value("Adam/iterations")
	fmt.Printf("t=%v w=%.4f\n", it, w.Data())
	// Output:
	// Adam(name=Adam,lr=0.1,beta1=0.9,beta2=0.999,eps=1e-08)
	// [dense/kernel dense/kernel/Adam/m dense/kernel/Adam/v Adam/iterations]
	// t=3 w=[0.7000 1.3000]
}

func ExampleNamed() {
	store := towers.NewStore(towers.StoreConfig{})
	w, _, _ := store.GetOrCreate(towers.VarSpec{Name: "w", Dtype: tensor.Float64, Trainable: true})
	opt := optimizers.Adam(0.01, optimizers.Named("slow_adam"), optimizers.Beta1(0.5))
	_ = opt.Apply(store, []*towers.Variable{w}, []any{[]float64{1}})
	fmt.Println(opt.Name(), store.Names())
	// Output:
	// slow_adam [w w/slow_adam/m w/slow_adam/v slow_adam/iterations]
}

// newGlobalStep creates the store's global step, as the engine does, and
// returns its value for the test to increment after each Apply.
func newGlobalStep(t testing.TB, store *towers.Store) []int64 {
	t.Helper()
	gs, _, err := store.GetOrCreate(towers.VarSpec{Name: towers.GlobalStepName, Dtype: tensor.Int64})
	if err != nil {
		t.Fatal(err)
	}
	return gs.Data().([]int64)
}
