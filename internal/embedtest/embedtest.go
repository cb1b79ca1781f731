// Package embedtest is a small model with an embedding over a sparse
// feature, and data for it, shared by the tests of export and serving.
package embedtest

import (
	"context"
	"fmt"
	"iter"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// Vocab and Dim are the table's shape; Width is the most ids per example.
const (
	Vocab = 10
	Dim   = 2
	Width = 4
)

// Serving is the model's serving input: "cat", a bag of at most Width
// int64 ids, "w", their float64 weights, and "x", one float64.
var Serving = estimator.ServingInput{
	"cat": {Dtype: tensor.Int64, Shape: []int{Width}, Sparse: true},
	"w":   {Dtype: tensor.Float64, Shape: []int{Width}, Sparse: true},
	"x":   {Dtype: tensor.Float64, Shape: []int{1}},
}

// Model predicts "p" = (Σ wᵢ·table[catᵢ])·v + x: a weighted sum of the
// embeddings of the bag "cat" (weights "w") through a dense layer v, plus
// the dense feature x. Its export outputs are "serving_default" (predict
// p), "regress" (p) and "classify" (scores [1-p, p]).
func Model(s *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
	return model1(s, mode, f, l, 0)
}

// PartitionedModel is Model with its table a layers.EmbeddingLayer named
// "table" split into parts partitions: the variables
// table/embeddings/part_p (table/embeddings when parts is 0 or 1). Its
// predictions are Model's.
func PartitionedModel(parts int) model.Fn {
	return func(s *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
		return model1(s, mode, f, l, max(parts, 1))
	}
}

// model1 is Model, its table an EmbeddingLayer of parts partitions
// when parts > 0.
func model1(s *towers.Scope, mode model.Mode, f model.Features, l model.Labels, parts int) (*model.Spec, error) {
	cat, err := s.SparseFeature("cat")
	if err != nil {
		return nil, err
	}
	w, err := s.SparseFeature("w")
	if err != nil {
		return nil, err
	}
	x, ok := f["x"]
	if !ok {
		return nil, fmt.Errorf("no feature x")
	}
	init := make([]float64, Vocab*Dim)
	for i := range init {
		init[i] = float64(i%7)/7 - 0.4
	}
	values := tensor.New(tensor.WithShape(Vocab, Dim), tensor.WithBacking(init))
	v := s.MustVariable("v", tensor.Float64, tensor.Shape{Dim, 1}, towers.Values(tensor.New(tensor.WithShape(Dim, 1), tensor.WithBacking([]float64{0.5, -0.25}))))
	var emb *G.Node
	if parts == 0 {
		table := s.MustVariable("table", tensor.Float64, tensor.Shape{Vocab, Dim}, towers.Values(values))
		emb, err = layers.EmbeddingLookupSparse(s, table, cat, layers.CombineSum, layers.IDWeights(w))
	} else {
		var layer *layers.EmbeddingLayer
		layer, err = layers.NewEmbedding(layers.NewModule(s, ""), "table", layers.EmbeddingConfig{Vocab: Vocab, Dim: Dim, Dtype: tensor.Float64, Values: values, Partitions: parts})
		if err != nil {
			return nil, err
		}
		emb, err = layer.LookupSparse(cat, layers.CombineSum, layers.IDWeights(w))
	}
	if err != nil {
		return nil, err
	}
	p := G.Must(G.Add(G.Must(G.Mul(emb, v)), x))
	scores := G.Must(G.Concat(1, G.Must(G.Sub(G.NewConstant(1.0), p)), p))
	spec := &model.Spec{
		Predictions: map[string]*G.Node{"p": p},
		ExportOutputs: map[string]model.ExportOutput{
			model.DefaultServingSignature: model.PredictOutput{Outputs: map[string]*G.Node{"p": p}},
			"regress":                     model.RegressionOutput{Value: p},
			"classify":                    model.ClassificationOutput{Scores: scores},
		},
	}
	if mode != model.Predict {
		spec.Loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(p, l["y"]))))))
	}
	return spec, nil
}

// Row is one example: its ids, their weights and x.
type Row struct {
	IDs     []int64
	Weights []float64
	X       float64
}

// Rows are examples with bags of 0 to Width ids, repeated ids among them.
var Rows = []Row{
	{[]int64{3, 7}, []float64{1, 0.5}, 0.25},
	{nil, nil, -1},
	{[]int64{9, 9, 0, 1}, []float64{1, 2, 0.5, 1}, 0.5},
	{[]int64{4}, []float64{2}, 2},
	{[]int64{0, 2, 5}, []float64{1, 1, 1}, 0},
}

// Batch returns rows as a batch: "cat" and "w" sparse (entry j of row r
// at index [r, j]), "x" dense; with labels, "y" = 1 - x.
func Batch(rows []Row, labels bool) estimator.Batch {
	var idx [][]int
	var ids []int64
	var ws, xs, ys []float64
	for r, row := range rows {
		for j := range row.IDs {
			idx = append(idx, []int{r, j})
		}
		ids = append(ids, row.IDs...)
		ws = append(ws, row.Weights...)
		xs = append(xs, row.X)
		ys = append(ys, 1-row.X)
	}
	clone := func() [][]int {
		out := make([][]int, len(idx))
		for i, ix := range idx {
			out[i] = append([]int(nil), ix...)
		}
		return out
	}
	b := estimator.Batch{
		Features: map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(len(rows), 1), tensor.WithBacking(xs))},
		Sparse: map[string]sharding.SparseCOO{
			"cat": {Indices: clone(), Values: tensor.New(tensor.WithShape(len(ids)), tensor.WithBacking(append([]int64{}, ids...))), DenseShape: []int{len(rows), Width}},
			"w":   {Indices: clone(), Values: tensor.New(tensor.WithShape(len(ws)), tensor.WithBacking(append([]float64{}, ws...))), DenseShape: []int{len(rows), Width}},
		},
	}
	if labels {
		b.Labels = map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(len(rows), 1), tensor.WithBacking(ys))}
	}
	return b
}

// Input yields Batch(rows, labels) n times, or forever when n < 0.
func Input(rows []Row, labels bool, n int) estimator.InputFn {
	return func(ctx context.Context) iter.Seq2[estimator.Batch, error] {
		return func(yield func(estimator.Batch, error) bool) {
			for i := 0; n < 0 || i < n; i++ {
				if !yield(Batch(rows, labels), nil) {
					return
				}
			}
		}
	}
}
