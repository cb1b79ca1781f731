package sharding_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/sharding"
)

// TestBatchSplitOneShardSparse: a batch split into one shard hands its
// sparse features over as they are (the shard is the batch: no index or
// value is copied), still checked; split into two, the shards' features
// are copies with rows rebased.
func TestBatchSplitOneShardSparse(t *testing.T) {
	ids := sharding.SparseCOO{
		Indices:    [][]int{{0, 0}, {0, 1}, {2, 0}, {3, 0}},
		Values:     tensor.New(tensor.WithShape(4), tensor.WithBacking([]int64{5, 7, 5, 9})),
		DenseShape: []int{4, 2},
	}
	b := sharding.Batch{
		Features: map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(4, 1), tensor.WithBacking([]float32{1, 2, 3, 4}))},
		Sparse:   map[string]sharding.SparseCOO{"ids": ids},
	}
	one, _, err := b.Split(1)
	if err != nil {
		t.Fatal(err)
	}
	got := one[0].Sparse["ids"]
	if &got.Indices[0][0] != &ids.Indices[0][0] || got.Values != ids.Values {
		t.Errorf("Split(1) copied the sparse feature; want the batch's own indices and values")
	}
	if diff := cmp.Diff(ids.DenseShape, got.DenseShape); diff != "" {
		t.Errorf("Split(1) dense shape (-want +got):\n%s", diff)
	}
	two, _, err := b.Split(2)
	if err != nil {
		t.Fatal(err)
	}
	if &two[0].Sparse["ids"].Indices[0][0] == &ids.Indices[0][0] {
		t.Errorf("Split(2) shares the batch's indices; want copies")
	}
	if diff := cmp.Diff([][]int{{0, 0}, {1, 0}}, two[1].Sparse["ids"].Indices); diff != "" {
		t.Errorf("Split(2) shard 1 indices (-want +got):\n%s", diff)
	}

	bad := ids
	bad.Indices = [][]int{{0, 0}, {0, 1}, {4, 0}, {3, 0}}
	b.Sparse["ids"] = bad
	for _, n := range []int{1, 2} {
		if _, _, err := b.Split(n); err == nil || !strings.Contains(err.Error(), `sparse feature "ids"`) || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("Split(%d) of a sparse feature with row 4 of 4: error %v, want one naming the feature and the index out of range", n, err)
		}
	}
}
