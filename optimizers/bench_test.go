package optimizers_test

import (
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/towers"
)

// BenchmarkUpdate times one Apply over a float32 variable of 1<<16
// elements. In the normal cases the gradients and slots are ordinary
// numbers; in the subnormal cases a constant tiny gradient would keep a slot
// in the subnormal range (below 2^-126) step after step: Momentum's
// accumulator with g = 1e-39, Adam's and RMSProp's second moment with
// g = 1e-20, whose square 1e-40 is subnormal (with the slot at zero the
// kernels flush such a gradient before squaring it: computing the square
// made an Adam step five times as slow). Run with -cpu 1 to time the
// kernel alone.
//
// BenchmarkUpdateOverSubnormalSlots is the case of a model whose units stop
// getting gradients late in training: every slot full of subnormal values
// (refilled before each update, as are the normal ones it is compared
// with), the gradient zero.
func BenchmarkUpdate(b *testing.B) {
	const n = 1 << 16
	kinds := []struct {
		name string
		opt  func() optimizers.Optimizer
		tiny float32
	}{
		{"Momentum", func() optimizers.Optimizer { return optimizers.Momentum(0.01, 0.9) }, 1e-39},
		{"Adam", func() optimizers.Optimizer { return optimizers.Adam(0.001) }, 1e-20},
		{"RMSProp", func() optimizers.Optimizer { return optimizers.RMSProp(0.001) }, 1e-20},
	}
	for _, k := range kinds {
		for _, sub := range []string{"normal", "subnormal"} {
			b.Run(k.name+"/"+sub+"/f32", func(b *testing.B) {
				store := towers.NewStore(towers.StoreConfig{Seed: 1})
				w, _, err := store.GetOrCreate(towers.VarSpec{Name: "w", Dtype: tensor.Float32, Shape: tensor.Shape{n},
					Init: towers.RandomNormal(0, 1), Trainable: true})
				if err != nil {
					b.Fatal(err)
				}
				g := make([]float32, n)
				for i := range g {
					if sub == "normal" {
						g[i] = float32(i%17-8) * 0.125
					} else {
						g[i] = k.tiny
					}
				}
				opt := k.opt()
				vars, grads := []*towers.Variable{w}, []any{g}
				// Bring the slots to their steady state.
				for range 300 {
					if err := opt.Apply(store, vars, grads); err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(n * 4)
				for b.Loop() {
					if err := opt.Apply(store, vars, grads); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkUpdateOverSubnormalSlots(b *testing.B) {
	const n = 1 << 16
	kinds := []struct {
		name  string
		opt   func() optimizers.Optimizer
		slots []string
	}{
		{"Momentum", func() optimizers.Optimizer { return optimizers.Momentum(0.01, 0.9) }, []string{"w/Momentum/momentum"}},
		{"Adam", func() optimizers.Optimizer { return optimizers.Adam(0.001) }, []string{"w/Adam/m", "w/Adam/v"}},
		{"RMSProp", func() optimizers.Optimizer { return optimizers.RMSProp(0.001) }, []string{"w/RMSProp/rms"}},
	}
	for _, k := range kinds {
		for _, sub := range []string{"normal", "subnormal"} {
			b.Run(k.name+"/"+sub+"/f32", func(b *testing.B) {
				store := towers.NewStore(towers.StoreConfig{Seed: 1})
				w, _, err := store.GetOrCreate(towers.VarSpec{Name: "w", Dtype: tensor.Float32, Shape: tensor.Shape{n},
					Init: towers.RandomNormal(0, 1), Trainable: true})
				if err != nil {
					b.Fatal(err)
				}
				opt := k.opt()
				vars, grads := []*towers.Variable{w}, []any{make([]float32, n)}
				if err := opt.Apply(store, vars, grads); err != nil { // creates the slots
					b.Fatal(err)
				}
				fill := make([]float32, n)
				for i := range fill {
					fill[i] = float32(i%7+1) * 1e-39 // subnormal: below 2^-126 ≈ 1.18e-38
					if sub == "normal" {
						fill[i] = float32(i%7+1) * 1e-3
					}
				}
				var slots [][]float32
				for _, name := range k.slots {
					v, err := store.Lookup(name)
					if err != nil {
						b.Fatal(err)
					}
					slots = append(slots, v.Data().([]float32))
				}
				b.SetBytes(n * 4)
				for b.Loop() {
					for _, s := range slots {
						copy(s, fill)
					}
					if err := opt.Apply(store, vars, grads); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSparseApply times one Apply to a float32 embedding table of
// 1M rows of 16 (64 MiB) whose gradient touches 4096 rows drawn at
// random (a few repeat): as a sparse gradient (sparse), and as its
// densified gradient (dense). SGD, Adagrad and FTRL update the sparse
// gradient's rows alone; Adam's default walks every row (the dense
// apply's semantics) and its Lazy option the rows alone. The sparse
// gradient's deduplication is part of its step.
func BenchmarkSparseApply(b *testing.B) {
	const rows, dim, touched = 1 << 20, 16, 4096
	kinds := []struct {
		name string
		opt  func() optimizers.Optimizer
	}{
		{"SGD", func() optimizers.Optimizer { return optimizers.SGD(0.01) }},
		{"Adagrad", func() optimizers.Optimizer { return optimizers.Adagrad(0.01) }},
		{"FTRL", func() optimizers.Optimizer { return optimizers.FTRL(0.01, optimizers.L1(0.001)) }},
		{"Adam", func() optimizers.Optimizer { return optimizers.Adam(0.001) }},
		{"Adam/lazy", func() optimizers.Optimizer { return optimizers.Adam(0.001, optimizers.Lazy()) }},
	}
	r := rand.New(rand.NewPCG(1, 2))
	s := towers.IndexedSlices{DenseShape: []int{rows, dim}, Indices: make([]int, touched)}
	vals := make([]float32, touched*dim)
	for i := range s.Indices {
		s.Indices[i] = r.IntN(rows)
	}
	for i := range vals {
		vals[i] = float32(r.NormFloat64())
	}
	s.Values = vals
	for _, k := range kinds {
		for _, mode := range []string{"dense", "sparse"} {
			b.Run(k.name+"/"+mode, func(b *testing.B) {
				store := towers.NewStore(towers.StoreConfig{Seed: 1})
				w, _, err := store.GetOrCreate(towers.VarSpec{Name: "table", Dtype: tensor.Float32, Shape: tensor.Shape{rows, dim},
					Init: towers.RandomNormal(0, 0.1), Trainable: true})
				if err != nil {
					b.Fatal(err)
				}
				var g any = s
				if mode == "dense" {
					d := make([]float32, rows*dim)
					if err := s.AddTo(d); err != nil {
						b.Fatal(err)
					}
					g = d
				}
				opt := k.opt()
				vars, grads := []*towers.Variable{w}, []any{g}
				if err := opt.Apply(store, vars, grads); err != nil { // creates the slots
					b.Fatal(err)
				}
				for b.Loop() {
					if err := opt.Apply(store, vars, grads); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
