package layers

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/towers"
)

// TestLookupGradientDeduplicated: a lookup's gradient of its table (each
// partition's) has one row per distinct id, in ascending order, each the
// sum of its entries' scaled output rows in the order they were read: to
// the bit what deduplicating the gradient of one row per entry gives
// (towers.IndexedSlices.Deduplicate), with and without scales, for a
// table whole and in two partitions.
func TestLookupGradientDeduplicated(t *testing.T) {
	ids := []int{7, 2, 7, 5, 2, 9, 7, 0}
	rows := []int{0, 1, 2, 3, 4, 4, 1, 3}
	outGrad := []float32{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.1}
	for _, tc := range []struct {
		name   string
		parts  []int // the partitions' rows
		scales []float64
	}{
		{"whole", []int{10}, nil},
		{"whole scaled", []int{10}, []float64{1, 0.5, 1.0 / 3, 0.7, 1, 2, 0.1, 1}},
		{"two partitions", []int{5, 5}, nil},
		{"two partitions scaled", []int{5, 5}, []float64{1, 0.5, 1.0 / 3, 0.7, 1, 2, 0.1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := G.NewGraph()
			var tables []*G.Node
			for p, n := range tc.parts {
				tables = append(tables, G.NewMatrix(g, tensor.Float32, G.WithShape(n, 2), G.WithName(fmt.Sprintf("t%d", p))))
			}
			l := newLookupBase(tables, lookupConfig{}, "test")
			l.gradIDs, l.gradRow, l.gradScale = slices.Clone(ids), slices.Clone(rows), tc.scales
			l.route()
			// One row per entry, then Deduplicate: the gradient's meaning.
			perEntry := make([]float32, 0, 2*len(ids))
			for e, r := range rows {
				for _, x := range outGrad[2*r : 2*r+2] {
					if tc.scales != nil {
						x *= float32(tc.scales[e])
					}
					perEntry = append(perEntry, x)
				}
			}
			whole := towers.IndexedSlices{Indices: ids, Values: perEntry, DenseShape: []int{10, 2}}.Deduplicate()
			first := 0
			for p, n := range tc.parts {
				want := towers.IndexedSlices{Indices: []int{}, Values: []float32{}, DenseShape: []int{n, 2}}
				for k, id := range whole.Indices {
					if id >= first && id < first+n {
						want.Indices = append(want.Indices, id-first)
						want.Values = append(want.Values.([]float32), whole.Values.([]float32)[2*k:2*k+2]...)
					}
				}
				first += n
				got, err := l.slicesOf(p)(tensor.New(tensor.WithShape(5, 2), tensor.WithBacking(slices.Clone(outGrad))))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("partition %d gradient (-deduplicated +got):\n%s", p, diff)
				}
			}
		})
	}
}
