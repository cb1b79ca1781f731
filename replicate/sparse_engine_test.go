package replicate_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// Training embedModel across processes: 2 processes × 2 towers, each
// process on its part of a batch of 9 rows, against one device on the
// whole batch.

// acrossTolerance is how far a variable trained across processes may be
// from one device's: float64, the sums' order differs (towers, processes,
// gathered or densified).
const acrossTolerance = 1e-12

// acrossCase is one way of training embedModel on 2 processes.
type acrossCase struct {
	name  string
	mode  replicate.SparseAsDense
	empty bool // rank 1's rows touch no row of either table
	tied  bool // the bag table is also read densely
	micro bool // each rank accumulates its part as 2 micro-batches
	clip  model.Clip
	parts int // the bag table's partitions
}

var acrossCases = func() []acrossCase {
	var cs []acrossCase
	for _, mode := range []replicate.SparseAsDense{replicate.SparseAsDenseAuto, replicate.SparseAsDenseNever, replicate.SparseAsDenseAlways} {
		cs = append(cs,
			acrossCase{name: mode.String(), mode: mode},
			acrossCase{name: mode.String() + "/rank 1 empty", mode: mode, empty: true},
			acrossCase{name: mode.String() + "/micro-batches", mode: mode, micro: true, empty: mode == replicate.SparseAsDenseNever},
			acrossCase{name: mode.String() + "/clipped", mode: mode, clip: model.Clip{GlobalNorm: 0.05}, empty: mode == replicate.SparseAsDenseAlways})
	}
	return append(cs, acrossCase{name: "tied", tied: true, empty: true},
		acrossCase{name: "3 partitions", parts: 3, empty: true},
		acrossCase{name: "3 partitions/tied/" + replicate.SparseAsDenseAlways.String(), parts: 3, tied: true, mode: replicate.SparseAsDenseAlways})
}()

// acrossSteps is how many updates each case trains.
const acrossSteps = 3

// acrossBatch is embedBatch(i); with empty, its rows from 5 on (rank 1's
// part of 2) have empty bags and only the padding id: they touch no row
// of either table.
func acrossBatch(i int, empty bool) sharding.Batch {
	b := embedBatch(i)
	if !empty {
		return b
	}
	const from = 5
	ids := slices.Clone(b.Features["ids"].Data().([]int64))
	clear(ids[2*from:])
	b.Features["ids"] = ints([]int{9, 2}, ids...)
	sp := b.Sparse["bag"]
	var idx [][]int
	var vals []int64
	for k, at := range sp.Indices {
		if at[0] < from {
			idx, vals = append(idx, at), append(vals, sp.Values.Data().([]int64)[k])
		}
	}
	b.Sparse["bag"] = sharding.SparseCOO{Indices: idx, Values: tensor.New(tensor.WithShape(len(vals)), tensor.WithBacking(vals)), DenseShape: sp.DenseShape}
	return b
}

// acrossConfig is the replication of tc on devices towers, in processes
// comm (nil: one process).
func acrossConfig(tc acrossCase, devices int, comm collective.Comm) replicate.Config {
	return replicate.Config{Devices: towers.CPUs(devices), Optimizer: &sparseSGD{lr: 0.2}, Processes: comm, SparseAsDense: tc.mode, Clip: tc.clip, BucketBytes: 256}
}

// engineFloats is every float64 variable of e.
func engineFloats(e *replicate.Engine) map[string][]float64 {
	out := map[string][]float64{}
	for _, name := range e.Store().Names() {
		v, _ := e.Store().Lookup(name)
		if d, ok := v.Data().([]float64); ok {
			out[name] = slices.Clone(d)
		}
	}
	return out
}

