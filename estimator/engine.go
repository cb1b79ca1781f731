package estimator

import (
	"context"
	"fmt"
	"maps"
	"runtime/trace"
	"slices"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator/optimizers"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/parallel"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// GlobalStepName is the name of the global step variable: an int64 scalar,
// not trainable, incremented once per training step.
const GlobalStepName = "global_step"

// engine runs a model function as one tower per device over one store. It
// builds the towers of a mode once per input signature and reuses them: a
// step only feeds values and runs the graphs.
type engine struct {
	fn         ModelFn
	rep        Replication
	store      *towers.Store
	params     Params
	defaultOpt optimizers.Optimizer
	globalStep *towers.Variable
	builds     map[string]*build
	splits     splitCache // how recent batches were split, to split them once
	last       *build     // the towers of the latest step, for fetches
	// lastPredict is the towers of the latest predict step.
	lastPredict *build
	uses        int64 // steps prepared so far
	// onBuild runs after a new build has created its variables.
	onBuild func() error
	// metrics holds each tower's eval metric states by name; it outlives
	// builds, since one evaluation may run several input signatures.
	metrics []map[string]metrics.Metric
}

// build is the towers of one mode and input signature.
type build struct {
	used    int64 // when it last ran, for eviction
	mode    Mode
	towers  []*towers.Tower
	specs   []*Spec
	rows    []int
	weights []float64
	plans   []*trainPlan
}

// trainPlan is one train op across towers.
type trainPlan struct {
	opt   optimizers.Optimizer
	vars  []*towers.Variable
	grads [][]*G.Node // [variable][tower]
	parts [][]any     // scratch: [variable][tower]
	sums  []any       // per variable, reused every step
	// apply is what the optimizer applies, per variable: sums, or with one
	// tower of weight 1 that tower's gradients themselves (no copy).
	apply []any
	sizes []int // elements of each variable
}

func newEngine(fn ModelFn, rep Replication, store *towers.Store, params Params) (*engine, error) {
	if fn == nil {
		return nil, fmt.Errorf("nil model function")
	}
	if len(rep.Devices) == 0 {
		return nil, fmt.Errorf("replication has no devices")
	}
	gs, _, err := store.GetOrCreate(towers.VarSpec{Name: GlobalStepName, Dtype: tensor.Int64})
	if err != nil {
		return nil, fmt.Errorf("global step: %w", err)
	}
	return &engine{fn: fn, rep: rep, store: store, params: params, globalStep: gs, builds: map[string]*build{}}, nil
}

func (e *engine) step() int64 { return e.globalStep.Data().([]int64)[0] }

// shards splits a batch for mode. Train needs a row for every device; Eval
// and Predict run on fewer towers when the batch has fewer rows.
func (e *engine) shards(mode Mode, b Batch) ([]Batch, []int, error) {
	rows, err := b.Rows()
	if err != nil {
		return nil, nil, err
	}
	if rows == 0 {
		return nil, nil, fmt.Errorf("empty batch")
	}
	n := len(e.rep.Devices)
	if mode != Train {
		n = min(n, rows)
	}
	sizes, err := sharding.Sizes(rows, n)
	if err != nil {
		return nil, nil, fmt.Errorf("%v batch across %d towers: %w", mode, n, err)
	}
	out := make([]Batch, n)
	feats, err := sharding.SplitMap(b.Features, n)
	if err != nil {
		return nil, nil, fmt.Errorf("features: %w", err)
	}
	var labels []map[string]*tensor.Dense
	if mode != Predict {
		if labels, err = sharding.SplitMap(b.Labels, n); err != nil {
			return nil, nil, fmt.Errorf("labels: %w", err)
		}
	}
	for i := range out {
		out[i].Features = feats[i]
		if labels != nil {
			out[i].Labels = labels[i]
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b.Sparse)) {
		parts, err := sharding.SplitSparse(b.Sparse[k], n)
		if err != nil {
			return nil, nil, fmt.Errorf("sparse feature %q: %w", k, err)
		}
		for i, p := range parts {
			d, err := p.Dense()
			if err != nil {
				return nil, nil, fmt.Errorf("sparse feature %q, shard %d: %w", k, i, err)
			}
			if out[i].Features == nil {
				out[i].Features = map[string]*tensor.Dense{}
			}
			out[i].Features[k] = d
		}
	}
	return out, sizes, nil
}

// maxBuilds bounds the towers kept for reuse: a server answering every
// batch size would otherwise keep a build per size for ever.
const maxBuilds = 64

// evict closes the least recently used build when the cache is full.
func (e *engine) evict() {
	if len(e.builds) < maxBuilds {
		return
	}
	var oldest string
	for k, b := range e.builds {
		if oldest == "" || b.used < e.builds[oldest].used {
			oldest = k
		}
	}
	for _, t := range e.builds[oldest].towers {
		_ = t.Close()
	}
	delete(e.builds, oldest)
}

// signature identifies the towers a mode needs for these shards.
func signature(mode Mode, shards []Batch) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%v/%d", mode, len(shards))
	for _, s := range shards {
		for _, part := range []map[string]*tensor.Dense{s.Features, s.Labels} {
			sb.WriteString("|")
			for _, k := range slices.Sorted(maps.Keys(part)) {
				fmt.Fprintf(&sb, "%q:%v%v;", k, part[k].Dtype(), part[k].Shape())
			}
		}
	}
	return sb.String()
}

