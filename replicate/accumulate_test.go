package replicate_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/towerflow/towerflow/internal/vartest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// integerBatch is rows rows of small integers: the gradients of the
// summed squared error from weights that are multiples of 1/8 are exact
// in float64, in any order.
func integerBatch(rows int, seed uint64) sharding.Batch {
	r := rand.New(rand.NewPCG(seed, 4))
	x, y := make([]float64, 4*rows), make([]float64, 2*rows)
	for i := range x {
		x[i] = float64(r.IntN(7) - 3)
	}
	for i := range y {
		y[i] = float64(r.IntN(9) - 4)
	}
	return sharding.Batch{
		Features: map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{rows, 4}, x)},
		Labels:   map[string]*tensor.Dense{"y": numeric.Over(tensor.Shape{rows, 2}, y)},
	}
}

// accumulated is what a run of updates ends with.
type accumulated struct {
	Losses  []float64
	Step    int64
	Weights map[string][]float64
	State   map[string][]float64 // the state updates' variables
}

func finish(t *testing.T, e *replicate.Engine, losses []float64) accumulated {
	t.Helper()
	out := snapshot(e, losses)
	if out.Weights == nil {
		t.Fatal("weights that are not float")
	}
	return out
}

// snapshot is finish for any goroutine: nil Weights when one is not float.
func snapshot(e *replicate.Engine, losses []float64) accumulated {
	out := accumulated{Losses: losses, Step: e.Step(), Weights: map[string][]float64{}, State: map[string][]float64{}}
	for name, v := range e.Store().Weights() {
		w, err := numeric.SliceFloat64s(v.Data())
		if err != nil {
			return accumulated{}
		}
		out.Weights[name] = w
	}
	for _, name := range []string{"avg", "count"} {
		if v, err := e.Store().Lookup(name); err == nil {
			out.State[name], _ = numeric.SliceFloat64s(v.Data())
		}
	}
	return out
}

// TestAccumulateMicroBatchesEqualsOneStep: 4 micro-batches of 25 rows
// accumulated into one update equal one step on the 100 rows together:
// bit for bit the step of 4 towers of 25 (SGD and Adam, every reduction,
// state updates and loss included: the micro-batches are summed as those
// towers are); one device's to float tolerance (1e-12) in general, and bit
// for bit with SGD where the sums are exact (integer data, a summed loss;
// Adam's first update leaves exact values, so it is compared to 1e-12);
// the global step counts updates.
func TestAccumulateMicroBatchesEqualsOneStep(t *testing.T) {
	opts := map[string]func() optimizers.Optimizer{
		"SGD":  func() optimizers.Optimizer { return optimizers.SGD(0.125) },
		"Adam": func() optimizers.Optimizer { return optimizers.Adam(0.05) },
	}
	cases := []struct {
		name    string
		setup   linearSetup
		batch   func(rows int, seed uint64) sharding.Batch
		oneTol  float64 // 0: one device bit for bit
		devices int     // of the accumulating engine
	}{
		{"batch mean", linearSetup{Updates: true}, linearBatch, 1e-12, 1},
		{"batch mean/2 towers", linearSetup{Updates: true}, linearBatch, 1e-12, 2},
		{"sum", linearSetup{Reduce: replicate.Sum, Updates: true}, linearBatch, -1, 1},
		{"mean", linearSetup{Reduce: replicate.Mean, Updates: true}, linearBatch, -1, 1},
		{"exact", linearSetup{Reduce: replicate.Sum, SumLoss: true, Init: towers.Zeros()}, integerBatch, 0, 1},
	}
	const updates, micro, rows = 2, 4, 25
	for _, tc := range cases {
		for optName, opt := range opts {
			t.Run(fmt.Sprintf("%s/%s", tc.name, optName), func(t *testing.T) {
				s := tc.setup
				s.Opt = opt
				ctx := context.Background()
				var batches [updates][]sharding.Batch
				var wholes [updates]sharding.Batch
				for u := range updates {
					for k := range micro {
						batches[u] = append(batches[u], tc.batch(rows, uint64(10*u+k)))
					}
					wholes[u] = concatBatches(t, batches[u])
				}
				run := func(devices int, step func(e *replicate.Engine, u int) (float64, error)) accumulated {
					e := s.engine(t, s.config(devices))
					var losses []float64
					for u := range updates {
						loss, err := step(e, u)
						if err != nil {
							t.Fatal(err)
						}
						losses = append(losses, loss)
					}
					return finish(t, e, losses)
				}
				got := run(tc.devices, func(e *replicate.Engine, u int) (float64, error) {
					return e.TrainMicroBatches(ctx, batches[u], replicate.StepHooks{})
				})
				if got.Step != updates {
					t.Errorf("global step %d after %d updates of %d micro-batches", got.Step, updates, micro)
				}
				whole := func(e *replicate.Engine, u int) (float64, error) {
					return e.TrainStep(ctx, wholes[u], replicate.StepHooks{})
				}
				if tc.devices == 1 {
					if diff := cmp.Diff(run(micro, whole), got); diff != "" {
						t.Errorf("accumulated differs from one step of %d towers (-towers +accumulated):\n%s", micro, diff)
					}
				}
				if tol := tc.oneTol; tol >= 0 {
					if tol == 0 && optName == "Adam" {
						tol = 1e-12 // its first update leaves the exact values
					}
					one := run(1, whole)
					if diff := cmp.Diff(one, got, cmpopts.EquateApprox(0, tol)); diff != "" {
						t.Errorf("accumulated differs from one step of one device (-one +accumulated):\n%s", diff)
					}
				}
			})
		}
	}
}

