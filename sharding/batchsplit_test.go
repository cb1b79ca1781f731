package sharding_test

import (
	"fmt"
	"slices"
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

// TestBatchSplitManyFeatures: a batch of enough sparse entries to be
// split on several goroutines gives each shard what SplitSparse gives
// feature by feature, and of several bad features the error names the
// first in order of name, whatever goroutine met it.
func TestBatchSplitManyFeatures(t *testing.T) {
	const rows, feats, nnz = 1000, 9, 7300 // 65,700 entries in all: parallel.MinWork
	b := sharding.Batch{Sparse: map[string]sharding.SparseCOO{}}
	for f := range feats {
		idx := make([][]int, nnz)
		vals := make([]int32, nnz)
		for i := range idx {
			idx[i] = []int{(i*(f+3) + f) % rows, i % 2}
			vals[i] = int32(i * f)
		}
		b.Sparse[fmt.Sprintf("f%d", f)] = sharding.SparseCOO{Indices: idx, Values: tensor.New(tensor.WithShape(nnz), tensor.WithBacking(vals)), DenseShape: []int{rows, 2}}
	}
	same := func(a, b sharding.SparseCOO) bool {
		return slices.Equal(a.DenseShape, b.DenseShape) && slices.EqualFunc(a.Indices, b.Indices, slices.Equal) &&
			slices.Equal(a.Values.Data().([]int32), b.Values.Data().([]int32))
	}
	for _, n := range []int{1, 2, 3} {
		shards, _, err := b.Split(n)
		if err != nil {
			t.Fatal(err)
		}
		for k, s := range b.Sparse {
			want, err := sharding.SplitSparse(s, n)
			if err != nil {
				t.Fatal(err)
			}
			for sh := range n {
				if got := shards[sh].Sparse[k]; !same(want[sh], got) {
					t.Errorf("Split(%d) shard %d feature %q: %d entries, not SplitSparse's %d", n, sh, k, len(got.Indices), len(want[sh].Indices))
				}
			}
		}
	}
	for _, k := range []string{"f8", "f3", "f5"} {
		bad := b.Sparse[k]
		bad.Indices = append(slices.Clone(bad.Indices[:nnz-1]), []int{rows, 0})
		b.Sparse[k] = bad
	}
	for _, n := range []int{1, 2} {
		if _, _, err := b.Split(n); err == nil || !strings.HasPrefix(err.Error(), `sparse feature "f3"`) {
			t.Errorf("Split(%d) with features f3, f5 and f8 bad: error %v, want f3's", n, err)
		}
	}
}
