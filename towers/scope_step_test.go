package towers_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/towers"
)

// TestGlobalStep: an int64 scalar node bound to the store's global step
// (made at zero when absent), one per tower and named as the tower names
// nodes, that the placement does not count and that is not among the
// tower's variables.
func TestGlobalStep(t *testing.T) {
	d0, d1 := towers.GPU(0), towers.GPU(1)
	s := towers.NewStore(towers.StoreConfig{Placement: towers.RoundRobin(d0, d1)})
	s0 := towers.NewScope(0, 2, towers.CPU(0), s, nil)
	s1 := towers.NewScope(1, 2, towers.CPU(1), s, s0)
	n0, err := s0.GlobalStep()
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := s0.GlobalStep(); again != n0 {
		t.Errorf("a second call made another node")
	}
	n1, err := s1.GlobalStep()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s0.Variable("w", tensor.Float32, tensor.Shape{2}, nil); err != nil {
		t.Fatal(err)
	}
	master, err := s.Lookup(towers.GlobalStepName)
	if err != nil {
		t.Fatal(err)
	}
	master.Data().([]int64)[0] = 41
	type node struct {
		Name   string
		Dtype  string
		Scalar bool
		Value  any
	}
	got := []node{}
	for _, n := range []*G.Node{n0, n1} {
		got = append(got, node{n.Name(), n.Dtype().String(), n.IsScalar(), n.Value().Data()})
	}
	want := []node{{"global_step", "int64", true, int64(41)}, {"tower_1/global_step", "int64", true, int64(41)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if dw, _ := s.Device("w"); dw != d0 {
		t.Errorf("w placed on %v, want %v: the global step was counted", dw, d0)
	}
	if dg, _ := s.Device(towers.GlobalStepName); dg != towers.CPU(0) {
		t.Errorf("global step placed on %v, want the parameter server", dg)
	}
	if diff := cmp.Diff([]string{"w"}, s0.VariableNames()); diff != "" {
		t.Errorf("tower 0 variables (-want +got):\n%s", diff)
	}

	bad := towers.NewStore(towers.StoreConfig{})
	if _, _, err := bad.GetOrCreate(towers.VarSpec{Name: towers.GlobalStepName, Dtype: tensor.Float64}); err != nil {
		t.Fatal(err)
	}
	_, err = towers.NewScope(0, 1, towers.CPU(0), bad, nil).GlobalStep()
	wanterr.Mentions(t, err, "tower 0", "global_step", "float64")
}

// TestSeed: a scope's seed for a name depends on the store's seed, the
// name and the tower's index, and on nothing else.
func TestSeed(t *testing.T) {
	seed := func(storeSeed uint64, name string, index int) uint64 {
		s := towers.NewStore(towers.StoreConfig{Seed: storeSeed})
		first := towers.NewScope(0, 3, towers.CPU(0), s, nil)
		if index == 0 {
			return first.Seed(name)
		}
		return towers.NewScope(index, 3, towers.CPU(index), s, first).Seed(name)
	}
	base := seed(1, "drop", 1)
	if again := seed(1, "drop", 1); again != base {
		t.Errorf("same inputs: %d, then %d", base, again)
	}
	for what, other := range map[string]uint64{"store seed": seed(2, "drop", 1), "name": seed(1, "drop2", 1), "tower": seed(1, "drop", 2)} {
		if other == base {
			t.Errorf("another %s gave the same seed %d", what, base)
		}
	}
}
