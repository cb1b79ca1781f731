package replicate_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// linearSetup is a linear model, x·w + b (w 4×2, b 2, float64), with the
// mean of its squared error as the loss and an optimizer that clips as
// Clip says: in a train op of the Spec when InOp, else by Config.Clip.
// With Updates it also keeps a moving mean of its predictions (Assign) and
// adds them up (AssignAdd), state updates as batch norm's.
type linearSetup struct {
	Opt     func() optimizers.Optimizer
	Clip    model.Clip
	InOp    bool
	Updates bool
	Init    towers.Initializer // of w; default Glorot uniform
	SumLoss bool               // the loss sums the squared errors
	Reduce  replicate.LossReduction
}

func (s linearSetup) model() model.Fn {
	return func(t *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
		init := s.Init
		if init == nil {
			init = towers.GlorotUniform()
		}
		w := t.MustVariable("w", tensor.Float64, tensor.Shape{4, 2}, init)
		b := t.MustVariable("b", tensor.Float64, tensor.Shape{2}, towers.Zeros())
		pred := G.Must(G.BroadcastAdd(G.Must(G.Mul(f["x"], w)), b, nil, []byte{0}))
		loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, l["y"]))))))
		if s.SumLoss {
			loss = G.Must(G.Sum(G.Must(G.Square(G.Must(G.Sub(pred, l["y"]))))))
		}
		spec := &model.Spec{Loss: loss}
		if s.InOp {
			spec.TrainOps = []model.TrainOp{{Optimizer: s.Opt(), Clip: s.Clip}}
		}
		if s.Updates {
			avg := t.MustVariable("avg", tensor.Float64, tensor.Shape{}, towers.Zeros(), towers.NotTrainable())
			t.MustVariable("count", tensor.Float64, tensor.Shape{}, towers.Zeros(), towers.NotTrainable())
			mean := G.Must(G.Mean(pred))
			moved := G.Must(G.Add(G.Must(G.Mul(avg, G.NewConstant(0.9))), G.Must(G.Mul(mean, G.NewConstant(0.1)))))
			if err := t.Assign("avg", moved); err != nil {
				return nil, err
			}
			if err := t.AssignAdd("count", G.Must(G.Sum(pred))); err != nil {
				return nil, err
			}
		}
		return spec, nil
	}
}

func (s linearSetup) config(devices int) replicate.Config {
	cfg := replicate.Config{Devices: towers.CPUs(devices), Reduction: s.Reduce}
	if !s.InOp {
		cfg.Optimizer, cfg.Clip = s.Opt(), s.Clip
	}
	return cfg
}

