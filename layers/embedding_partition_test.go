package layers_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/towers"
)

// TestEmbeddingPartitionErrors: a partition count that is negative or
// leaves a partition without a row, and initial values that do not fit the
// table, are errors of NewEmbedding naming the layer and what is wrong.
func TestEmbeddingPartitionErrors(t *testing.T) {
	s := towers.NewScope(0, 1, towers.CPU(0), towers.NewStore(towers.StoreConfig{Seed: 1}), nil)
	m := layers.NewModule(s, "")
	vals := tensor.New(tensor.WithShape(5, 2), tensor.WithBacking(make([]float32, 10)))
	tests := []struct {
		name string
		cfg  layers.EmbeddingConfig
		want []string
	}{
		{"negative", layers.EmbeddingConfig{Vocab: 5, Dim: 2, Partitions: -1}, []string{`"negative"`, "-1 partitions", "want a positive count"}},
		{"more than rows", layers.EmbeddingConfig{Vocab: 5, Dim: 2, Partitions: 6}, []string{`"more than rows"`, "6 partitions of a vocabulary of 5", "every partition needs a row"}},
		{"values shape", layers.EmbeddingConfig{Vocab: 6, Dim: 2, Partitions: 2, Values: vals}, []string{`"values shape"`, "initial values have shape (5, 2)", "the table (6, 2)"}},
		{"values dtype", layers.EmbeddingConfig{Vocab: 5, Dim: 2, Dtype: tensor.Float64, Values: vals}, []string{"dtype float32", "float64"}},
		{"values and init", layers.EmbeddingConfig{Vocab: 5, Dim: 2, Values: vals, Init: towers.Zeros()}, []string{"both Init and Values"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := layers.NewEmbedding(m, tt.name, tt.cfg)
			wanterr.Mentions(t, err, tt.want...)
		})
	}
	if names := s.VariableNames(); len(names) != 0 {
		t.Errorf("failed layers made variables %q", names)
	}
}

// TestEmbeddingPartitions: a table of 7 rows in 1 to 7 partitions is the
// variables emb/embeddings (one) or emb/embeddings/part_p, contiguous rows
// of the initial values, the first 7%P partitions one row longer, the
// padding row zero in its partition.
func TestEmbeddingPartitions(t *testing.T) {
	vals := make([]float64, 14)
	for i := range vals {
		vals[i] = float64(i + 1)
	}
	for parts := 0; parts <= 7; parts++ {
		t.Run(fmt.Sprintf("%d", parts), func(t *testing.T) {
			store := towers.NewStore(towers.StoreConfig{Seed: 1})
			s := towers.NewScope(0, 1, towers.CPU(0), store, nil)
			emb, err := layers.NewEmbedding(layers.NewModule(s, ""), "emb", layers.EmbeddingConfig{Vocab: 7, Dim: 2, Dtype: tensor.Float64,
				Values: tensor.New(tensor.WithShape(7, 2), tensor.WithBacking(vals)), Padded: true, PaddingID: 4, Partitions: parts})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string][]float64{}
			if parts <= 1 {
				want["emb/embeddings"] = append(append([]float64{}, vals[:8]...), append([]float64{0, 0}, vals[10:]...)...)
			} else {
				row := 0
				for p := range parts {
					n := 7 / parts
					if p < 7%parts {
						n++
					}
					var part []float64
					for r := row; r < row+n; r++ {
						if r == 4 {
							part = append(part, 0, 0)
						} else {
							part = append(part, vals[2*r:2*r+2]...)
						}
					}
					want[fmt.Sprintf("emb/embeddings/part_%d", p)] = part
					row += n
				}
			}
			got := map[string][]float64{}
			for _, name := range s.VariableNames() {
				v, err := store.Lookup(name)
				if err != nil {
					t.Fatal(err)
				}
				got[name] = v.Data().([]float64)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("variables (-want +got):\n%s", diff)
			}
			if n := len(emb.Partitions()); n != max(parts, 1) {
				t.Errorf("%d partition nodes, want %d", n, max(parts, 1))
			}
			if tab := emb.Table(); tab == nil || !tab.Shape().Eq(tensor.Shape{7, 2}) {
				t.Errorf("Table() = %v, want a (7, 2) node", tab)
			}
		})
	}
}

// TestMinMaxPartitions: TensorFlow's min_max_variable_partitioner's
// counts: whole rows of at most minSliceBytes per partition, at least one,
// at most maxPartitions.
func TestMinMaxPartitions(t *testing.T) {
	tests := []struct {
		vocab, dim int
		dt         tensor.Dtype
		max        int
		slice      int64
		want       int
	}{
		{1_000_000, 64, tensor.Float32, 10_000, 256 << 10, 977}, // 1024 rows of 256 bytes a partition
		{1_000_000, 64, tensor.Float32, 100, 256 << 10, 100},
		{1_000_000, 64, tensor.Float64, 10_000, 256 << 10, 1954},
		{10, 4, tensor.Float32, 8, 1, 8},   // a row is more than the slice: one row each, at most 8
		{10, 4, tensor.Float32, 20, 1, 10}, // never more than the rows
		{10, 4, tensor.Float32, 8, 1 << 20, 1},
	}
	for _, tt := range tests {
		got, err := layers.MinMaxPartitions(tt.vocab, tt.dim, tt.dt, tt.max, tt.slice)
		if err != nil || got != tt.want {
			t.Errorf("MinMaxPartitions(%d, %d, %v, %d, %d) = %d, %v; want %d", tt.vocab, tt.dim, tt.dt, tt.max, tt.slice, got, err, tt.want)
		}
	}
	for _, bad := range [][5]int{{0, 4, 0, 8, 1}, {10, 4, 0, 0, 1}, {10, 4, 0, 8, 0}, {10, 4, 1, 8, 1}} {
		dt := tensor.Float32
		if bad[2] == 1 {
			dt = tensor.Int64
		}
		if _, err := layers.MinMaxPartitions(bad[0], bad[1], dt, bad[3], int64(bad[4])); err == nil {
			t.Errorf("MinMaxPartitions(%v): no error", bad)
		}
	}
}