// acrossOneDevice trains tc's batches on one device, each whole.
func acrossOneDevice(t *testing.T, tc acrossCase) map[string][]float64 {
	t.Helper()
	e, err := replicate.NewEngine(replicate.ModelFn(embedModel, acrossConfig(tc, 1, nil)), replicate.EngineConfig{Seed: 10, Params: model.Params{"tied": tc.tied, "parts": tc.parts}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i := range acrossSteps {
		if _, err := e.TrainStep(context.Background(), acrossBatch(i, tc.empty), replicate.StepHooks{}); err != nil {
			t.Fatalf("one device, step %d: %v", i, err)
		}
	}
	return engineFloats(e)
}

// acrossRank trains tc as process comm.Rank() of 2, on 2 towers, as the
// estimator's Train does (its own seed, then rank 0's variables), on its
// part of each batch, and returns its variables.
func acrossRank(ctx context.Context, comm collective.Comm, tc acrossCase) (map[string][]float64, error) {
	e, err := replicate.NewEngine(replicate.ModelFn(embedModel, acrossConfig(tc, 2, comm)), replicate.EngineConfig{Seed: uint64(10 + comm.Rank()), Params: model.Params{"tied": tc.tied, "parts": tc.parts}})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	part := func(i int) (sharding.Batch, error) {
		parts, _, err := acrossBatch(i, tc.empty).Split(2)
		if err != nil {
			return sharding.Batch{}, err
		}
		return parts[comm.Rank()], nil
	}
	e.Open()
	err = func() error {
		b, err := part(0)
		if err != nil {
			return err
		}
		if err := e.Build(model.Train, b); err != nil {
			return err
		}
		if err := e.SyncFromRoot(ctx); err != nil {
			return err
		}
		for i := range acrossSteps {
			b, err := part(i)
			if err != nil {
				return err
			}
			if !tc.micro {
				_, err = e.TrainStep(ctx, b, replicate.StepHooks{})
			} else {
				var micro []sharding.Batch
				if micro, _, err = b.Split(2); err == nil {
					_, err = e.TrainMicroBatches(ctx, micro, replicate.StepHooks{})
				}
			}
			if err != nil {
				return fmt.Errorf("step %d: %w", i, err)
			}
		}
		return nil
	}()
	if lerr := e.Leave(ctx, err); err == nil {
		err = lerr
	}
	if err != nil {
		return nil, err
	}
	return engineFloats(e), nil
}

// checkAcross checks the ranks' variables of tc against one device's:
// each within acrossTolerance of it, and the ranks' alike bit for bit.
func checkAcross(t *testing.T, one map[string][]float64, got []map[string][]float64) {
	t.Helper()
	for r, vars := range got {
		if d := cmp.Diff(one, vars, cmpopts.EquateApprox(0, acrossTolerance)); d != "" {
			t.Errorf("rank %d: variables (-1 device +2 processes × 2 towers):\n%s", r, d)
		}
		if d := cmp.Diff(got[0], vars); d != "" {
			t.Errorf("rank %d's variables differ from rank 0's (-0 +%d):\n%s", r, r, d)
		}
	}
}

// TestEmbeddingProcessesEqualOneDevice: embedModel (a sparse bag table, a
// table of ids with padding, dense layers) trained by 2 processes × 2
// towers (a Local group), each on its part of every batch, equals one
// device on the whole batches, to acrossTolerance, in every SparseAsDense
// mode: with a rank whose part touches no row of either table (its
// gradients empty), with 2 micro-batches per update, clipped by global
// norm (the norm of the cross-process sum), with the bag table also read
// densely, and split into 3 partitions. Both ranks end with the same
// variables, bit for bit.
func TestEmbeddingProcessesEqualOneDevice(t *testing.T) {
	for _, tc := range acrossCases {
		t.Run(tc.name, func(t *testing.T) {
			init, err := replicate.NewEngine(replicate.ModelFn(embedModel, acrossConfig(acrossCase{}, 1, nil)), replicate.EngineConfig{Seed: 10, Params: model.Params{"parts": tc.parts}})
			if err != nil {
				t.Fatal(err)
			}
			if err := init.Build(model.Train, acrossBatch(0, false)); err != nil {
				t.Fatal(err)
			}
			start := engineFloats(init)
			init.Close()
			one := acrossOneDevice(t, tc)
			table := "bag/embeddings"
			if tc.parts > 1 {
				table += "/part_0"
			}
			if one[table] == nil || slices.Equal(one[table], start[table]) {
				t.Fatalf("training left the bag table (%s) as it was", table)
			}
			comms := collective.Local(2)
			got := make([]map[string][]float64, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for r := range comms {
				wg.Go(func() { got[r], errs[r] = acrossRank(context.Background(), comms[r], tc) })
			}
			wg.Wait()
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			checkAcross(t, one, got)
		})
	}
}

// TestEmbeddingWeightAveraging: with Averaging every step, 2 processes ×
// 2 towers training embedModel each on its part of every batch average
// their tables as their other variables: after each step every process
// holds the mean of what each would hold after that step alone (two
// engines of one process, their float variables averaged by the test),
// the tables included, to acrossTolerance.
func TestEmbeddingWeightAveraging(t *testing.T) {
	ctx := context.Background()
	cfg := func(comm collective.Comm) replicate.Config {
		c := acrossConfig(acrossCase{}, 2, comm)
		c.Averaging = replicate.Averaging{Every: 1}
		return c
	}
	parts := make([][]sharding.Batch, acrossSteps)
	for i := range parts {
		var err error
		if parts[i], _, err = acrossBatch(i, false).Split(2); err != nil {
			t.Fatal(err)
		}
	}
	// The reference: two engines of one process, from the same start,
	// averaged after every step.
	var refs [2]*replicate.Engine
	for r := range refs {
		e, err := replicate.NewEngine(replicate.ModelFn(embedModel, acrossConfig(acrossCase{}, 2, nil)), replicate.EngineConfig{Seed: 10})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		refs[r] = e
	}
	for r, e := range refs {
		if err := e.Build(model.Train, parts[0][r]); err != nil {
			t.Fatal(err)
		}
	}
	start := engineFloats(refs[0])
	for i := range acrossSteps {
		for r, e := range refs {
			if _, err := e.TrainStep(ctx, parts[i][r], replicate.StepHooks{}); err != nil {
				t.Fatalf("reference %d, step %d: %v", r, i, err)
			}
		}
		for _, v := range refs[0].Store().Variables() {
			w, err := refs[1].Store().Lookup(v.Name())
			if err != nil {
				t.Fatal(err)
			}
			a, ok := v.Data().([]float64)
			if !ok || !v.FromModel() {
				continue
			}
			b := w.Data().([]float64)
			for k := range a {
				a[k] = (a[k] + b[k]) / 2
				b[k] = a[k]
			}
		}
	}
	want := engineFloats(refs[0])
	if slices.Equal(want["bag/embeddings"], start["bag/embeddings"]) {
		t.Fatal("training left the bag table as it was")
	}

	comms := collective.Local(2)
	got := make([]map[string][]float64, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range comms {
		wg.Go(func() {
			e, err := replicate.NewEngine(replicate.ModelFn(embedModel, cfg(comms[r])), replicate.EngineConfig{Seed: uint64(10 + r)})
			if err != nil {
				errs[r] = err
				return
			}
			defer e.Close()
			e.Open()
			errs[r] = func() error {
				if err := e.Build(model.Train, parts[0][r]); err != nil {
					return err
				}
				if err := e.SyncFromRoot(ctx); err != nil {
					return err
				}
				for i := range acrossSteps {
					if _, err := e.TrainStep(ctx, parts[i][r], replicate.StepHooks{}); err != nil {
						return fmt.Errorf("step %d: %w", i, err)
					}
				}
				return nil
			}()
			if err := e.Leave(ctx, errs[r]); errs[r] == nil {
				errs[r] = err
			}
			got[r] = engineFloats(e)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r := range got {
		if d := cmp.Diff(want, got[r], cmpopts.EquateApprox(0, acrossTolerance)); d != "" {
			t.Errorf("rank %d: variables (-averaged by the test +averaged by the engines):\n%s", r, d)
		}
	}
}
