package optimizers_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/towers"
)

func TestSchedules(t *testing.T) {
	c25 := 0.5 * (1 + math.Cos(math.Pi/4)) // the cosine factor a quarter of the way
	tests := []struct {
		s     optimizers.Schedule
		str   string
		steps []int64
		want  []float64
	}{
		{optimizers.ConstantRate(0.1), "Constant(0.1)", []int64{0, 5, 1 << 40}, []float64{0.1, 0.1, 0.1}},
		{
			optimizers.PiecewiseConstant([]int64{10, 20}, []float64{1, 0.5, 0.1}),
			"PiecewiseConstant(boundaries=[10 20],values=[1 0.5 0.1])",
			[]int64{0, 9, 10, 11, 20, 21, 1000},
			[]float64{1, 1, 1, 0.5, 0.5, 0.1, 0.1},
		},
		{optimizers.PiecewiseConstant(nil, []float64{0.3}), "PiecewiseConstant(boundaries=[],values=[0.3])", []int64{0, 7}, []float64{0.3, 0.3}},
		{
			optimizers.ExponentialDecay(0.1, 10, 0.5, false),
			"ExponentialDecay(lr=0.1,decay_steps=10,rate=0.5,staircase=false)",
			[]int64{0, 5, 10, 25},
			[]float64{0.1, 0.1 / math.Sqrt2, 0.05, 0.025 / math.Sqrt2},
		},
		{
			optimizers.ExponentialDecay(0.1, 10, 0.5, true),
			"ExponentialDecay(lr=0.1,decay_steps=10,rate=0.5,staircase=true)",
			[]int64{0, 5, 9, 10, 19, 25},
			[]float64{0.1, 0.1, 0.1, 0.05, 0.05, 0.025},
		},
		{
			optimizers.CosineDecay(1, 100, 0),
			"CosineDecay(lr=1,decay_steps=100,alpha=0)",
			[]int64{0, 25, 50, 100, 200},
			[]float64{1, c25, 0.5, 0, 0},
		},
		{
			optimizers.CosineDecay(2, 100, 0.1),
			"CosineDecay(lr=2,decay_steps=100,alpha=0.1)",
			[]int64{0, 25, 50, 100, 1000},
			[]float64{2, 2 * (0.9*c25 + 0.1), 2 * 0.55, 0.2, 0.2},
		},
		{
			optimizers.LinearWarmup(4, optimizers.ConstantRate(0.2)),
			"LinearWarmup(steps=4,then=Constant(0.2))",
			[]int64{0, 1, 3, 4, 100},
			[]float64{0.05, 0.1, 0.2, 0.2, 0.2},
		},
		{
			// The warm-up scales the rate the decay gives at the same step.
			optimizers.LinearWarmup(10, optimizers.ExponentialDecay(1, 4, 0.5, true)),
			"LinearWarmup(steps=10,then=ExponentialDecay(lr=1,decay_steps=4,rate=0.5,staircase=true))",
			[]int64{0, 4, 9, 10, 12},
			[]float64{0.1, 0.5 * 0.5, 0.25 * 1, 0.25, 0.125},
		},
		{optimizers.LinearWarmup(0, optimizers.ConstantRate(3)), "LinearWarmup(steps=0,then=Constant(3))", []int64{0, 1}, []float64{3, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.str, func(t *testing.T) {
			if got := tt.s.String(); got != tt.str {
				t.Errorf("String() = %q, want %q", got, tt.str)
			}
			got := make([]float64, len(tt.steps))
			for i, step := range tt.steps {
				got[i] = tt.s.Rate(step)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(1e-14, 1e-15)); diff != "" {
				t.Errorf("rates at steps %v (-want +got):\n%s", tt.steps, diff)
			}
		})
	}
}

// TestScheduleDrivesRate checks, for every kind and dtype, that an
// optimizer with a schedule takes at global step k exactly the step the
// same optimizer with the constant learning rate Rate(k) takes, and that
// LearningRate reports that rate.
func TestScheduleDrivesRate(t *testing.T) {
	sched := optimizers.LinearWarmup(2, optimizers.PiecewiseConstant([]int64{2, 3}, []float64{0.1, 0.05, 0.02}))
	kinds := []struct {
		name string
		make func(lr float64, opts ...optimizers.Option) optimizers.Optimizer
	}{
		{"SGD", optimizers.SGD},
		{"Momentum", func(lr float64, opts ...optimizers.Option) optimizers.Optimizer {
			return optimizers.Momentum(lr, 0.9, append(opts, optimizers.UseNesterov())...)
		}},
		{"Adam", optimizers.Adam},
		{"RMSProp", optimizers.RMSProp},
		{"Adagrad", optimizers.Adagrad},
	}
	wantRates := []float64{0.05, 0.1, 0.1, 0.05, 0.02, 0.02}
	for _, k := range kinds {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(k.name+"/"+dt.String(), func(t *testing.T) {
				scheduled := k.make(123, optimizers.LearningRateSchedule(sched), optimizers.WeightDecay(0.1), optimizers.Named("opt"))
				s1, vars1 := newStore(t, dt, towers.StoreConfig{})
				s2, vars2 := newStore(t, dt, towers.StoreConfig{})
				gs1, gs2 := newGlobalStep(t, s1), newGlobalStep(t, s2)
				r := rand.New(rand.NewPCG(8, 9))
				for step, want := range wantRates {
					if got := scheduled.LearningRate(int64(step)); got != want {
						t.Errorf("LearningRate(%d) = %v, want %v", step, got, want)
					}
					grads := randGrads(r, vars1)
					if err := scheduled.Apply(s1, vars1, grads); err != nil {
						t.Fatal(err)
					}
					constant := k.make(want, optimizers.WeightDecay(0.1), optimizers.Named("opt"))
					if err := constant.Apply(s2, vars2, grads); err != nil {
						t.Fatal(err)
					}
					gs1[0]++
					gs2[0]++
					if diff := cmp.Diff(snapshot(s2), snapshot(s1)); diff != "" {
						t.Fatalf("step %d: scheduled differs from constant rate %v (-constant +scheduled):\n%s", step, want, diff)
					}
				}
			})
		}
	}
}

