package optimizers_test

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/towers"
)

// sparseVars are the variables of the sparse tests: a table of 16-float
// rows large enough for the update to be spread over the cores, a table of
// 5-float rows (a tail after the assembly's vectors of 8), a vector (rows
// of one element), and a variable with a dense gradient in the same Apply.
var sparseVars = []struct {
	name  string
	shape tensor.Shape
}{
	{"table", tensor.Shape{4200, 16}},
	{"narrow", tensor.Shape{60, 5}},
	{"vec", tensor.Shape{40}},
	{"dense", tensor.Shape{3, 7}},
}

// sparseGrad draws an IndexedSlices for v: n ids, some repeated, some runs
// of consecutive ids, the first and last rows among them, values from
// N(0, 1) in v's dtype.
func sparseGrad(r *rand.Rand, v *towers.Variable, n int) towers.IndexedSlices {
	rows := v.Shape()[0]
	s := towers.IndexedSlices{DenseShape: slices.Clone(v.Shape())}
	if n == 0 {
		return s
	}
	ids := []int{rows - 1, 0}
	for len(ids) < n {
		switch id := r.IntN(rows); r.IntN(4) {
		case 0: // a repeat
			ids = append(ids, ids[r.IntN(len(ids))])
		case 1: // a run
			for k := range min(3, rows-id) {
				ids = append(ids, id+k)
			}
		default:
			ids = append(ids, id)
		}
	}
	s.Indices = ids
	vals := make([]float64, len(ids)*s.RowSize())
	for i := range vals {
		vals[i] = r.NormFloat64()
	}
	s.Values = convert(v.Dtype(), vals)
	return s
}

// densify returns s as a dense gradient: AddTo on zeros.
func densify(t *testing.T, v *towers.Variable, s towers.IndexedSlices) any {
	t.Helper()
	d := convert(v.Dtype(), make([]float64, v.Size()))
	if err := s.AddTo(d); err != nil {
		t.Fatal(err)
	}
	return d
}

// storeSnapshot copies every variable of store.
func storeSnapshot(store *towers.Store) map[string]any {
	out := map[string]any{}
	for _, v := range store.Variables() {
		out[v.Name()] = cloneAll([]any{v.Data()})[0]
	}
	return out
}

// copyStore sets every variable of dst to its value in src.
func copyStore(t *testing.T, dst, src *towers.Store) {
	t.Helper()
	for name, val := range storeSnapshot(src) {
		v, err := dst.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		switch d := v.Data().(type) {
		case []float32:
			copy(d, val.([]float32))
		case []float64:
			copy(d, val.([]float64))
		case []int64:
			copy(d, val.([]int64))
		}
	}
}

// expectRows returns, element by element, dense where the row (of rs
// elements) is touched, before elsewhere.
func expectRows(dense, before any, touched []bool, rs int) any {
	switch d := dense.(type) {
	case []float32:
		return pickRows(d, before.([]float32), touched, rs)
	case []float64:
		return pickRows(d, before.([]float64), touched, rs)
	}
	panic(fmt.Sprintf("unexpected %T", dense))
}

func pickRows[T float32 | float64](dense, before []T, touched []bool, rs int) []T {
	out := slices.Clone(before)
	for i := range out {
		if touched[i/rs] {
			out[i] = dense[i]
		}
	}
	return out
}

var bitsEqual = cmp.Options{
	cmp.Comparer(func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }),
	cmp.Comparer(func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }),
}

// diffBits is "" when every variable of want has got's bits, else a
// cmp.Diff of the first eight elements from the first that differs in
// each variable that does (go-cmp element by element over the whole
// tables would take seconds).
func diffBits(want, got map[string]any) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(want)) {
		w, g := want[name], got[name]
		var first, n int
		switch w := w.(type) {
		case []float32:
			first, n = firstDiff(w, g.([]float32), func(x float32) uint64 { return uint64(math.Float32bits(x)) })
		case []float64:
			first, n = firstDiff(w, g.([]float64), math.Float64bits)
		case []int64:
			first, n = firstDiff(w, g.([]int64), func(x int64) uint64 { return uint64(x) })
		}
		if first < 0 {
			continue
		}
		end := min(first+8, n)
		fmt.Fprintf(&b, "%s[%d:%d]:\n%s", name, first, end, cmp.Diff(slice(w, first, end), slice(g, first, end), bitsEqual))
	}
	return b.String()
}

