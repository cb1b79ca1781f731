package replicate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/internal/scopes"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
)

// Every process must build what rank 0 builds: the same variables, train
// ops and state updates, or the all-reduce would add one variable's
// gradient to another's, or abort in MPI when the sizes differ. So each
// build of a Train or Eval mode, across processes, is described in
// canonical items (describe), and a header carries each rank's hash of
// its description: the start's sync of variables (the Train build, once
// there is one), every training step (the step's build), every weight
// average, and the sum of an evaluation's metrics (its Eval build). When
// the hashes differ, every rank learns it from the same header; the
// description of the lowest rank with one, then that of the first rank
// that differs from it, are broadcast (length first), and every rank
// returns the same ModelMismatchError naming the first item that differs.
// Row counts and towers may differ between processes; they are not
// described.

// sampleSteps are the global steps at which a train op's learning rate is
// described: a schedule is a Go value whose String may not tell two apart,
// its rates do.
var sampleSteps = []int64{0, 1, 10, 100, 1000, 10_000, 100_000, 1_000_000}

// description is what a build is, for the other processes to compare.
type description struct {
	mode  model.Mode
	items []string
	bytes []byte  // the items, encoded (encodeItems)
	hash  float64 // the bytes' hash in a header: 52 bits, never 0
}

// ModelMismatchError is returned on every process when one builds a
// different model than another: other variables (names, shapes, dtypes,
// trainability, order), other optimizers (kind, hyper-parameters, schedule
// and its learning rates), other tables with sparse gradients (those only
// embedding lookups read), state updates, metrics, loss reduction or
// cross-process training (all-reduce buckets, Config.SparseAsDense, weight
// averaging).
type ModelMismatchError struct {
	Mode model.Mode
	// Rank is the first process whose build differs from Ref's; Ref is
	// rank 0, or the lowest rank that has built the mode.
	Rank, Ref int
	// Got and Want are the first item that differs, Rank's and Ref's; ""
	// where its description ended.
	Got, Want string
}

func (e *ModelMismatchError) Error() string {
	item := func(s string) string {
		if s == "" {
			return "nothing more"
		}
		return s
	}
	return fmt.Sprintf("replicate: process rank %d builds a different %v model than rank %d: rank %d has %s where rank %d has %s (every process must build the same variables, optimizers, state updates, metrics and loss reduction; only their rows and towers may differ)",
		e.Rank, e.Mode, e.Ref, e.Rank, item(e.Got), e.Ref, item(e.Want))
}

// describe is the description of build b of the engine, across processes.
func (e *Engine) describe(b *build) (*description, error) {
	items := []string{fmt.Sprintf("loss reduction %v", e.cfg.Reduction)}
	for _, name := range b.towers[0].VariableNames() {
		v, err := e.store.Lookup(name)
		if err != nil {
			return nil, err
		}
		train := "trainable"
		if !v.Trainable() {
			train = "not trainable"
		}
		items = append(items, fmt.Sprintf("variable %q %v %v %s", name, v.Dtype(), v.Shape(), train))
	}
	spec := b.specs[0]
	if b.mode == model.Train {
		for _, u := range describeUpdates(scopes.Updates(b.towers[0].Scope)) {
			items = append(items, "state update "+u)
		}
		for k, p := range b.plans {
			ownLoss := len(spec.TrainOps) > k && spec.TrainOps[k].Loss != nil
			names := make([]string, len(p.vars))
			for j, v := range p.vars {
				names[j] = strconv.Quote(v.Name())
			}
			config, rates := describeOptimizer(p.opt)
			items = append(items,
				fmt.Sprintf("train op %d: optimizer %s", k, config),
				fmt.Sprintf("train op %d: learning rates at steps %v: %s", k, sampleSteps, rates),
				fmt.Sprintf("train op %d: own loss %t, trains %s", k, ownLoss, strings.Join(names, " ")))
			var tables []string
			for j, sp := range p.sparse {
				if sp != nil && p.grads[j] == nil {
					tables = append(tables, strconv.Quote(p.vars[j].Name()))
				}
			}
			if len(tables) > 0 {
				items = append(items, fmt.Sprintf("train op %d: sparse gradients of %s", k, strings.Join(tables, " ")))
			}
			if p.clip.Enabled() {
				items = append(items, fmt.Sprintf("train op %d: clips by global norm %v, by value %v", k, p.clip.GlobalNorm, p.clip.Value))
			}
		}
		if e.x.avg.Every > 0 {
			items = append(items, fmt.Sprintf("weights averaged every %d steps, slots too: %t", e.x.avg.Every, e.x.avg.Slots))
		} else {
			items = append(items, fmt.Sprintf("gradients all-reduced in buckets of %d bytes", e.x.fusion.Bucket()),
				fmt.Sprintf("sparse gradients across processes by %v", e.cfg.SparseAsDense))
		}
	}
	if b.mode == model.Eval {
		for _, name := range slices.Sorted(maps.Keys(spec.EvalMetrics)) {
			m := spec.EvalMetrics[name].New()
			items = append(items, fmt.Sprintf("eval metric %q %s[%d]", name, m.Kind(), len(m.State())))
		}
	}
	return newDescription(b.mode, items), nil
}

