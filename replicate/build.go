package replicate

import (
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/scopes"
	"github.com/towerflow/towerflow/internal/tower"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// maxBuilds bounds the towers kept for reuse: a server answering every
// batch size would otherwise keep a build per size for ever.
const maxBuilds = 64

// evict closes the least recently used build when the cache is full,
// but for the latest training and predict builds (e.last, e.lastPredict).
func (e *Engine) evict() {
	if len(e.builds) < maxBuilds {
		return
	}
	var oldest string
	for k, b := range e.builds {
		if b == e.last || b == e.lastPredict {
			continue // the latest training and predict builds stay: their plans and outputs are read after their steps
		}
		if oldest == "" || b.used < e.builds[oldest].used {
			oldest = k
		}
	}
	if oldest == "" {
		return
	}
	for _, t := range e.builds[oldest].towers {
		_ = t.Close()
	}
	delete(e.builds, oldest)
}

// signature identifies the towers a mode needs for these shards.
func signature(mode model.Mode, shards []sharding.Batch) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%v/%d", mode, len(shards))
	for _, s := range shards {
		for _, part := range []map[string]*tensor.Dense{s.Features, s.Labels} {
			sb.WriteString("|")
			for _, k := range slices.Sorted(maps.Keys(part)) {
				fmt.Fprintf(&sb, "%q:%v%v;", k, part[k].Dtype(), part[k].Shape())
			}
		}
		if len(s.Sparse) > 0 {
			sb.WriteString("|sparse")
			for _, k := range slices.Sorted(maps.Keys(s.Sparse)) {
				fmt.Fprintf(&sb, "%q:%v%v;", k, s.Sparse[k].Values.Dtype(), s.Sparse[k].DenseShape)
			}
		}
	}
	return sb.String()
}

// Build builds (or finds) the towers of mode for batch without running
// them: the model's variables then exist, e.g. to save or warm-start them
// before the first step.
func (e *Engine) Build(mode model.Mode, batch sharding.Batch) error {
	_, err := e.prepare(mode, batch)
	return err
}

// buildMu serializes building towers across every engine of the process:
// gorgonia's graph construction keeps package state (G.Rectify numbers its
// groups from a global counter), so two engines that build at once — the
// workers of one process, each with its own Estimator — would race.
// Builds are rare: once per mode and input signature.
var buildMu sync.Mutex