func snapshot(store *towers.Store) map[string]any {
	out := map[string]any{}
	for _, v := range store.Variables() {
		out[v.Name()] = cloneAll([]any{v.Data()})[0]
	}
	return out
}

// TestSubnormalFlush sets every slot to values around the smallest normal
// number, applies a zero gradient, and checks that each slot value that
// comes out subnormal is exactly zero and every other one is what the
// update rule gives, exactly: factor*old with factor 0.5 (the decay rates
// set to 0.5) or 1 (Adagrad, which adds g*g = 0).
func TestSubnormalFlush(t *testing.T) {
	tests := []struct {
		opt    optimizers.Optimizer
		slots  []string
		factor float64
	}{
		{optimizers.Momentum(0.1, 0.5), []string{"momentum"}, 0.5},
		{optimizers.Momentum(0.1, 0.5, optimizers.UseNesterov(), optimizers.Named("nag")), []string{"momentum"}, 0.5},
		{optimizers.Adam(0.1, optimizers.Beta1(0.5), optimizers.Beta2(0.5)), []string{"m", "v"}, 0.5},
		{optimizers.RMSProp(0.1, optimizers.Rho(0.5)), []string{"rms"}, 0.5},
		{optimizers.Adagrad(0.1), []string{"accumulator"}, 1},
	}
	for _, tt := range tests {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(tt.opt.Name()+"/"+dt.String(), func(t *testing.T) {
				sn := 0x1p-1022 // the smallest normal number
				if dt == tensor.Float32 {
					sn = 0x1p-126
				}
				// Slots with negative values would make Adam's and
				// RMSProp's square roots NaN; they are fine here, as the
				// weights are not checked.
				old := []float64{4 * sn, 2 * sn, sn, 1.5 * sn, -2 * sn, -sn, 1, sn / 2, 0, 3, -sn / 4, 0.75 * sn}
				want := make([]float64, len(old))
				flushed := 0
				for i, x := range old {
					want[i] = tt.factor * x
					if math.Abs(want[i]) < sn {
						want[i] = 0
						if x != 0 {
							flushed++
						}
					}
				}
				if flushed < 3 {
					t.Fatalf("only %d values to flush", flushed)
				}
				store := towers.NewStore(towers.StoreConfig{})
				w := newVar(t, store, "w", dt, tensor.Shape{len(old)}, make([]float64, len(old))...)
				for _, s := range tt.slots {
					newVar(t, store, "w/"+tt.opt.Name()+"/"+s, dt, tensor.Shape{len(old)}, old...)
				}
				if err := tt.opt.Apply(store, []*towers.Variable{w}, []any{convert(dt, make([]float64, len(old)))}); err != nil {
					t.Fatal(err)
				}
				for _, s := range tt.slots {
					v, err := store.Lookup("w/" + tt.opt.Name() + "/" + s)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(convert(dt, want), v.Data()); diff != "" {
						t.Errorf("slot %s from %v (-want +got):\n%s", s, old, diff)
					}
				}
			})
		}
	}
}