// concatBatches is bs as one batch.
func concatBatches(t *testing.T, bs []sharding.Batch) sharding.Batch {
	t.Helper()
	var fs, ls []map[string]*tensor.Dense
	for _, b := range bs {
		fs, ls = append(fs, b.Features), append(ls, b.Labels)
	}
	f, err := sharding.ConcatMap(fs)
	if err != nil {
		t.Fatal(err)
	}
	l, err := sharding.ConcatMap(ls)
	if err != nil {
		t.Fatal(err)
	}
	return sharding.Batch{Features: f, Labels: l}
}

// countingComm counts the collectives its rank calls.
type countingComm struct {
	collective.Comm
	calls *atomic.Int64
}

func (c countingComm) AllReduceFloat64(ctx context.Context, buf []float64) error {
	c.calls.Add(1)
	return c.Comm.AllReduceFloat64(ctx, buf)
}

func (c countingComm) AllReduceFloat32(ctx context.Context, buf []float32) error {
	c.calls.Add(1)
	return c.Comm.AllReduceFloat32(ctx, buf)
}

func (c countingComm) Broadcast(ctx context.Context, root int, buf []byte) error {
	c.calls.Add(1)
	return c.Comm.Broadcast(ctx, root, buf)
}

// TestAccumulateAcrossProcesses: 2 processes × 2 towers each accumulating
// 3 micro-batches into an update equal one device's step on the 6
// micro-batches together (to 1e-12), state updates included, and an update
// of 3 micro-batches calls as many collectives as a step of one batch: one
// header and one all-reduce per update, none per micro-batch.
func TestAccumulateAcrossProcesses(t *testing.T) {
	for _, optName := range []string{"SGD", "Adam"} {
		t.Run(optName, func(t *testing.T) {
			opt := func() optimizers.Optimizer { return optimizers.SGD(0.1) }
			if optName == "Adam" {
				opt = func() optimizers.Optimizer { return optimizers.Adam(0.05) }
			}
			s := linearSetup{Opt: opt, Updates: true}
			const updates, micro = 2, 3
			var batches [2][updates][]sharding.Batch
			var wholes [updates]sharding.Batch
			for u := range updates {
				var all []sharding.Batch
				for rank := range 2 {
					for k := range micro {
						b := linearBatch(4+k+rank, uint64(100*u+10*rank+k))
						batches[rank][u] = append(batches[rank][u], b)
						all = append(all, b)
					}
				}
				wholes[u] = concatBatches(t, all)
			}
			ref := s.engine(t, s.config(1))
			var want []float64
			for u := range updates {
				loss, err := ref.TrainStep(context.Background(), wholes[u], replicate.StepHooks{})
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, loss)
			}
			wantRun := finish(t, ref, want)

			counts := [2]*atomic.Int64{{}, {}}
			var comms []collective.Comm
			for rank, c := range collective.Local(2) {
				comms = append(comms, countingComm{Comm: c, calls: counts[rank]})
			}
			got := make([]accumulated, 2)
			perUpdate := make([][2]int64, 2) // collectives of a step of one batch, of an update of micro
			asRanks(t, s, comms, func(rank int, e *replicate.Engine) error {
				var losses []float64
				for u := range updates {
					n := counts[rank].Load()
					loss, err := e.TrainMicroBatches(context.Background(), batches[rank][u], replicate.StepHooks{})
					if err != nil {
						return err
					}
					perUpdate[rank][1] = counts[rank].Load() - n
					losses = append(losses, loss)
				}
				got[rank] = snapshot(e, losses)
				n := counts[rank].Load()
				if _, err := e.TrainStep(context.Background(), batches[rank][0][0], replicate.StepHooks{}); err != nil {
					return err
				}
				perUpdate[rank][0] = counts[rank].Load() - n
				return nil
			}, []sharding.Batch{batches[0][0][0], batches[1][0][0]})
			for rank := range got {
				if diff := cmp.Diff(wantRun, got[rank], cmpopts.EquateApprox(0, 1e-12)); diff != "" {
					t.Errorf("rank %d: accumulated across processes differs from one device (-one +accumulated):\n%s", rank, diff)
				}
				if perUpdate[rank][1] != perUpdate[rank][0] {
					t.Errorf("rank %d: an update of %d micro-batches called %d collectives, a step of one batch %d", rank, micro, perUpdate[rank][1], perUpdate[rank][0])
				}
			}
		})
	}
}