// describeOptimizer is opt's Config and its learning rate at each of
// sampleSteps; a panic in a user's optimizer or schedule is described as
// such.
func describeOptimizer(opt optimizers.Optimizer) (config, rates string) {
	defer func() {
		if r := recover(); r != nil {
			rates = fmt.Sprintf("panic: %v", r)
		}
	}()
	config = opt.Config()
	rs := make([]string, len(sampleSteps))
	for i, s := range sampleSteps {
		rs[i] = strconv.FormatFloat(opt.LearningRate(s), 'g', -1, 64)
	}
	return config, strings.Join(rs, " ")
}

func newDescription(mode model.Mode, items []string) *description {
	b := encodeItems(items)
	h := fnv.New64a()
	h.Write(b)
	sum := h.Sum64() >> 12 // 52 bits: exact in a float64
	if sum == 0 {
		sum = 1
	}
	return &description{mode: mode, items: items, bytes: b, hash: float64(sum)}
}

// encodeItems is the canonical encoding of items: each one's length
// (uvarint) then its bytes.
func encodeItems(items []string) []byte {
	var b []byte
	for _, it := range items {
		b = binary.AppendUvarint(b, uint64(len(it)))
		b = append(b, it...)
	}
	return b
}

func decodeItems(b []byte) ([]string, error) {
	var items []string
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, errors.New("replicate: a malformed description of another process's build")
		}
		items = append(items, string(b[k:k+int(n)]))
		b = b[k+int(n):]
	}
	return items, nil
}

// sameBuild checks a header's hashes (one per rank, 0 for a rank that
// has nothing to compare): when a rank's differs from the lowest rank's
// with one, every rank gets both ranks' descriptions and returns the same
// ModelMismatchError. d is this rank's description (nil: none), of the
// header's mode.
func (x *across) sameBuild(ctx context.Context, hashes []float64, mode model.Mode, d *description) error {
	ref, odd := -1, -1
	for r, h := range hashes {
		switch {
		case h == 0:
		case ref < 0:
			ref = r
		case h != hashes[ref]:
			odd = r
		}
		if odd >= 0 {
			break
		}
	}
	if odd < 0 {
		return nil
	}
	x.open = false // every rank stops at this header
	var mine []byte
	if d != nil {
		mine = d.bytes
	}
	var items [2][]string
	for i, root := range []int{ref, odd} {
		b, err := collective.BroadcastBytes(ctx, x.comm, root, mine)
		if err != nil {
			return fmt.Errorf("compare the processes' models: %w", x.broke(err))
		}
		if items[i], err = decodeItems(b); err != nil {
			return err
		}
	}
	want, got := items[0], items[1]
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	e := &ModelMismatchError{Mode: mode, Rank: odd, Ref: ref}
	if i < len(got) {
		e.Got = got[i]
	}
	if i < len(want) {
		e.Want = want[i]
	}
	return e
}
