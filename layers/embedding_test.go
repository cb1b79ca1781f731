package layers_test

import (
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/scopes"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/towers"
)

// TestEmbeddingErrors: misuse of the embedding layers is an error naming
// what is wrong, when the graph is built.
func TestEmbeddingErrors(t *testing.T) {
	s := towers.NewScope(0, 1, towers.CPU(0), towers.NewStore(towers.StoreConfig{Seed: 1}), nil)
	m := layers.NewModule(s, "")
	emb, err := layers.NewEmbedding(m, "emb", layers.EmbeddingConfig{Vocab: 5, Dim: 2})
	if err != nil {
		t.Fatal(err)
	}
	g := s.Graph()
	ids := G.NewVector(g, tensor.Int64, G.WithShape(4), G.WithName("ids"))
	floatIDs := G.NewVector(g, tensor.Float32, G.WithShape(4), G.WithName("fids"))
	cube := G.NewTensor(g, tensor.Int64, 3, G.WithShape(2, 2, 2), G.WithName("cube"))
	notVar := G.NewMatrix(g, tensor.Float32, G.WithShape(5, 2), G.WithName("notvar"))
	bag := scopes.NewSparseFeature("bag", tensor.Int64, []int{4, 3}, nil)
	floatBag := scopes.NewSparseFeature("fbag", tensor.Float32, []int{4, 3}, nil)
	intWeights := scopes.NewSparseFeature("iw", tensor.Int64, []int{4, 3}, nil)
	tests := []struct {
		name string
		fn   func() error
		want string
	}{
		{"vocab", func() error {
			_, err := layers.NewEmbedding(m, "e1", layers.EmbeddingConfig{Vocab: 0, Dim: 2})
			return err
		}, "vocabulary 0"},
		{"padding", func() error {
			_, err := layers.NewEmbedding(m, "e2", layers.EmbeddingConfig{Vocab: 3, Dim: 2, Padded: true, PaddingID: 3})
			return err
		}, "padding id 3 outside the vocabulary [0, 3)"},
		{"dtype", func() error {
			_, err := layers.NewEmbedding(m, "e3", layers.EmbeddingConfig{Vocab: 3, Dim: 2, Dtype: tensor.Int32})
			return err
		}, "want float32 or float64"},
		{"float ids", func() error { _, err := emb.Lookup(floatIDs); return err }, "ids fids have dtype float32"},
		{"ids rank", func() error { _, err := emb.Lookup(cube); return err }, "want (batch) or (batch, k)"},
		{"not a variable", func() error { _, err := layers.EmbeddingLookup(s, notVar, ids); return err }, "table notvar is not a variable"},
		{"weights on ids", func() error {
			_, err := layers.EmbeddingLookup(s, emb.Table(), ids, layers.IDWeights(bag))
			return err
		}, "IDWeights is an option of sparse lookups"},
		{"float bag", func() error { _, err := emb.LookupSparse(floatBag, layers.CombineSum); return err }, `sparse feature "fbag" has dtype float32`},
		{"combiner", func() error { _, err := emb.LookupSparse(bag, layers.Combiner(7)); return err }, "unknown combiner Combiner(7)"},
		{"int weights", func() error {
			_, err := emb.LookupSparse(bag, layers.CombineMean, layers.IDWeights(intWeights))
			return err
		}, `weights "iw" have dtype int64`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.fn()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	if _, err := emb.Lookup(ids); err != nil {
		t.Errorf("a valid lookup: %v", err)
	}
	if n := len(scopes.Lookups(s)); n != 1 {
		t.Errorf("%d lookups registered, want the valid one", n)
	}
}
