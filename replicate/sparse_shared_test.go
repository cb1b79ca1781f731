package replicate_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// One embedding layer shared by three features (two sparse bags, one
// combined by sum and one by mean, and dense ids two per row), and with
// params["tied"] the same table also read densely: a matrix product of the
// first bag's embeddings with the table's transpose (tied output
// embeddings). With params["dense"] every lookup is instead a matrix
// product of a dense combination matrix (features "Ma", "Mb", "M0", "M1":
// [batch, vocab], the lookup's weights) with the table: the densified
// reference, whose gradient symbolic differentiation computes densely.
const sharedVocab, sharedDim = 8, 3

func sharedTableModel(s *towers.Scope, _ model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
	emb, err := layers.NewEmbedding(layers.NewModule(s, ""), "emb", layers.EmbeddingConfig{
		Vocab: sharedVocab, Dim: sharedDim, Dtype: tensor.Float64, Init: towers.Values(sharedTable()),
	})
	if err != nil {
		return nil, err
	}
	var ea, eb, e0, e1 *G.Node
	if p["dense"] == true {
		t := emb.Table()
		ea, eb = G.Must(G.Mul(f.Get("Ma"), t)), G.Must(G.Mul(f.Get("Mb"), t))
		e0, e1 = G.Must(G.Mul(f.Get("M0"), t)), G.Must(G.Mul(f.Get("M1"), t))
	} else {
		a, err := s.SparseFeature("a")
		if err != nil {
			return nil, err
		}
		b, err := s.SparseFeature("b")
		if err != nil {
			return nil, err
		}
		if ea, err = emb.LookupSparse(a, layers.CombineSum); err != nil {
			return nil, err
		}
		if eb, err = emb.LookupSparse(b, layers.CombineMean); err != nil {
			return nil, err
		}
		ids, err := emb.Lookup(f.Get("ids")) // [rows, 2, dim]
		if err != nil {
			return nil, err
		}
		rows := ea.Shape()[0]
		flat := G.Must(G.Reshape(ids, tensor.Shape{rows, 2 * sharedDim}))
		e0 = G.Must(G.Slice(flat, nil, G.S(0, sharedDim)))
		e1 = G.Must(G.Slice(flat, nil, G.S(sharedDim, 2*sharedDim)))
	}
	h := G.Must(G.Concat(1, ea, eb, e0, e1))
	loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(h, l.Get("y")))))))
	if p["tied"] == true {
		logits := G.Must(G.Mul(ea, G.Must(G.Transpose(emb.Table()))))
		loss = G.Must(G.Add(loss, G.Must(G.Mean(G.Must(G.Square(logits))))))
	}
	return &model.Spec{Loss: loss, Predictions: map[string]*G.Node{"h": h}}, nil
}

// sharedTable is the shared table's initial value, distinct entries.
func sharedTable() *tensor.Dense {
	v := make([]float64, sharedVocab*sharedDim)
	for i := range v {
		v[i] = 0.05*float64(i) - 0.6 + 0.011*float64((i*7)%5)
	}
	return tensor.New(tensor.WithShape(sharedVocab, sharedDim), tensor.WithBacking(v))
}

// sharedBatch is batch i of 6 rows: the bags (with repeated ids, within a
// row, across rows and across the features, and empty rows), the dense ids
// and the combination matrices of the densified reference.
func sharedBatch(i int) sharding.Batch {
	const rows = 6
	var as, bs [][]int64
	var ids []int64
	ma, mb := make([]float64, rows*sharedVocab), make([]float64, rows*sharedVocab)
	m0, m1 := make([]float64, rows*sharedVocab), make([]float64, rows*sharedVocab)
	var y []float64
	for r := range rows {
		var a, b []int64
		for k := range (r + i) % 3 {
			a = append(a, int64((r*3+k*5+i)%sharedVocab))
		}
		for k := range (r+i+1)%4 + 1 {
			b = append(b, int64((r+k*2+i*3)%5))
		}
		if r == 4 {
			b = nil // an empty row: zeros
		}
		as, bs = append(as, a), append(bs, b)
		for _, id := range a {
			ma[r*sharedVocab+int(id)]++
		}
		for _, id := range b {
			mb[r*sharedVocab+int(id)] += 1 / float64(len(b))
		}
		i0, i1 := (r*5+i)%sharedVocab, (r+i*3+1)%sharedVocab
		ids = append(ids, int64(i0), int64(i1))
		m0[r*sharedVocab+i0], m1[r*sharedVocab+i1] = 1, 1
		for j := range 4 * sharedDim {
			y = append(y, float64((r+j+i)%7)/7-0.4)
		}
	}
	dense := func(v []float64) *tensor.Dense {
		return tensor.New(tensor.WithShape(rows, sharedVocab), tensor.WithBacking(v))
	}
	return sharding.Batch{
		Features: map[string]*tensor.Dense{
			"ids": ints([]int{rows, 2}, ids...),
			"Ma":  dense(ma), "Mb": dense(mb), "M0": dense(m0), "M1": dense(m1),
		},
		Labels: map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(rows, 4*sharedDim), tensor.WithBacking(y))},
		Sparse: map[string]sharding.SparseCOO{"a": bag(3, as...), "b": bag(5, bs...)},
	}
}