// firstDiff returns the index of the first element where a and b differ
// in bits (-1 if none) and their length.
func firstDiff[T any](a, b []T, bits func(T) uint64) (int, int) {
	if len(a) != len(b) {
		return 0, min(len(a), len(b))
	}
	for i := range a {
		if bits(a[i]) != bits(b[i]) {
			return i, len(a)
		}
	}
	return -1, len(a)
}

func slice(x any, lo, hi int) any {
	switch x := x.(type) {
	case []float32:
		return x[lo:hi]
	case []float64:
		return x[lo:hi]
	case []int64:
		return x[lo:hi]
	}
	return x
}

// TestSparseApplyEqualsDense applies, from one state, a sparse gradient to
// one store and its densified gradient to another, for several steps (the
// sparse store's state copied into the dense one after each), and
// compares every variable and slot bit for bit: everywhere for Momentum,
// Adam and RMSProp by default (the dense apply's semantics); on the rows
// the gradient names for SGD, Adagrad, FTRL and the Lazy options, every
// other row of the variable and its slots left exactly as it was. The
// ids repeat (Apply sums them), the third step's table gradient has no
// rows, and both stores must hold the same slots.
func TestSparseApplyEqualsDense(t *testing.T) {
	const steps = 4
	sched := optimizers.LearningRateSchedule(optimizers.PiecewiseConstant([]int64{1}, []float64{0.05, 0.02}))
	tests := []struct {
		name     string
		opt      func() optimizers.Optimizer
		rowsOnly bool
		acc0     float64 // the initial accumulator value, if any
	}{
		{"SGD", func() optimizers.Optimizer { return optimizers.SGD(0.1) }, true, 0},
		{"SGD/weight-decay/schedule", func() optimizers.Optimizer { return optimizers.SGD(0, optimizers.WeightDecay(0.5), sched) }, true, 0},
		{"Adagrad", func() optimizers.Optimizer { return optimizers.Adagrad(0.1) }, true, 0.1},
		{"Adagrad/weight-decay", func() optimizers.Optimizer {
			return optimizers.Adagrad(0.1, optimizers.WeightDecay(0.3), optimizers.InitialAccumulator(0))
		}, true, 0},
		{"FTRL", func() optimizers.Optimizer { return optimizers.FTRL(0.1) }, true, 0.1},
		{"FTRL/regularized", func() optimizers.Optimizer {
			return optimizers.FTRL(0.2, optimizers.L1(0.05), optimizers.L2(0.3), optimizers.L2Shrinkage(0.1),
				optimizers.LearningRatePower(-0.3), optimizers.InitialAccumulator(0.5))
		}, true, 0.5},
		{"FTRL/schedule", func() optimizers.Optimizer { return optimizers.FTRL(1, sched, optimizers.LearningRatePower(0)) }, true, 0.1},
		{"Momentum", func() optimizers.Optimizer { return optimizers.Momentum(0.1, 0.9) }, false, 0},
		{"Momentum/nesterov/weight-decay", func() optimizers.Optimizer {
			return optimizers.Momentum(0.1, 0.9, optimizers.UseNesterov(), optimizers.WeightDecay(0.2))
		}, false, 0},
		{"Adam", func() optimizers.Optimizer { return optimizers.Adam(0.01) }, false, 0},
		{"Adam/weight-decay/schedule", func() optimizers.Optimizer { return optimizers.Adam(0, optimizers.WeightDecay(0.5), sched) }, false, 0},
		{"RMSProp", func() optimizers.Optimizer { return optimizers.RMSProp(0.01) }, false, 0},
		{"Momentum/lazy", func() optimizers.Optimizer { return optimizers.Momentum(0.1, 0.9, optimizers.Lazy()) }, true, 0},
		{"Adam/lazy/weight-decay", func() optimizers.Optimizer {
			return optimizers.Adam(0.01, optimizers.Lazy(), optimizers.WeightDecay(0.5))
		}, true, 0},
		{"RMSProp/lazy", func() optimizers.Optimizer { return optimizers.RMSProp(0.01, optimizers.Lazy()) }, true, 0},
	}
	for _, tt := range tests {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(tt.name+"/"+dt.String(), func(t *testing.T) {
				opt := tt.opt()
				stores := [2]*towers.Store{} // dense, sparse
				var vars [2][]*towers.Variable
				var gsteps [2][]int64
				for k := range stores {
					stores[k] = towers.NewStore(towers.StoreConfig{Seed: 11})
					gsteps[k] = newGlobalStep(t, stores[k])
					scope := towers.NewScope(0, 1, towers.CPU(0), stores[k], nil)
					for _, sv := range sparseVars {
						if _, err := scope.Variable(sv.name, dt, sv.shape, towers.RandomNormal(0, 1)); err != nil {
							t.Fatal(err)
						}
						v, err := stores[k].Lookup(sv.name)
						if err != nil {
							t.Fatal(err)
						}
						vars[k] = append(vars[k], v)
					}
				}
				r := rand.New(rand.NewPCG(8, 9))
				for step := 1; step <= steps; step++ {
					sparse := make([]any, len(sparseVars))
					dense := make([]any, len(sparseVars))
					for i, v := range vars[1] {
						if sparseVars[i].name == "dense" {
							g := randGrads(r, []*towers.Variable{v})[0]
							sparse[i], dense[i] = g, g
							continue
						}
						n := 2 + v.Shape()[0]/3
						if step == 3 && sparseVars[i].name == "table" {
							n = 0
						}
						s := sparseGrad(r, v, n)
						sparse[i], dense[i] = s, densify(t, v, s)
					}
					before := storeSnapshot(stores[1])
					if err := opt.Apply(stores[0], vars[0], dense); err != nil {
						t.Fatalf("step %d: dense: %v", step, err)
					}
					if err := opt.Apply(stores[1], vars[1], sparse); err != nil {
						t.Fatalf("step %d: sparse: %v", step, err)
					}
					gsteps[0][0]++
					gsteps[1][0]++
					if diff := cmp.Diff(stores[0].Names(), stores[1].Names()); diff != "" {
						t.Fatalf("step %d: store names (-dense +sparse):\n%s", step, diff)
					}
					got, want := storeSnapshot(stores[1]), storeSnapshot(stores[0])
					for i, sv := range sparseVars {
						s, ok := sparse[i].(towers.IndexedSlices)
						if !ok || !tt.rowsOnly {
							continue
						}
						touched := make([]bool, s.DenseShape[0])
						for _, id := range s.Indices {
							touched[id] = true
						}
						rs := s.RowSize()
						for name := range want {
							if name != sv.name && !strings.HasPrefix(name, sv.name+"/") {
								continue
							}
							b, ok := before[name]
							if !ok { // a slot this step made: its initial value
								init := 0.0
								if strings.HasSuffix(name, "/accumulator") {
									init = tt.acc0
								}
								b = convert(dt, slices.Repeat([]float64{init}, vars[1][i].Size()))
							}
							want[name] = expectRows(want[name], b, touched, rs)
						}
					}
					if diff := diffBits(want, got); diff != "" {
						t.Fatalf("step %d: variables and slots (-want +sparse):\n%s", step, diff)
					}
					// The table or its slots moved, except where a gradient
					// with no rows leaves it as it was.
					tableBefore, tableAfter := map[string]any{}, map[string]any{}
					for name, v := range got {
						if name == "table" || strings.HasPrefix(name, "table/") {
							tableBefore[name], tableAfter[name] = before[name], v
						}
					}
					if changed := diffBits(tableBefore, tableAfter) != ""; changed == (step == 3 && tt.rowsOnly) {
						t.Errorf("step %d: the table or its slots changed = %v", step, changed)
					}
					copyStore(t, stores[0], stores[1])
				}
			})
		}
	}
}

