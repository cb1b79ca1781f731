package main

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// The embed model, a click-through-rate model in the shape of DLRM's and
// the Criteo data set's: embedDense dense features through embedBottom
// ReLU units to embedDim (linear); embedCategorical categorical features, each a
// bag of 1 to embedMaxBag ids into its own table of rows × embedDim,
// summed (layers.EmbeddingLookupSparse, the sparse features as
// sharding.SparseCOO); the dense part and the bags concatenated
// (embedDim·(1+embedCategorical) = 432) → embedTop ReLU layers → 1 logit;
// sigmoid cross-entropy; Adagrad (or SGD) at learningRate.
const (
	embedDense       = 13
	embedCategorical = 26
	embedDim         = 16
	embedBottom      = 64
	embedMaxBag      = 3
	// embedZipfS is the exponent of the ids' power law, P(id = k) ∝
	// (1 + k)^−s, so that a batch reads some rows many times.
	embedZipfS = 1.1
	// defaultRows is each table's row count unless -rows says otherwise.
	defaultRows = 100000
)

// embedTop is the top MLP's hidden widths.
var embedTop = []int{256, 128}

// embedFeature is the name of categorical feature i.
func embedFeature(i int) string { return fmt.Sprintf("c%02d", i) }

// embedModel is the embed model's model function; rows is every table's
// row count.
func embedModel(rows int) model.Fn {
	return func(s *towers.Scope, _ model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
		vars := towerVariables{s}
		k := kits["layers"]
		x, err := f.Lookup("dense")
		if err != nil {
			return nil, err
		}
		y, err := l.Lookup("click")
		if err != nil {
			return nil, err
		}
		h, err := dense(vars, k, "bottom/hidden", x, embedBottom, layers.ReLU)
		if err != nil {
			return nil, err
		}
		if h, err = dense(vars, k, "bottom/out", h, embedDim, layers.Linear); err != nil {
			return nil, err
		}
		parts := G.Nodes{h}
		m := layers.NewModule(s, "")
		for i := range embedCategorical {
			name := embedFeature(i)
			emb, err := layers.NewEmbedding(m, name, layers.EmbeddingConfig{Vocab: rows, Dim: embedDim})
			if err != nil {
				return nil, err
			}
			ids, err := s.SparseFeature(name)
			if err != nil {
				return nil, err
			}
			e, err := emb.LookupSparse(ids, layers.CombineSum)
			if err != nil {
				return nil, err
			}
			parts = append(parts, e)
		}
		if h, err = layers.Concat(parts...); err != nil {
			return nil, fmt.Errorf("concatenate the dense part and the bags: %w", err)
		}
		for i, units := range embedTop {
			if h, err = dense(vars, k, fmt.Sprintf("top/hidden%d", i), h, units, layers.ReLU); err != nil {
				return nil, err
			}
		}
		logit, err := dense(vars, k, "top/logit", h, 1, layers.Linear)
		if err != nil {
			return nil, err
		}
		loss, err := layers.SigmoidCrossEntropy(logit, y)
		if err != nil {
			return nil, err
		}
		return &model.Spec{Loss: loss}, nil
	}
}

// embedBatches makes n batches of batch rows of the embed model's
// synthetic data from a generator seeded by seed: dense features from a
// standard normal, bags of 1 to embedMaxBag ids from a power law over
// [0, rows), and a click that depends on the first two dense features and
// the first bag's first id, so that the loss can fall.
func embedBatches(batch, n, rows int, seed uint64) []sharding.Batch {
	rng := rand.New(rand.NewPCG(seed, 2))
	zipf := rand.NewZipf(rng, embedZipfS, 1, uint64(rows-1))
	out := make([]sharding.Batch, n)
	for b := range out {
		x := make([]float32, batch*embedDense)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		sparse := make(map[string]sharding.SparseCOO, embedCategorical)
		var first []int64
		for c := range embedCategorical {
			var idx [][]int
			var ids []int64
			for r := range batch {
				for j := range 1 + rng.IntN(embedMaxBag) {
					idx = append(idx, []int{r, j})
					ids = append(ids, int64(zipf.Uint64()))
					if c == 0 && j == 0 {
						first = append(first, ids[len(ids)-1])
					}
				}
			}
			sparse[embedFeature(c)] = sharding.SparseCOO{
				Indices:    idx,
				Values:     tensor.New(tensor.WithShape(len(ids)), tensor.WithBacking(ids)),
				DenseShape: []int{batch, embedMaxBag},
			}
		}
		y := make([]float32, batch)
		for r := range y {
			if x[r*embedDense]+x[r*embedDense+1] > 0 != (first[r]%2 == 0) {
				y[r] = 1
			}
		}
		out[b] = sharding.Batch{
			Features: map[string]*tensor.Dense{"dense": tensor.New(tensor.WithShape(batch, embedDense), tensor.WithBacking(x))},
			Labels:   map[string]*tensor.Dense{"click": tensor.New(tensor.WithShape(batch, 1), tensor.WithBacking(y))},
			Sparse:   sparse,
		}
	}
	return out
}

// embedOptimizer returns the embed model's optimizer by name: adagrad
// (the default, "") or sgd.
func embedOptimizer(name string) (optimizers.Optimizer, error) {
	switch name {
	case "", "adagrad":
		return optimizers.Adagrad(learningRate), nil
	case "sgd":
		return optimizers.SGD(learningRate), nil
	}
	return nil, fmt.Errorf("unknown -optimizer %q for model embed (want adagrad or sgd)", name)
}

// newEmbedTrainer is towerflow's trainer of the embed model on nTowers
// towers: the estimator trains on the batches in turn, forever.
func newEmbedTrainer(cfg config, nTowers int) (*towerflowTrainer, error) {
	rows := cfg.rows
	if rows == 0 {
		rows = defaultRows
	}
	if rows < 2 {
		return nil, fmt.Errorf("-rows %d: want at least 2", rows)
	}
	if cfg.procs != nil {
		return nil, fmt.Errorf("model embed runs in one process")
	}
	opt, err := embedOptimizer(cfg.optimizer)
	if err != nil {
		return nil, err
	}
	devices := towers.CPUs(nTowers)
	est, err := estimator.New(
		replicate.ModelFn(embedModel(rows),
			replicate.Config{Devices: devices, Optimizer: opt, Reduction: replicate.BatchMean, Precision: cfg.precision}),
		estimator.RunConfig{Seed: cfg.seed, LogEvery: -1, Logger: cfg.log})
	if err != nil {
		return nil, err
	}
	batches := embedBatches(cfg.batch, dataBatches, rows, cfg.seed)
	input := func(ctx context.Context) iter.Seq2[estimator.Batch, error] {
		return func(yield func(estimator.Batch, error) bool) {
			for i := 0; ; i++ {
				if err := ctx.Err(); err != nil {
					yield(estimator.Batch{}, err)
					return
				}
				if !yield(batches[i%len(batches)], nil) {
					return
				}
			}
		}
	}
	return &towerflowTrainer{est: est, input: input}, nil
}
