package scopes_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/scopes"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// TestPlumbing: the plumbing reaches the scope: lookups of the scope's
// variables register (others are errors naming them), a sparse feature
// is added once and fed its shard, the row offset is kept, a variable's
// node gives its name, the updates and groups declared read back.
func TestPlumbing(t *testing.T) {
	s := towers.NewScope(0, 1, towers.CPU(0), towers.NewStore(towers.StoreConfig{Seed: 1}), nil)
	table, err := s.Variable("table", tensor.Float64, tensor.Shape{3, 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if name, ok := scopes.VariableName(s, table); name != "table" || !ok {
		t.Errorf("VariableName = %q, %v; want table", name, ok)
	}
	other := G.NewMatrix(s.Graph(), tensor.Float64, G.WithShape(3, 2), G.WithName("other"))
	if _, ok := scopes.VariableName(s, other); ok {
		t.Errorf("VariableName of a node that is no variable: ok")
	}
	slices := func(G.Value) (towers.IndexedSlices, error) { return towers.IndexedSlices{}, nil }
	if err := scopes.AddLookup(s, towers.Lookup{Variable: "table", Output: other, Slices: slices}); err != nil {
		t.Fatal(err)
	}
	wanterr.Mentions(t, scopes.AddLookup(s, towers.Lookup{Variable: "nope", Output: other, Slices: slices}), `lookup of "nope"`, "not one of the tower's variables")
	wanterr.Mentions(t, scopes.AddLookup(s, towers.Lookup{Variable: "table", Slices: slices}), "nil output or slices")
	if got := scopes.Lookups(s); len(got) != 1 || got[0].Variable != "table" || got[0].Output != other {
		t.Errorf("Lookups = %v, want the one of table", got)
	}

	f := scopes.NewSparseFeature("bag", tensor.Int64, []int{2, 3}, nil)
	if err := scopes.AddSparseFeature(s, f); err != nil {
		t.Fatal(err)
	}
	wanterr.Mentions(t, scopes.AddSparseFeature(s, f), `sparse feature "bag" added twice`)
	if got, err := s.SparseFeature("bag"); err != nil || got != f {
		t.Errorf("SparseFeature(bag) = %v, %v; want the one added", got, err)
	}
	v := sharding.SparseCOO{Indices: [][]int{{1, 0}}, Values: tensor.New(tensor.WithShape(1), tensor.WithBacking([]int64{2})), DenseShape: []int{2, 3}}
	if err := scopes.SetSparse(f, v, 4); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]int{{1, 0}}, f.Value().Indices); diff != "" || f.Offset() != 4 {
		t.Errorf("fed shard: offset %d, indices (-want +got):\n%s", f.Offset(), diff)
	}
	wanterr.Mentions(t, scopes.SetSparse(f, sharding.SparseCOO{Values: tensor.New(tensor.WithShape(1), tensor.WithBacking([]float32{2})), DenseShape: []int{2, 3}}, 0), `sparse feature "bag" wants dtype int64`)

	if err := s.Assign("table", G.NewMatrix(s.Graph(), tensor.Float64, G.WithShape(3, 2), G.WithName("new"))); err != nil {
		t.Fatal(err)
	}
	if u := scopes.Updates(s); len(u) != 1 || u[0].Var != "table" {
		t.Errorf("Updates = %v, want the Assign of table", u)
	}
	g := s.Group("moments")
	if gs := scopes.Groups(s); len(gs) != 1 || gs[0] != g {
		t.Errorf("Groups = %v, want the group made", gs)
	}

	scopes.SetRowOffset(s, 7)
	if got := scopes.RowOffset(s); got != 7 {
		t.Errorf("RowOffset = %d, want 7", got)
	}
}