// prepare splits the batch, gets or builds the towers for it and feeds them.
func (e *engine) prepare(mode Mode, batch Batch) (*build, error) {
	var shards []Batch
	var feeds [][]feed
	var rows []int
	var key string
	if s, ok := e.splits.lookup(mode, batch); ok {
		shards, feeds, rows, key = s.shards, s.feeds, s.rows, s.key
	} else {
		var err error
		if shards, rows, err = e.shards(mode, batch); err != nil {
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
		if b, err = e.build(mode, shards); err != nil {
			return nil, err
		}
		e.builds[key] = b
		if e.onBuild != nil {
			if err := e.onBuild(); err != nil {
				delete(e.builds, key) // build again, and retry, next time
				return nil, err
			}
		}
	}
	e.uses++
	b.used = e.uses
	b.rows = rows
	b.weights = e.towerWeights(rows)
	for i, t := range b.towers {
		for _, f := range feeds[i] {
			if err := t.Feed(f.name, f.v); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

func (e *engine) towerWeights(rows []int) []float64 {
	if e.rep.TowerWeights != nil {
		return e.rep.TowerWeights(rows)
	}
	w := make([]float64, len(rows))
	for i := range w {
		w[i] = 1
	}
	return w
}

func (e *engine) build(mode Mode, shards []Batch) (*build, error) {
	b := &build{mode: mode}
	var first *towers.Tower
	for i, shard := range shards {
		t := towers.New(i, e.rep.Devices[i], e.store, first)
		if first == nil {
			first = t
		}
		feats, err := inputs(t, "features/", shard.Features)
		if err != nil {
			return nil, err
		}
		var labels map[string]*G.Node
		if mode != Predict && shard.Labels != nil {
			if labels, err = inputs(t, "labels/", shard.Labels); err != nil {
				return nil, err
			}
		}
		var spec *Spec
		what := fmt.Sprintf("build (%v mode)", mode)
		err = t.Guard(what, func() error {
			var err error
			spec, err = e.fn(t, mode, feats, labels, e.params)
			return err
		})
		if err != nil {
			if _, ok := err.(*towers.PanicError); ok {
				return nil, fmt.Errorf("model function: %w", err)
			}
			return nil, fmt.Errorf("%v, %v mode: model function: %w", t, mode, err)
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
	if mode == Train {
		if err := e.planTraining(b); err != nil {
			return nil, err
		}
	}
	for i, t := range b.towers {
		if err := watch(t, mode, b.specs[i], b.plans, i); err != nil {
			return nil, err
		}
		if err := t.Compile(); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// watch marks every node whose value the engine reads after a run.
func watch(t *towers.Tower, mode Mode, spec *Spec, plans []*trainPlan, i int) error {
	var nodes []*G.Node
	if mode != Predict {
		nodes = append(nodes, spec.Loss)
	}
	for _, p := range plans {
		for _, gs := range p.grads {
			nodes = append(nodes, gs[i])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Predictions)) {
		nodes = append(nodes, spec.Predictions[k])
	}
	if mode == Eval {
		for _, k := range slices.Sorted(maps.Keys(spec.EvalMetrics)) {
			nodes = append(nodes, spec.EvalMetrics[k].Inputs...)
		}
	}
	if mode == Predict {
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

// value reads a watched node of tower i after a run.
func (b *build) value(i int, n *G.Node) (G.Value, error) { return b.towers[i].Value(n) }

func inputs(t *towers.Tower, prefix string, m map[string]*tensor.Dense) (map[string]*G.Node, error) {
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

func (e *engine) checkSpec(t *towers.Tower, mode Mode, spec *Spec) error {
	where := fmt.Sprintf("%v, %v mode", t, mode)
	if spec == nil {
		return fmt.Errorf("%s: model function returned a nil spec", where)
	}
	if mode != Predict {
		if spec.Loss == nil {
			return fmt.Errorf("%s: spec has no loss", where)
		}
		if !spec.Loss.IsScalar() {
			return fmt.Errorf("%s: loss must be a scalar, has shape %v", where, spec.Loss.Shape())
		}
	}
	if mode == Predict && len(spec.Predictions) == 0 {
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
		if name == "loss" || name == GlobalStepName {
			return fmt.Errorf("%s: eval metric %q clashes with the reported %s", where, name, name)
		}
	}
	if mode == Train && len(spec.TrainOps) == 0 && e.rep.Optimizer == nil {
		return fmt.Errorf("%s: spec has no train ops and no optimizer was given (use replicate.Optimizer or Spec.TrainOps)", where)
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
func sameModel(mode Mode, t0 *towers.Tower, s0 *Spec, t *towers.Tower, s *Spec) error {
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
	if a, b := DescribeOutputs(s0.ExportOutputs), DescribeOutputs(s.ExportOutputs); a != b {
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

func trainOpCalls(ops []TrainOp) []string {
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = fmt.Sprintf("%s on %v (own loss: %v)", op.Optimizer.Config(), op.Vars, op.Loss != nil)
	}
	return out
}

// planTraining makes the gradient nodes of every train op on every tower.
func (e *engine) planTraining(b *build) error {
	ops, err := e.trainOps(b.specs[0])
	if err != nil {
		return err
	}
	for k, op0 := range ops {
		names := op0.Vars
		if names == nil {
			for _, name := range b.towers[0].VariableNames() {
				if v, err := e.store.Lookup(name); err == nil && v.Trainable() {
					names = append(names, name)
				}
			}
		}
		per := make([]map[string]*G.Node, len(b.towers))
		for i, t := range b.towers {
			loss := b.specs[i].Loss
			if len(b.specs[i].TrainOps) > 0 && b.specs[i].TrainOps[k].Loss != nil {
				loss = b.specs[i].TrainOps[k].Loss
			}
			if per[i], err = t.Gradients(loss, names); err != nil {
				return fmt.Errorf("train op %d: %w", k, err)
			}
		}
		p := &trainPlan{opt: op0.Optimizer}
		for _, name := range names {
			g0, ok := per[0][name]
			if !ok {
				continue // no gradient: skipped, as TensorFlow does
			}
			v, err := e.store.Lookup(name)
			if err != nil {
				return err
			}
			if !numeric.IsFloat(v.Dtype()) {
				return fmt.Errorf("train op %d: variable %q has dtype %v; only float32 and float64 variables can be trained", k, name, v.Dtype())
			}
			gs := []*G.Node{g0}
			for i := 1; i < len(b.towers); i++ {
				g, ok := per[i][name]
				if !ok {
					return fmt.Errorf("train op %d: %v has no gradient for %q, tower 0 has one: every tower must build the same model", k, b.towers[i], name)
				}
				gs = append(gs, g)
			}
			p.vars = append(p.vars, v)
			p.grads = append(p.grads, gs)
			p.sums = append(p.sums, numeric.NewSlice(v.Dtype(), v.Size()))
			p.apply = append(p.apply, nil)
			p.parts = append(p.parts, make([]any, len(b.towers)))
			p.sizes = append(p.sizes, v.Size())
		}
		b.plans = append(b.plans, p)
	}
	return nil
}

// trainOps resolves a spec's train ops, filling in the default optimizer.
func (e *engine) trainOps(spec *Spec) ([]TrainOp, error) {
	if len(spec.TrainOps) > 0 {
		return spec.TrainOps, nil
	}
	if e.defaultOpt == nil {
		opt, err := e.rep.Optimizer(e.params)
		if err != nil {
			return nil, fmt.Errorf("make optimizer: %w", err)
		}
		if opt == nil {
			return nil, fmt.Errorf("make optimizer: got nil")
		}
		e.defaultOpt = opt
	}
	return []TrainOp{{Loss: spec.Loss, Optimizer: e.defaultOpt}}, nil
}

func (b *build) loss() (float64, error) {
	total := 0.0
	for i, s := range b.specs {
		lv, err := b.value(i, s.Loss)
		if err != nil {
			return 0, fmt.Errorf("read loss: %w", err)
		}
		v, err := numeric.Float64s(lv)
		if err != nil || len(v) != 1 {
			return 0, fmt.Errorf("%v: read loss: %v", b.towers[i], err)
		}
		total += b.weights[i] * v[0]
	}
	return total, nil
}

// trainStep runs one training step: towers compute gradients concurrently,
// gradients are summed per variable with the tower weights, reduced further
// if asked, and every train op's optimizer is applied once on the masters.
//
// check, when not nil, sees the loss before any update and may abort the
// step, leaving every variable as it was.
func (e *engine) trainStep(ctx context.Context, batch Batch, check func(loss float64) error, started func()) (float64, error) {
	region := trace.StartRegion(ctx, "prepare")
	b, err := e.prepare(Train, batch)
	region.End()
	if err != nil {
		return 0, fmt.Errorf("train step %d: %w", e.step(), err)
	}
	run := (*towers.Tower).Run
	if started != nil {
		// The last tower to be started lets the input read ahead: a
		// producer woken earlier is queued ahead of a tower not yet
		// running, and delays it by the whole read.
		last := len(b.towers) - 1
		run = func(t *towers.Tower) error {
			if t.Index() == last {
				started()
			}
			return t.Run()
		}
	}
	if err := towers.RunAll(ctx, b.towers, run); err != nil {
		return 0, fmt.Errorf("train step %d: %w", e.step(), err)
	}
	loss, err := b.loss()
	if err != nil {
		return 0, err
	}
	e.last = b
	if check != nil {
		if err := check(loss); err != nil {
			return loss, err
		}
	}
	// Read every gradient before any optimizer writes: train ops see the
	// same step's values. Gradients are summed in chunks spread over the
	// cores, each element in tower order, so the result does not depend on
	// scheduling. One tower's gradients are applied as they are: the
	// values its ops computed (never a variable's or an input's memory:
	// the tower copies a watched value that shares it).
	direct := len(b.towers) == 1 && b.weights[0] == 1
	region = trace.StartRegion(ctx, "sum gradients")
	defer func() { region.End() }()
	for _, p := range b.plans {
		for j, v := range p.vars {
			parts := p.parts[j]
			for i, g := range p.grads[j] {
				gv, err := b.value(i, g)
				if err != nil {
					return 0, err
				}
				if parts[i], err = numeric.Slice(gv); err != nil {
					return 0, fmt.Errorf("%v: gradient of %q: %w", b.towers[i], v.Name(), err)
				}
				if n := numeric.Len(parts[i]); n != v.Size() {
					return 0, fmt.Errorf("%v: gradient of %q has %d elements, the variable %d", b.towers[i], v.Name(), n, v.Size())
				}
			}
			p.apply[j] = p.sums[j]
			if direct {
				p.apply[j] = parts[0]
			}
		}
		if direct {
			continue
		}
		err := parallel.ForChunks(p.sizes, func(j, lo, hi int) error {
			if err := towers.SumGradientsRange(p.sums[j], p.parts[j], b.weights, lo, hi); err != nil {
				return fmt.Errorf("gradient of %q: %w", p.vars[j].Name(), err)
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	region.End()
	region = trace.StartRegion(ctx, "apply")
	for _, p := range b.plans {
		if e.rep.ReduceGradients != nil {
			gs := make([]Gradient, len(p.vars))
			for j, v := range p.vars {
				gs[j] = Gradient{Variable: v, Value: p.apply[j]}
			}
			if err := e.rep.ReduceGradients(ctx, gs); err != nil {
				return 0, fmt.Errorf("reduce gradients: %w", err)
			}
		}
		if err := p.opt.Apply(e.store, p.vars, p.apply); err != nil {
			return 0, fmt.Errorf("apply %s: %w", p.opt.Name(), err)
		}
	}
	e.globalStep.Data().([]int64)[0]++
	return loss, nil
}

// evalStep runs one evaluation step and folds each tower's shard into that
// tower's metric states.
func (e *engine) evalStep(ctx context.Context, batch Batch) (float64, error) {
	b, err := e.prepare(Eval, batch)
	if err != nil {
		return 0, fmt.Errorf("eval: %w", err)
	}
	if err := e.ensureMetrics(b); err != nil {
		return 0, err
	}
	err = towers.RunAll(ctx, b.towers, func(t *towers.Tower) error {
		if err := t.Run(); err != nil {
			return err
		}
		i := t.Index()
		for _, name := range slices.Sorted(maps.Keys(b.specs[i].EvalMetrics)) {
			bound := b.specs[i].EvalMetrics[name]
			vals := make([]G.Value, len(bound.Inputs))
			for j, n := range bound.Inputs {
				v, err := t.Value(n)
				if err != nil {
					return fmt.Errorf("metric %q: %w", name, err)
				}
				vals[j] = v
			}
			if err := metrics.UpdateValues(e.metrics[i][name], vals); err != nil {
				return fmt.Errorf("%v: metric %q: %w", t, name, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("eval: %w", err)
	}
	return b.loss()
}

// ensureMetrics makes the metric states a build's towers update.
func (e *engine) ensureMetrics(b *build) error {
	for len(e.metrics) < len(b.towers) {
		e.metrics = append(e.metrics, map[string]metrics.Metric{})
	}
	for i, s := range b.specs {
		for name, bound := range s.EvalMetrics {
			m := bound.New()
			old, ok := e.metrics[i][name]
			if !ok {
				e.metrics[i][name] = m
				continue
			}
			if old.Kind() != m.Kind() || len(old.State()) != len(m.State()) {
				return fmt.Errorf("%v: metric %q is %s[%d] here but %s[%d] in an earlier batch of this evaluation",
					b.towers[i], name, m.Kind(), len(m.State()), old.Kind(), len(old.State()))
			}
		}
	}
	return nil
}

func (e *engine) resetMetrics() { e.metrics = nil }

// metricResults adds every replica's metric states into tower 0's and reads
// the values there.
func (e *engine) metricResults() (map[string]float64, error) {
	if len(e.metrics) == 0 {
		return map[string]float64{}, nil
	}
	if err := metrics.ReduceIntoFirst(e.metrics); err != nil {
		return nil, err
	}
	return metrics.Results(e.metrics[0]), nil
}

// predictStep runs one prediction step and returns the predictions and the
// export outputs (by signature key), each concatenated in tower order.
func (e *engine) predictStep(ctx context.Context, batch Batch) (map[string]*tensor.Dense, map[string]map[string]*tensor.Dense, error) {
	b, err := e.prepare(Predict, batch)
	if err != nil {
		return nil, nil, fmt.Errorf("predict: %w", err)
	}
	if err := towers.RunAll(ctx, b.towers, (*towers.Tower).Run); err != nil {
		return nil, nil, fmt.Errorf("predict: %w", err)
	}
	e.lastPredict = b
	gather := func(what string, pick func(*Spec) *G.Node) (*tensor.Dense, error) {
		parts := make([]*tensor.Dense, len(b.towers))
		for i, s := range b.specs {
			pv, err := b.value(i, pick(s))
			if err != nil {
				return nil, err
			}
			v, err := numeric.Dense(pv)
			if err != nil {
				return nil, fmt.Errorf("%v: %s: %w", b.towers[i], what, err)
			}
			if v.Dims() == 0 || v.Shape()[0] != b.rows[i] {
				return nil, fmt.Errorf("%v: %s has shape %v for a shard of %d rows; predictions need the batch along dimension 0", b.towers[i], what, v.Shape(), b.rows[i])
			}
			parts[i] = v
		}
		return sharding.Concat(parts)
	}
	preds := map[string]*tensor.Dense{}
	for _, k := range slices.Sorted(maps.Keys(b.specs[0].Predictions)) {
		if preds[k], err = gather(fmt.Sprintf("prediction %q", k), func(s *Spec) *G.Node { return s.Predictions[k] }); err != nil {
			return nil, nil, fmt.Errorf("predict: %w", err)
		}
	}
	outs := map[string]map[string]*tensor.Dense{}
	for _, sig := range slices.Sorted(maps.Keys(b.specs[0].ExportOutputs)) {
		outs[sig] = map[string]*tensor.Dense{}
		for _, name := range slices.Sorted(maps.Keys(b.specs[0].ExportOutputs[sig].Nodes())) {
			what := fmt.Sprintf("export output %q of signature %q", name, sig)
			if outs[sig][name], err = gather(what, func(s *Spec) *G.Node { return s.ExportOutputs[sig].Nodes()[name] }); err != nil {
				return nil, nil, fmt.Errorf("predict: %w", err)
			}
		}
	}
	return preds, outs, nil
}

// fetch reads named values after a step: variables of the store, else
// predictions of the latest step's towers concatenated in tower order.
func (e *engine) fetch(names []string) (map[string]*tensor.Dense, error) {
	out := make(map[string]*tensor.Dense, len(names))
	for _, name := range names {
		if v, err := e.store.Value(name); err == nil {
			out[name] = v
			continue
		}
		if e.last == nil || e.last.specs[0].Predictions[name] == nil {
			return nil, fmt.Errorf("fetch %q: neither a variable nor a prediction of the model", name)
		}
		parts := make([]*tensor.Dense, len(e.last.towers))
		for i, s := range e.last.specs {
			pv, err := e.last.value(i, s.Predictions[name])
			if err != nil {
				return nil, err
			}
			v, err := numeric.Dense(pv)
			if err != nil {
				return nil, fmt.Errorf("fetch %q from %v: %w", name, e.last.towers[i], err)
			}
			parts[i] = v
		}
		v, err := sharding.Concat(parts)
		if err != nil {
			return nil, fmt.Errorf("fetch %q: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

// close releases every build's VMs.
func (e *engine) close() error {
	var errs []error
	for _, b := range e.builds {
		for _, t := range b.towers {
			if err := t.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	e.builds, e.last, e.lastPredict = map[string]*build{}, nil, nil
	if len(errs) > 0 {
		return fmt.Errorf("close towers: %v", errs)
	}
	return nil
}