func newSharedEngine(t *testing.T, n int, p model.Params) *replicate.Engine {
	t.Helper()
	e, err := replicate.NewEngine(replicate.ModelFn(sharedTableModel, replicate.Config{Devices: towers.CPUs(n), Optimizer: &sparseSGD{lr: 0.3}}),
		replicate.EngineConfig{Seed: 3, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestEmbeddingSharedTable: one embedding layer looked up by three
// features (two sparse bags and dense ids) is one variable whose gradient
// is one sparse sum, equal to the densified reference's (every lookup a
// matrix product of its combination matrix with the table); read also
// densely (a product with its transpose) its one dense gradient equals the
// reference's too. Trained 3 steps on 1 to 3 towers, the table equals the
// reference's trained on one device.
func TestEmbeddingSharedTable(t *testing.T) {
	ctx := context.Background()
	for _, tied := range []bool{false, true} {
		t.Run(fmt.Sprintf("tied=%v/gradient", tied), func(t *testing.T) {
			sparse := newSharedEngine(t, 1, model.Params{"tied": tied})
			ref := newSharedEngine(t, 1, model.Params{"tied": tied, "dense": true})
			b := sharedBatch(0)
			_, grads, err := sparse.ComputeGradients(ctx, b, replicate.StepHooks{})
			if err != nil {
				t.Fatal(err)
			}
			_, want, err := ref.ComputeGradients(ctx, b, replicate.StepHooks{})
			if err != nil {
				t.Fatal(err)
			}
			if len(grads) != 1 || len(want) != 1 {
				t.Fatalf("%d gradients, reference %d: want the one table's", len(grads), len(want))
			}
			got := make([]float64, sharedVocab*sharedDim)
			switch g := grads[0].Value.(type) {
			case towers.IndexedSlices:
				if tied {
					t.Fatal("gradient of a table also read densely is an IndexedSlices, want one dense sum")
				}
				if err := g.AddTo(got); err != nil {
					t.Fatal(err)
				}
			case []float64:
				if !tied {
					t.Fatal("gradient of a table read only by lookups is dense, want towers.IndexedSlices")
				}
				copy(got, g)
			default:
				t.Fatalf("gradient is a %T", g)
			}
			if diff := cmp.Diff(want[0].Value, got, cmpopts.EquateApprox(0, 1e-13)); diff != "" {
				t.Errorf("gradient (-densified reference +shared table):\n%s", diff)
			}
		})
		train := func(t *testing.T, e *replicate.Engine) []float64 {
			for i := range 3 {
				if _, err := e.TrainStep(ctx, sharedBatch(i), replicate.StepHooks{}); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			names := e.Store().Names()
			if !slices.Equal(names, []string{"emb/embeddings", towers.GlobalStepName}) && !slices.Equal(names, []string{towers.GlobalStepName, "emb/embeddings"}) {
				t.Fatalf("store has %v, want the one table (and the global step)", names)
			}
			v, _ := e.Store().Lookup("emb/embeddings")
			return slices.Clone(v.Data().([]float64))
		}
		ref := train(t, newSharedEngine(t, 1, model.Params{"tied": tied, "dense": true}))
		if cmp.Equal(ref, sharedTable().Data().([]float64)) {
			t.Fatal("training left the table as it was")
		}
		for n := 1; n <= 3; n++ {
			t.Run(fmt.Sprintf("tied=%v/towers%d", tied, n), func(t *testing.T) {
				got := train(t, newSharedEngine(t, n, model.Params{"tied": tied}))
				if diff := cmp.Diff(ref, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
					t.Errorf("table (-densified reference on 1 device +shared on %d towers):\n%s", n, diff)
				}
			})
		}
	}
}