func (s linearSetup) engine(t *testing.T, cfg replicate.Config) *replicate.Engine {
	t.Helper()
	e, err := replicate.NewEngine(replicate.ModelFn(s.model(), cfg), replicate.EngineConfig{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// linearBatch is rows rows of a task whose gradients are large: targets
// up to ±20.
func linearBatch(rows int, seed uint64) sharding.Batch {
	r := rand.New(rand.NewPCG(seed, 9))
	x, y := make([]float64, 4*rows), make([]float64, 2*rows)
	for i := range x {
		x[i] = r.Float64()*6 - 3
	}
	for i := range y {
		y[i] = r.Float64()*40 - 20
	}
	return sharding.Batch{
		Features: map[string]*tensor.Dense{"x": numeric.Over(tensor.Shape{rows, 4}, x)},
		Labels:   map[string]*tensor.Dense{"y": numeric.Over(tensor.Shape{rows, 2}, y)},
	}
}

// weightsOf is every weight of e's store.
func weightsOf(t *testing.T, e *replicate.Engine) map[string][]float64 {
	t.Helper()
	out := map[string][]float64{}
	for name, v := range e.Store().Weights() {
		w, err := numeric.SliceFloat64s(v.Data())
		if err != nil {
			t.Fatal(err)
		}
		out[name] = w
	}
	return out
}

// clipRun is what a run of clipped steps ends with.
type clipRun struct {
	Norms   []float64
	Weights map[string][]float64
}

// referenceClip is one device clipping by hand what it computes, step by
// step, as model.Clip says: the gradients' global norm, the scale
// c/max(norm, c), then the values clipped into [-v, v].
func referenceClip(t *testing.T, s linearSetup, batches []sharding.Batch) clipRun {
	t.Helper()
	plain := s
	plain.Clip = model.Clip{}
	e := plain.engine(t, plain.config(1))
	var out clipRun
	for _, batch := range batches {
		_, grads, err := e.ComputeGradients(context.Background(), batch, replicate.StepHooks{})
		if err != nil {
			t.Fatal(err)
		}
		sq := 0.0
		for _, g := range grads {
			for _, x := range g.Value.([]float64) {
				sq += x * x
			}
		}
		norm, scale := math.Sqrt(sq), 1.0
		if c := s.Clip.GlobalNorm; c > 0 {
			out.Norms = append(out.Norms, norm)
			scale = c / max(norm, c)
		}
		for _, g := range grads {
			vals := g.Value.([]float64)
			for i := range vals {
				vals[i] *= scale
				if v := s.Clip.Value; v > 0 {
					vals[i] = math.Max(-v, math.Min(v, vals[i]))
				}
			}
		}
		if err := e.ApplyGradients(context.Background(), grads); err != nil {
			t.Fatal(err)
		}
	}
	out.Weights = weightsOf(t, e)
	return out
}

// clipCases are the clippings of the tests: by norm (every step clips), by
// value, both, and a norm bound above the gradients' (nothing clips).
var clipCases = []struct {
	name string
	clip model.Clip
}{
	{"norm", model.Clip{GlobalNorm: 0.5}},
	{"value", model.Clip{Value: 0.3}},
	{"norm+value", model.Clip{GlobalNorm: 2, Value: 0.3}},
	{"norm above", model.Clip{GlobalNorm: 1e9}},
}

// TestClipWithTowersEqualsOneDevice: N towers (1–4) clip the sum of their
// gradients, so they take one device's clipped steps on the whole batch
// and report its norms: by global norm, by value, both, set on the train
// op or in Config.Clip, with SGD and Adam.
func TestClipWithTowersEqualsOneDevice(t *testing.T) {
	batches := []sharding.Batch{linearBatch(12, 1), linearBatch(12, 2), linearBatch(12, 3)}
	opts := map[string]func() optimizers.Optimizer{
		"SGD":  func() optimizers.Optimizer { return optimizers.SGD(0.1) },
		"Adam": func() optimizers.Optimizer { return optimizers.Adam(0.05) },
	}
	for _, tc := range clipCases {
		for optName, opt := range opts {
			for _, inOp := range []bool{false, true} {
				s := linearSetup{Opt: opt, Clip: tc.clip, InOp: inOp}
				want := referenceClip(t, s, batches)
				for n := 1; n <= 4; n++ {
					t.Run(fmt.Sprintf("%s/%s/inOp=%t/towers%d", tc.name, optName, inOp, n), func(t *testing.T) {
						e := s.engine(t, s.config(n))
						var got clipRun
						for _, batch := range batches {
							if _, err := e.TrainStep(context.Background(), batch, replicate.StepHooks{}); err != nil {
								t.Fatal(err)
							}
							if norm, ok := e.GradientNorm(); ok {
								got.Norms = append(got.Norms, norm)
							}
						}
						got.Weights = weightsOf(t, e)
						if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
							t.Errorf("%d towers differ from one device clipping by hand (-want +got):\n%s", n, diff)
						}
					})
				}
			}
		}
	}
}

// TestClipAcrossProcessesEqualsOneDevice: 2 processes × 2 towers clip the
// gradients summed over every process, as one device on their batches
// together does.
func TestClipAcrossProcessesEqualsOneDevice(t *testing.T) {
	for _, tc := range clipCases {
		t.Run(tc.name, func(t *testing.T) {
			s := linearSetup{Opt: func() optimizers.Optimizer { return optimizers.SGD(0.1) }, Clip: tc.clip}
			const steps = 3
			whole := linearBatch(16, 1)
			parts, _, err := whole.Split(2)
			if err != nil {
				t.Fatal(err)
			}
			want := referenceClip(t, s, []sharding.Batch{whole, whole, whole})
			got := make([]clipRun, 2)
			engines := asRanks(t, s, collective.Local(2), func(rank int, e *replicate.Engine) error {
				for range steps {
					if _, err := e.TrainStep(context.Background(), parts[rank], replicate.StepHooks{}); err != nil {
						return err
					}
					if norm, ok := e.GradientNorm(); ok {
						got[rank].Norms = append(got[rank].Norms, norm)
					}
				}
				return nil
			}, parts)
			for rank, e := range engines {
				got[rank].Weights = weightsOf(t, e)
				if diff := cmp.Diff(want, got[rank], cmpopts.EquateApprox(0, 1e-12)); diff != "" {
					t.Errorf("rank %d of 2 processes × 2 towers differs from one device clipping by hand (-want +got):\n%s", rank, diff)
				}
			}
		})
	}
}

// asRanks runs train on processes of 2 towers each, one per comm: each takes rank 0's variables after building for its
// batch, trains, then leaves. It returns their engines once all are done;
// an error on any rank ends the test.
func asRanks(t *testing.T, s linearSetup, comms []collective.Comm, train func(rank int, e *replicate.Engine) error, batches []sharding.Batch) []*replicate.Engine {
	t.Helper()
	ranks := len(comms)
	errs := make([]error, ranks)
	engines := make([]*replicate.Engine, ranks)
	var wg sync.WaitGroup
	for rank := range comms {
		cfg := s.config(2)
		cfg.Processes = comms[rank]
		e := s.engine(t, cfg)
		engines[rank] = e
		wg.Go(func() {
			ctx := context.Background()
			e.Open()
			errs[rank] = func() error {
				if err := e.Build(model.Train, batches[rank]); err != nil {
					return err
				}
				if err := e.SyncFromRoot(ctx); err != nil {
					return err
				}
				return train(rank, e)
			}()
			if err := e.Leave(ctx, errs[rank]); errs[rank] == nil {
				errs[rank] = err
			}
		})
	}
	wg.Wait()
	for rank, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", rank, err)
		}
	}
	return engines
}
