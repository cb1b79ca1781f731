package optimizers_test

import (
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/towers"
)

// TestSparseApplyDeduplicatedNoCopy: a sparse gradient already
// deduplicated (ascending distinct ids, as the engine's sum of lookups
// is) is updated from as it is, not copied first: an Apply allocates far
// less than its rows; and it updates as its copy would.
func TestSparseApplyDeduplicatedNoCopy(t *testing.T) {
	const rows, dim, touched = 8192, 16, 4096
	g := towers.IndexedSlices{DenseShape: []int{rows, dim}, Values: make([]float32, touched*dim)}
	for k := range touched {
		g.Indices = append(g.Indices, 2*k)
	}
	for i := range g.Values.([]float32) {
		g.Values.([]float32)[i] = float32(i%7) - 3
	}
	if !g.IsDeduplicated() {
		t.Fatal("IsDeduplicated of ascending distinct ids is false")
	}
	if g2 := (towers.IndexedSlices{Indices: []int{2, 2}, Values: []float32{1, 2}, DenseShape: []int{3}}); g2.IsDeduplicated() {
		t.Fatal("IsDeduplicated of a repeated id is true")
	}
	apply := func(grad towers.IndexedSlices) (*towers.Store, *towers.Variable, optimizers.Optimizer) {
		store := towers.NewStore(towers.StoreConfig{})
		w := newVar(t, store, "w", tensor.Float32, tensor.Shape{rows, dim})
		opt := optimizers.Adagrad(0.1)
		if err := opt.Apply(store, []*towers.Variable{w}, []any{grad}); err != nil { // makes the slots
			t.Fatal(err)
		}
		return store, w, opt
	}
	store, w, opt := apply(g)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 3 {
		if err := opt.Apply(store, []*towers.Variable{w}, []any{g}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if got, rowBytes := (after.TotalAlloc-before.TotalAlloc)/3, uint64(touched*dim*4); got >= rowBytes/4 {
		t.Errorf("Apply of a deduplicated gradient of %d bytes of rows allocates %d bytes, want under %d (no copy)", rowBytes, got, rowBytes/4)
	}
	// The same updates as from a copy.
	store2, w2, opt2 := apply(g.Deduplicate())
	for range 3 {
		if err := opt2.Apply(store2, []*towers.Variable{w2}, []any{g.Deduplicate()}); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(w2.Data(), w.Data()); diff != "" {
		t.Errorf("weights (-from a copy +got):\n%s", diff)
	}
}