// prepare splits the batch, gets or builds the towers for its mode and
// input signature, and feeds them.
func (e *Engine) prepare(mode model.Mode, batch sharding.Batch) (*build, error) {
	var shards []sharding.Batch
	var feeds [][]feed
	var rows []int
	var key string
	if s, ok := e.splits.lookup(mode, batch); ok {
		shards, feeds, rows, key = s.shards, s.feeds, s.rows, s.key
	} else {
		var err error
		if shards, rows, err = e.splitBatch(mode, batch); err != nil {
			return nil, err
		}
		key = signature(mode, shards)
		if cacheable(batch) {
			feeds = e.splits.add(mode, batch, shards, rows, key).feeds
		} else {
			feeds = feedsOf(shards)
		}
	}
	b, ok := e.builds[key]
	if !ok {
		e.evict()
		var err error
		buildMu.Lock()
		b, err = e.buildTowers(mode, shards)
		buildMu.Unlock()
		if err != nil {
			return nil, err
		}
		e.builds[key] = b
		e.built = b
		if e.onBuild != nil {
			if err := e.onBuild(); err != nil {
				e.refuse(key, b) // build again, and retry, next time
				return nil, err
			}
		}
		if err := e.mismatched(); err != nil {
			e.refuse(key, b)
			return nil, err
		}
	} else if err := e.mismatched(); err != nil {
		return nil, err // the build stays: a checkpoint that fits may be restored
	}
	e.uses++
	b.used = e.uses
	b.rows = rows
	b.weights = lossWeights(e.cfg.Reduction, rows)
	offset := 0
	for i, t := range b.towers {
		scopes.SetRowOffset(t.Scope, offset)
		offset += rows[i]
		for _, f := range feeds[i] {
			var err error
			if f.sparse != nil {
				err = t.FeedSparse(f.name, *f.sparse, f.offset)
			} else {
				err = t.Feed(f.name, f.v)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

// mismatched is the error of a store holding a variable the model asked
// for with another shape or dtype than the checkpoint's it was restored
// from, made anew: no step runs with it (the estimator's onBuild compares
// the model with the checkpoint and names every difference first).
func (e *Engine) mismatched() error {
	if m := e.Store().Mismatched(); len(m) > 0 {
		return fmt.Errorf("replicate: the model's variables do not match the checkpoint restored: %s", strings.Join(m, "; "))
	}
	return nil
}

// refuse drops build b of key, new and never run, and closes its towers.
func (e *Engine) refuse(key string, b *build) {
	delete(e.builds, key)
	if e.built == b {
		e.built = nil
	}
	for _, t := range b.towers {
		t.Close() // its error: the build is dropped either way
	}
}

// buildTowers calls the model function once per shard, each on its own
// device and graph over the shared store, checks that every tower built the
// same model, makes the gradients of training, and compiles each tower for
// the values the engine reads.
func (e *Engine) buildTowers(mode model.Mode, shards []sharding.Batch) (*build, error) {
	b := &build{mode: mode}
	var first *towers.Scope
	for i, shard := range shards {
		scope := towers.NewScope(i, len(shards), e.cfg.Devices[i], e.store, first)
		if first == nil {
			first = scope
		}
		t := tower.New(scope, e.log)
		feats, err := inputs(t, "features/", shard.Features)
		if err != nil {
			return nil, err
		}
		if err := sparseInputs(t, shard.Sparse, feats); err != nil {
			return nil, err
		}
		var labels map[string]*G.Node
		if mode != model.Predict && shard.Labels != nil {
			if labels, err = inputs(t, "labels/", shard.Labels); err != nil {
				return nil, err
			}
		}
		var spec *model.Spec
		what := fmt.Sprintf("build (%v mode)", mode)
		err = t.Guard(what, func() error {
			var err error
			if spec, err = e.fn(t.Scope, mode, feats, labels, e.params); err != nil {
				return err
			}
			return t.AssignSets()
		})
		if err != nil {
			return nil, modelFnError(t, mode, shard, err)
		}
		if err := e.checkSpec(t, mode, spec); err != nil {
			return nil, err
		}
		if i > 0 {
			if err := sameModel(mode, b.towers[0], b.specs[0], t, spec); err != nil {
				return nil, err
			}
		}
		b.towers = append(b.towers, t)
		b.specs = append(b.specs, spec)
	}
	if mode == model.Train {
		if err := e.minimizeTowers(b); err != nil {
			return nil, err
		}
		if err := e.planUpdates(b); err != nil {
			return nil, err
		}
		layOut(b)
	}
	e.setPrecision(b)
	for i, t := range b.towers {
		if err := watch(t, mode, b.specs[i], b.plans, b.updates, i); err != nil {
			return nil, err
		}
		if err := t.Compile(); err != nil {
			return nil, err
		}
	}
	if e.x != nil && mode != model.Predict {
		var err error
		if b.desc, err = e.describe(b); err != nil {
			return nil, err
		}
		e.x.built[mode] = b.desc
	}
	return b, nil
}

// modelFnError is the error of a model function that failed on tower t: a
// panic names the tower itself; a nil pointer dereference comes with the
// inputs the batch has, since a feature or label it lacks reads as nil.
func modelFnError(t *tower.Tower, mode model.Mode, shard sharding.Batch, err error) error {
	var pe *tower.PanicError
	var missing *model.MissingInputError
	switch {
	case !errors.As(err, &pe):
		return fmt.Errorf("%v, %v mode: model function: %w", t, mode, err)
	case errors.As(err, &missing):
		// features.Get's way of returning an error: not a crash.
		return fmt.Errorf("%v, %v mode: model function: %w", t, mode, missing)
	}
	if re, ok := pe.Value.(runtime.Error); ok && strings.Contains(re.Error(), "nil pointer dereference") {
		return fmt.Errorf("model function: %w (if it read a feature or label the batch lacks, that reads as nil from the map: the batch has features %q and labels %q; features.Get and labels.Get name a missing one)",
			err, slices.Sorted(maps.Keys(shard.Features)), slices.Sorted(maps.Keys(shard.Labels)))
	}
	return fmt.Errorf("model function: %w", err)
}

// watch marks every node whose value the engine reads after a run.
func watch(t *tower.Tower, mode model.Mode, spec *model.Spec, plans []*trainPlan, updates []*updatePlan, i int) error {
	var nodes []*G.Node
	if mode != model.Predict {
		nodes = append(nodes, spec.Loss)
	}
	for _, p := range plans {
		for j, gs := range p.grads {
			if gs != nil {
				nodes = append(nodes, gs[i])
			}
			if sp := p.sparse[j]; sp != nil {
				for _, l := range sp.lookups[i] {
					nodes = append(nodes, l.Grad)
				}
			}
		}
	}
	for _, u := range updates {
		nodes = append(nodes, u.nodes[i])
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Predictions)) {
		nodes = append(nodes, spec.Predictions[k])
	}
	if mode == model.Eval {
		for _, k := range slices.Sorted(maps.Keys(spec.EvalMetrics)) {
			nodes = append(nodes, spec.EvalMetrics[k].Inputs...)
		}
	}
	if mode == model.Predict {
		for _, k := range slices.Sorted(maps.Keys(spec.ExportOutputs)) {
			outs := spec.ExportOutputs[k].Nodes()
			for _, name := range slices.Sorted(maps.Keys(outs)) {
				nodes = append(nodes, outs[name])
			}
		}
	}
	for _, n := range nodes {
		if err := t.Watch(n); err != nil {
			return err
		}
	}
	return nil
}

func inputs(t *tower.Tower, prefix string, m map[string]*tensor.Dense) (map[string]*G.Node, error) {
	out := make(map[string]*G.Node, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		n, err := t.Input(prefix+k, m[k].Dtype(), m[k].Shape())
		if err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, nil
}

// sparseInputs adds a tower's sparse features (towers.SparseFeature),
// their densified nodes into feats.
func sparseInputs(t *tower.Tower, m map[string]sharding.SparseCOO, feats map[string]*G.Node) error {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		n, err := t.SparseInput(k, "features/"+k, m[k].Values.Dtype(), m[k].DenseShape)
		if err != nil {
			return err
		}
		feats[k] = n
	}
	return nil
}

func (e *Engine) checkSpec(t *tower.Tower, mode model.Mode, spec *model.Spec) error {
	where := fmt.Sprintf("%v, %v mode", t, mode)
	if spec == nil {
		return fmt.Errorf("%s: model function returned a nil spec", where)
	}
	if mode != model.Predict {
		if spec.Loss == nil {
			return fmt.Errorf("%s: spec has no loss", where)
		}
		if !spec.Loss.IsScalar() {
			return fmt.Errorf("%s: loss must be a scalar, has shape %v", where, spec.Loss.Shape())
		}
	}
	if mode == model.Predict && len(spec.Predictions) == 0 {
		return fmt.Errorf("%s: spec has no predictions", where)
	}
	for key, out := range spec.ExportOutputs {
		if out == nil {
			return fmt.Errorf("%s: export output %q is nil", where, key)
		}
		for name, n := range out.Nodes() {
			if n == nil {
				return fmt.Errorf("%s: export output %q: node %q is nil", where, key, name)
			}
		}
	}
	for name, p := range spec.Predictions {
		if p == nil {
			return fmt.Errorf("%s: prediction %q is nil", where, name)
		}
	}
	for name, m := range spec.EvalMetrics {
		if m.New == nil {
			return fmt.Errorf("%s: eval metric %q has no constructor", where, name)
		}
		if m.Err != nil {
			return fmt.Errorf("%s: eval metric %q: %w", where, name, m.Err)
		}
		if name == "loss" || name == model.GlobalStepName {
			return fmt.Errorf("%s: eval metric %q clashes with the reported %s", where, name, name)
		}
	}
	hasOpt := e.cfg.Optimizer != nil || e.cfg.OptimizerFn != nil
	if mode == model.Train && len(spec.TrainOps) == 0 && !hasOpt {
		return fmt.Errorf("%s: spec has no train ops and no optimizer was given (set replicate.Config.Optimizer or Spec.TrainOps)", where)
	}
	if mode == model.Train && len(spec.TrainOps) > 0 && hasOpt {
		return fmt.Errorf("%s: spec has train ops and replicate.Config has an optimizer, which would not be used: set one of the two", where)
	}
	for i, op := range spec.TrainOps {
		if op.Optimizer == nil {
			return fmt.Errorf("%s: train op %d has no optimizer", where, i)
		}
		if op.Loss == nil && spec.Loss == nil {
			return fmt.Errorf("%s: train op %d has no loss", where, i)
		}
	}
	return nil
}

// sameModel checks that tower t built what tower 0 built.
func sameModel(mode model.Mode, t0 *tower.Tower, s0 *model.Spec, t *tower.Tower, s *model.Spec) error {
	differ := func(what string, a, b any) error {
		return fmt.Errorf("%v, %v mode: model function built different %s than tower 0: %v, tower 0: %v", t, mode, what, b, a)
	}
	if a, b := t0.VariableNames(), t.VariableNames(); !slices.Equal(a, b) {
		return differ("variables", a, b)
	}
	if a, b := metricKinds(s0.EvalMetrics), metricKinds(s.EvalMetrics); a != b {
		return differ("eval metrics", a, b)
	}
	if a, b := slices.Sorted(maps.Keys(s0.Predictions)), slices.Sorted(maps.Keys(s.Predictions)); !slices.Equal(a, b) {
		return differ("predictions", a, b)
	}
	if a, b := model.DescribeOutputs(s0.ExportOutputs), model.DescribeOutputs(s.ExportOutputs); a != b {
		return differ("export outputs", a, b)
	}
	if a, b := trainOpCalls(s0.TrainOps), trainOpCalls(s.TrainOps); !slices.Equal(a, b) {
		return differ("train ops", a, b)
	}
	return nil
}

func metricKinds(ms map[string]metrics.Bound) string {
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(ms)) {
		m := ms[k].New()
		fmt.Fprintf(&sb, "%s=%s[%d] ", k, m.Kind(), len(m.State()))
	}
	return strings.TrimSpace(sb.String())
}

func trainOpCalls(ops []model.TrainOp) []string {
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = fmt.Sprintf("%s on %v (own loss: %v)", op.Optimizer.Config(), op.Vars, op.Loss != nil)
	}
	return out
}