// TestResumeExact applies K steps, restores a new store from the weights
// (Weights, SetWeights) and a copy of every other variable (slots, the
// global step), continues both, and checks every variable bit for bit.
func TestResumeExact(t *testing.T) {
	opts := []optimizers.Optimizer{
		optimizers.SGD(0.1, optimizers.LearningRateSchedule(optimizers.LinearWarmup(4, optimizers.ConstantRate(0.1)))),
		optimizers.Momentum(0.1, 0.9),
		optimizers.Momentum(0.1, 0.9, optimizers.UseNesterov(), optimizers.WeightDecay(0.01),
			optimizers.LearningRateSchedule(optimizers.PiecewiseConstant([]int64{2, 4}, []float64{0.1, 0.05, 0.01}))),
		optimizers.Adam(0.01),
		optimizers.Adam(0.01, optimizers.WeightDecay(0.1), optimizers.LearningRateSchedule(optimizers.CosineDecay(0.01, 5, 0.1))),
		optimizers.RMSProp(0.01, optimizers.LearningRateSchedule(optimizers.ExponentialDecay(0.01, 2, 0.5, false))),
		optimizers.Adagrad(0.1, optimizers.WeightDecay(0.05)),
	}
	const k = 3
	for _, opt := range opts {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(opt.Config()+"/"+dt.String(), func(t *testing.T) {
				store, vars := newStore(t, dt, towers.StoreConfig{})
				gs := newGlobalStep(t, store)
				r := rand.New(rand.NewPCG(5, 6))
				for range k {
					if err := opt.Apply(store, vars, randGrads(r, vars)); err != nil {
						t.Fatal(err)
					}
					gs[0]++
				}
				// Another seed: every weight must come from SetWeights.
				restored, rvars := newStore(t, dt, towers.StoreConfig{Seed: 99})
				if err := restored.SetWeights(store.Weights()); err != nil {
					t.Fatal(err)
				}
				for _, v := range store.Variables() {
					if v.Trainable() {
						continue
					}
					val, err := store.Value(v.Name())
					if err != nil {
						t.Fatal(err)
					}
					if _, _, err := restored.GetOrCreate(towers.VarSpec{Name: v.Name(), Dtype: v.Dtype(), Shape: v.Shape(), Init: towers.Values(val)}); err != nil {
						t.Fatal(err)
					}
				}
				rgs := newGlobalStep(t, restored)
				if rgs[0] != k {
					t.Fatalf("restored global step %d, want %d", rgs[0], k)
				}
				for range k {
					grads := randGrads(r, vars)
					if err := opt.Apply(store, vars, grads); err != nil {
						t.Fatal(err)
					}
					if err := opt.Apply(restored, rvars, grads); err != nil {
						t.Fatal(err)
					}
					gs[0]++
					rgs[0]++
				}
				if diff := cmp.Diff(store.Names(), restored.Names()); diff != "" {
					t.Errorf("names (-original +restored):\n%s", diff)
				}
				if diff := cmp.Diff(snapshot(store), snapshot(restored)); diff != "" {
					t.Errorf("variables differ after resuming (-original +restored):\n%s", diff)
				}
			})
		}
	}
}

// rateFunc is a user-defined schedule.
type rateFunc func(int64) float64

func (f rateFunc) Rate(step int64) float64 { return f(step) }
func (f rateFunc) String() string          { return "rateFunc" }

func TestScheduleErrors(t *testing.T) {
	sched := optimizers.LearningRateSchedule
	tests := []struct {
		name       string
		opt        optimizers.Optimizer
		globalStep tensor.Dtype // nil Type: no global step
		is         error
		want       string
	}{
		{name: "no global step", opt: optimizers.SGD(0.1, sched(optimizers.ConstantRate(0.1))), is: towers.ErrNotFound,
			want: `optimizer SGD: learning rate schedule Constant(0.1) needs the global step: variable "global_step": no such variable`},
		{name: "float global step", opt: optimizers.Adam(0.1, sched(optimizers.ConstantRate(0.1))), globalStep: tensor.Float32,
			want: `global step "global_step" has dtype float32 shape (), not an int64 scalar`},
		{name: "NaN rate", opt: optimizers.Momentum(0.1, 0.9, sched(rateFunc(func(int64) float64 { return math.NaN() }))), globalStep: tensor.Int64,
			is: optimizers.ErrConfig, want: "learning rate schedule rateFunc gives NaN at step 0, not finite and non-negative"},
		{name: "negative rate", opt: optimizers.RMSProp(0.1, sched(rateFunc(func(int64) float64 { return -1 }))), globalStep: tensor.Int64,
			is: optimizers.ErrConfig, want: "gives -1 at step 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := towers.NewStore(towers.StoreConfig{})
			if tt.globalStep.Type != nil {
				if _, _, err := store.GetOrCreate(towers.VarSpec{Name: towers.GlobalStepName, Dtype: tt.globalStep}); err != nil {
					t.Fatal(err)
				}
			}
			w := newVar(t, store, "w", tensor.Float32, tensor.Shape{3}, 1, 1, 1)
			before := snapshot(store)
			err := tt.opt.Apply(store, []*towers.Variable{w}, []any{[]float32{1, 2, 3}})
			if err == nil {
				t.Fatal("Apply succeeded, want an error")
			}
			if got := err.Error(); !containsStr(got, tt.want) {
				t.Errorf("error %q does not contain %q", got, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q does not wrap %v", err, tt.is)
			}
			after := snapshot(store)
			for name, b := range before {
				if diff := cmp.Diff(b, after[name]); diff != "" {
					t.Errorf("%s changed by a failed Apply (-before +after):\n%s", name, diff)
				}
			}
		})
	}
}

func containsStr(s, sub string) bool { return strings.Contains(s, sub) }