// TestSparseSlots: a sparse gradient, with rows or without, makes the
// slots a dense one makes, with their initial values where no row touched
// them, and leaves the variable as it was when it has no rows (SGD,
// Adagrad, FTRL, the Lazy options).
func TestSparseSlots(t *testing.T) {
	for _, opt := range []optimizers.Optimizer{
		optimizers.SGD(0.1), optimizers.Adagrad(0.1, optimizers.InitialAccumulator(0.25)),
		optimizers.FTRL(0.1, optimizers.InitialAccumulator(0.5)), optimizers.Adam(0.1, optimizers.Lazy()),
	} {
		t.Run(opt.Name(), func(t *testing.T) {
			dense := towers.NewStore(towers.StoreConfig{})
			sparse := towers.NewStore(towers.StoreConfig{})
			wd := newVar(t, dense, "w", tensor.Float32, tensor.Shape{3, 2}, 1, 2, 3, 4, 5, 6)
			ws := newVar(t, sparse, "w", tensor.Float32, tensor.Shape{3, 2}, 1, 2, 3, 4, 5, 6)
			if err := opt.Apply(dense, []*towers.Variable{wd}, []any{make([]float32, 6)}); err != nil {
				t.Fatal(err)
			}
			empty := towers.IndexedSlices{DenseShape: []int{3, 2}}
			if err := opt.Apply(sparse, []*towers.Variable{ws}, []any{empty}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(dense.Names(), sparse.Names()); diff != "" {
				t.Fatalf("store names (-dense +sparse):\n%s", diff)
			}
			for _, name := range sparse.Names() {
				v, _ := sparse.Lookup(name)
				if name == "w" {
					if diff := cmp.Diff([]float32{1, 2, 3, 4, 5, 6}, v.Data()); diff != "" {
						t.Errorf("w changed by a gradient with no rows (-want +got):\n%s", diff)
					}
					continue
				}
				if strings.HasSuffix(name, "/iterations") {
					continue // counts Applies, checked elsewhere
				}
				// A dense zero gradient leaves these slots as they start.
				d, _ := dense.Lookup(name)
				if diff := cmp.Diff(d.Data(), v.Data()); diff != "" {
					t.Errorf("slot %s (-dense +sparse):\n%s", name, diff)
				}
			}
		})
	}
}

// ftrlReference is FTRL-Proximal as TensorFlow's ApplyFtrlV2 documents it,
// worked out in float64 for one weight, independently of the package:
// it returns the weight, accumulator and linear term after each gradient.
func ftrlReference(w float64, grads []float64, lr, power, acc0, l1, l2, shrink float64) (ws, accs, lins []float64) {
	acc, lin := acc0, 0.0
	for _, g := range grads {
		gs := g + 2*shrink*w
		newAcc := acc + g*g
		lin += gs - (math.Pow(newAcc, -power)-math.Pow(acc, -power))/lr*w
		quadratic := 1/(math.Pow(newAcc, power)*lr) + 2*l2
		if math.Abs(lin) > l1 {
			sign := 1.0
			if lin < 0 {
				sign = -1
			}
			w = (sign*l1 - lin) / quadratic
		} else {
			w = 0
		}
		acc = newAcc
		ws, accs, lins = append(ws, w), append(accs, acc), append(lins, lin)
	}
	return ws, accs, lins
}

// TestFTRLHandComputed runs FTRL on a variable of three weights for
// several steps, dense and as sparse gradients whose rows repeat (each
// gradient given as two halves), and compares weights and both slots with
// ftrlReference after every step. The first cases are TensorFlow's
// ftrl_test.py's, whose published weights (testFtrlwithoutRegularization,
// …WithL1, …WithL1_L2) the reference must give too.
func TestFTRLHandComputed(t *testing.T) {
	tests := []struct {
		name                            string
		opts                            []optimizers.Option
		lr, power, acc0, l1, l2, shrink float64
		w0                              []float64
		grads                           []float64 // per weight, the same every step
		steps                           int
		tf                              []float64 // TensorFlow's published weights after steps, if any
	}{
		{name: "no regularization", lr: 3, power: -0.5, acc0: 0.1,
			w0: []float64{0, 0, 0}, grads: []float64{0.1, 0.2, 0.01}, steps: 3, tf: []float64{-2.60260963, -4.29698515, -0.28432083}},
		{name: "l1", opts: []optimizers.Option{optimizers.L1(0.001)}, lr: 3, power: -0.5, acc0: 0.1, l1: 0.001,
			w0: []float64{1, 2, 4}, grads: []float64{0.1, 0.2, 0.01}, steps: 10, tf: []float64{-7.66718769, -10.91273689, -0.93460727}},
		{name: "l1 l2", opts: []optimizers.Option{optimizers.L1(0.001), optimizers.L2(2)}, lr: 3, power: -0.5, acc0: 0.1, l1: 0.001, l2: 2,
			w0: []float64{1, 2, 4}, grads: []float64{0.1, 0.2, 0.01}, steps: 10, tf: []float64{-0.24059935, -0.46829352, -0.02406147}},
		{name: "l1 within", opts: []optimizers.Option{optimizers.L1(0.5)}, lr: 1, power: -0.5, acc0: 0.1, l1: 0.5,
			w0: []float64{1, -1, 0.5}, grads: []float64{0.3, -0.2, 0.1}, steps: 4},
		{name: "shrinkage power", opts: []optimizers.Option{optimizers.L2Shrinkage(0.25), optimizers.L2(0.1), optimizers.LearningRatePower(-0.3),
			optimizers.InitialAccumulator(0.4)}, lr: 0.5, power: -0.3, acc0: 0.4, l2: 0.1, shrink: 0.25,
			w0: []float64{1, -2, 0.5}, grads: []float64{0.5, 0.25, -1}, steps: 5},
		{name: "fixed rate", opts: []optimizers.Option{optimizers.LearningRatePower(0), optimizers.InitialAccumulator(0)}, lr: 0.5, power: 0,
			w0: []float64{1, 2, 3}, grads: []float64{0.5, -0.25, 1}, steps: 3},
	}
	for _, tt := range tests {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			for _, sparse := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%v/sparse=%v", tt.name, dt, sparse), func(t *testing.T) {
					var wantW, wantAcc, wantLin [][]float64 // [step][weight]
					wantW = make([][]float64, tt.steps)
					wantAcc = make([][]float64, tt.steps)
					wantLin = make([][]float64, tt.steps)
					for i, w := range tt.w0 {
						grads := make([]float64, tt.steps)
						for s := range grads {
							grads[s] = tt.grads[i]
						}
						ws, accs, lins := ftrlReference(w, grads, tt.lr, tt.power, tt.acc0, tt.l1, tt.l2, tt.shrink)
						for s := range tt.steps {
							wantW[s] = append(wantW[s], ws[s])
							wantAcc[s] = append(wantAcc[s], accs[s])
							wantLin[s] = append(wantLin[s], lins[s])
						}
					}
					if tt.tf != nil {
						if diff := cmp.Diff(tt.tf, wantW[tt.steps-1], cmpopts.EquateApprox(1e-6, 0)); diff != "" {
							t.Fatalf("the reference is not TensorFlow's (-tensorflow +reference):\n%s", diff)
						}
					}
					store := towers.NewStore(towers.StoreConfig{})
					w := newVar(t, store, "w", dt, tensor.Shape{3}, tt.w0...)
					opt := optimizers.FTRL(tt.lr, tt.opts...)
					var g any = convert(dt, tt.grads)
					if sparse {
						half := make([]float64, 6)
						for i, x := range tt.grads {
							half[i], half[5-i] = x/2, x/2
						}
						g = towers.IndexedSlices{Indices: []int{0, 1, 2, 2, 1, 0}, Values: convert(dt, half), DenseShape: []int{3}}
					}
					for s := range tt.steps {
						if err := opt.Apply(store, []*towers.Variable{w}, []any{g}); err != nil {
							t.Fatal(err)
						}
						acc, _ := store.Lookup("w/Ftrl/accumulator")
						lin, _ := store.Lookup("w/Ftrl/linear")
						got := []any{w.Data(), acc.Data(), lin.Data()}
						want := []any{convert(dt, wantW[s]), convert(dt, wantAcc[s]), convert(dt, wantLin[s])}
						if diff := cmp.Diff(want, got, tolerance(dt)); diff != "" {
							t.Fatalf("after step %d: [w accumulator linear] (-reference +got):\n%s", s+1, diff)
						}
					}
				})
			}
		}
	}
}