// TestClipAndAccumulateConfigErrors: a clipping bound that is no bound
// (in Config or in a train op) and a negative AccumulateSteps are errors
// naming them; no micro-batches is an error.
func TestClipAndAccumulateConfigErrors(t *testing.T) {
	sgd := func() optimizers.Optimizer { return optimizers.SGD(0.1) }
	cases := []struct {
		name  string
		setup linearSetup
		edit  func(*replicate.Config)
		want  string
	}{
		{"config clip", linearSetup{Opt: sgd, Clip: model.Clip{GlobalNorm: -2}}, nil, "Config.Clip: clip GlobalNorm -2"},
		{"train op clip", linearSetup{Opt: sgd, InOp: true, Clip: model.Clip{Value: math.Inf(1)}}, nil, "train op 0: clip Value +Inf"},
		{"accumulate", linearSetup{Opt: sgd}, func(c *replicate.Config) { c.AccumulateSteps = -1 }, "AccumulateSteps -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.setup.config(1)
			if tc.edit != nil {
				tc.edit(&cfg)
			}
			e, err := replicate.NewEngine(replicate.ModelFn(tc.setup.model(), cfg), replicate.EngineConfig{})
			if err == nil {
				defer e.Close()
				_, err = e.TrainStep(context.Background(), linearBatch(4, 1), replicate.StepHooks{})
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	e := linearSetup{Opt: sgd}.engine(t, linearSetup{Opt: sgd}.config(1))
	if _, err := e.TrainMicroBatches(context.Background(), nil, replicate.StepHooks{}); err == nil || !strings.Contains(err.Error(), "no micro-batches") {
		t.Errorf("no micro-batches: error %v", err)
	}
}

// TestAccumulateBatchNormPerMicroBatch: batch norm normalizes each
// micro-batch by its own statistics, as PyTorch does: 4 accumulated
// micro-batches of 6 rows on one device train bit for bit as 4 towers of 6
// rows normalized per tower (moving statistics included), and not as one
// device normalizing the 24 rows together.
func TestAccumulateBatchNormPerMicroBatch(t *testing.T) {
	const rows = 24
	r := rand.New(rand.NewPCG(3, 8))
	xs, ys := make([]float64, rows*16), make([]float64, rows)
	for i := range xs {
		xs[i] = r.NormFloat64()*2 + 1
	}
	for i := range ys {
		ys[i] = xs[16*i+5] - xs[16*i+10]
	}
	feats := map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{rows, 1, 4, 4}, xs)}
	labels := map[string]*tensor.Dense{"y": numeric.Over(tensor.Shape{rows, 1}, ys)}
	train := func(fn model.Fn, cfg replicate.Config, batch int) map[string][]float64 {
		est, err := estimator.New(replicate.ModelFn(fn, cfg), estimator.RunConfig{Seed: 5, LogEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer est.Close()
		in, err := estimator.FromTensors(feats, labels, estimator.TensorInput{BatchSize: batch, Epochs: estimator.Forever})
		if err != nil {
			t.Fatal(err)
		}
		if err := est.Train(context.Background(), in, estimator.Steps(3)); err != nil {
			t.Fatal(err)
		}
		return vartest.Variables(t, est)
	}
	got := train(bnModel(false), replicate.Config{Devices: towers.CPUs(1), AccumulateSteps: 4}, rows/4)
	perTower := train(bnModel(true), replicate.Config{Devices: towers.CPUs(4)}, rows)
	if diff := cmp.Diff(perTower, got); diff != "" {
		t.Errorf("4 micro-batches differ from 4 towers normalized per tower (-towers +micro-batches):\n%s", diff)
	}
	if got["global_step"][0] != 3 {
		t.Errorf("global step %v after 3 updates", got["global_step"])
	}
	together := train(bnModel(false), replicate.Config{Devices: towers.CPUs(1)}, rows)
	if cmp.Equal(together["d2/kernel"], got["d2/kernel"], cmpopts.EquateApprox(1e-9, 1e-12)) {
		t.Errorf("micro-batches trained as one device normalizing their rows together")
	}
}
