package main

import (
	"context"
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// trainer trains one model with one implementation.
type trainer interface {
	// train runs n training steps, calling after (if not nil) after each.
	train(ctx context.Context, n int, after func()) error
	close() error
}

// dataBatches is how many distinct batches the synthetic data set holds;
// training cycles over them.
const dataBatches = 4

// newTrainer returns impl's trainer of m on nTowers towers; with procs, a
// group of processes, towerflow's trains across them, batch being all of
// theirs.
func newTrainer(impl string, m benchModel, k kit, batch, nTowers int, seed uint64, procs collective.Comm) (trainer, error) {
	return newTrainerConfig(impl, m, k, config{batch: batch, seed: seed, procs: procs}, nTowers)
}

// newTrainerConfig is newTrainer with cfg's batch, seed, processes and the
// options of the models with their own trainer (rows, optimizer).
func newTrainerConfig(impl string, m benchModel, k kit, cfg config, nTowers int) (trainer, error) {
	batch, seed, procs := cfg.batch, cfg.seed, cfg.procs
	if m.custom != nil {
		if impl != "towerflow" {
			return nil, fmt.Errorf("impl %s has no %s: it is towerflow's only", impl, m.name)
		}
		return m.custom(cfg, nTowers)
	}
	data := newDataset(m, batch, dataBatches, seed)
	switch impl {
	case "towerflow":
		return newTowerflowTrainer(m, k, data, nTowers, cfg)
	case "gorgonia":
		if procs != nil {
			return nil, fmt.Errorf("impl gorgonia runs in one process")
		}
		if m.classifier != nil {
			return nil, fmt.Errorf("impl gorgonia has no %s: it is towerflow's example model", m.name)
		}
		if nTowers != 1 {
			return nil, fmt.Errorf("impl gorgonia runs one graph: towers must be 1, not %d", nTowers)
		}
		return newGorgoniaTrainer(m, k, data, seed)
	}
	return nil, fmt.Errorf("unknown impl %q (want towerflow or gorgonia)", impl)
}

// towerflowTrainer trains through replicate.ModelFn, estimator.New and
// Estimator.Train, with an input from estimator.FromTensors.
type towerflowTrainer struct {
	est   *estimator.Estimator
	input estimator.InputFn
}

func newTowerflowTrainer(m benchModel, k kit, data *dataset, nTowers int, cfg config) (*towerflowTrainer, error) {
	seed, procs := cfg.seed, cfg.procs
	fn := func(t *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, _ model.Params) (*model.Spec, error) {
		loss, err := m.loss(towerVariables{t}, k, features["x"], labels["y"])
		if err != nil {
			return nil, err
		}
		return &model.Spec{Loss: loss}, nil
	}
	opt, xKey, yKey := optimizers.SGD(learningRate), "x", "y"
	if m.classifier != nil {
		fn, xKey, yKey = m.classifier(cfg), "image", "label"
		opt = optimizers.Momentum(learningRate, classifierMomentum)
	}
	devices := towers.CPUs(nTowers)
	est, err := estimator.New(
		replicate.ModelFn(fn,
			replicate.Config{Devices: devices, Optimizer: opt, Reduction: replicate.BatchMean, Processes: procs, Precision: cfg.precision}),
		estimator.RunConfig{Seed: seed, LogEvery: -1, Logger: cfg.log})
	if err != nil {
		return nil, err
	}
	x, y := data.all()
	in := estimator.TensorInput{BatchSize: data.batch, Epochs: estimator.Forever}
	if procs != nil {
		in.Processes, in.Rank = procs.Size(), procs.Rank()
	}
	input, err := estimator.FromTensors(map[string]*tensor.Dense{xKey: x}, map[string]*tensor.Dense{yKey: y}, in)
	if err != nil {
		est.Close()
		return nil, err
	}
	return &towerflowTrainer{est: est, input: input}, nil
}

func (t *towerflowTrainer) train(ctx context.Context, n int, after func()) error {
	opts := []estimator.TrainOption{estimator.Steps(int64(n))}
	if after != nil {
		opts = append(opts, estimator.OnStep(func(int64, float64) { after() }))
	}
	return t.est.Train(ctx, t.input, opts...)
}

func (t *towerflowTrainer) close() error { return t.est.Close() }

// gorgoniaTrainer is the hand-written single-graph gorgonia loop: one
// graph, G.Grad, a tape machine over the subgraph of the loss and its
// gradients with dual values, a vanilla SGD solver, and per step Let,
// RunAll, Step and Reset.
type gorgoniaTrainer struct {
	data   *dataset
	x, y   *G.Node
	vars   G.Nodes
	vm     G.VM
	solver G.Solver
	next   int
	xs, ys []*tensor.Dense
}

func newGorgoniaTrainer(m benchModel, k kit, data *dataset, seed uint64) (tr *gorgoniaTrainer, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("build gorgonia graph: %v", r)
		}
	}()
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float32, len(m.example)+1, G.WithShape(withBatch(data.batch, m.example)...), G.WithName("x"))
	y := G.NewMatrix(g, tensor.Float32, G.WithShape(data.batch, m.outputs), G.WithName("y"))
	vars := &graphVariables{g: g, seed: seed}
	loss, err := m.loss(vars, k, x, y)
	if err != nil {
		return nil, err
	}
	grads, err := G.Grad(loss, vars.all...)
	if err != nil {
		return nil, fmt.Errorf("gradients: %w", err)
	}
	// Only the loss and the gradients the solver reads: the whole graph
	// would also compute gradients with respect to the input batch.
	prog := g.SubgraphRoots(append(G.Nodes{loss}, grads...)...)
	tr = &gorgoniaTrainer{
		data: data, x: x, y: y, vars: vars.all,
		vm:     G.NewTapeMachine(prog, G.BindDualValues(vars.all...)),
		solver: G.NewVanillaSolver(G.WithLearnRate(learningRate)),
	}
	for i := 0; i < data.nBatches; i++ {
		bx, by := data.batchAt(i)
		tr.xs, tr.ys = append(tr.xs, bx), append(tr.ys, by)
	}
	return tr, nil
}

func (t *gorgoniaTrainer) train(ctx context.Context, n int, after func()) error {
	grads := G.NodesToValueGrads(t.vars)
	for range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		i := t.next % len(t.xs)
		t.next++
		if err := G.Let(t.x, t.xs[i]); err != nil {
			return err
		}
		if err := G.Let(t.y, t.ys[i]); err != nil {
			return err
		}
		if err := t.vm.RunAll(); err != nil {
			return err
		}
		if err := t.solver.Step(grads); err != nil {
			return err
		}
		t.vm.Reset()
		if after != nil {
			after()
		}
	}
	return nil
}

func (t *gorgoniaTrainer) close() error { return t.vm.Close() }