// A sparse gradient, the rows of a table a batch touched: row 2 twice
// (its rows summed), row 0 once, row 1 not at all.
func Example_sparseGradient() {
	store := towers.NewStore(towers.StoreConfig{})
	table, _, _ := store.GetOrCreate(towers.VarSpec{
		Name: "table", Dtype: tensor.Float64, Shape: tensor.Shape{3, 2}, Trainable: true,
		Init: towers.Constant(1),
	})
	grad := towers.IndexedSlices{Indices: []int{2, 0, 2}, Values: []float64{1, 2, 3, 4, 5, 6}, DenseShape: []int{3, 2}}
	if err := optimizers.SGD(0.5).Apply(store, []*towers.Variable{table}, []any{grad}); err != nil {
		fmt.Println(err)
	}
	fmt.Println(table.Data())
	// Output:
	// [-0.5 -1 1 1 -2 -3]
}

func ExampleFTRL() {
	store := towers.NewStore(towers.StoreConfig{})
	w, _, _ := store.GetOrCreate(towers.VarSpec{Name: "w", Dtype: tensor.Float64, Trainable: true})
	opt := optimizers.FTRL(3, optimizers.L1(0.01))
	if err := opt.Apply(store, []*towers.Variable{w}, []any{[]float64{0.1}}); err != nil {
		fmt.Println(err)
	}
	fmt.Println(opt.Config())
	fmt.Println(store.Names())
	// linear = 0.1, accumulator = 0.1 + 0.1², w = -(0.1 - 0.01)/(√0.11/3)
	fmt.Printf("%.4f\n", w.Data())
	// Output:
	// Ftrl(name=Ftrl,lr=3,lr_power=-0.5,initial_accumulator=0.1,l1=0.01,l2=0,l2_shrinkage=0)
	// [w w/Ftrl/accumulator w/Ftrl/linear]
	// [-0.8141]
}
