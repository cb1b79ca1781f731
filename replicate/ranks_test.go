package replicate_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// rankSetup is what one process builds and trains in the tests of
// processes that must build the same model; the zero value is the model
// every rank of a test builds unless it changes something.
type rankSetup struct {
	Prefix    string // of the first layer's variables; "" means "dense"
	Hidden    int    // units; 0 means 4
	Deeper    bool   // one more hidden layer (more variables)
	Float32   bool
	Frozen    bool   // the first layer's bias is not trainable
	Opt       string // sgd (default), sgd2 (another rate), momentum, adam, lying (a schedule that describes itself as another)
	Reduction replicate.LossReduction
	Every     int64 // weight averaging
	Bucket    int   // BucketBytes; 0 means 256
	Towers    int   // 0 means 1
	Rows      int   // 0 means 6
	Clip      model.Clip
	// Table adds an embedding table read by ids: "sparse" (only the
	// lookup reads it) or "tied" (also read densely: a dense gradient).
	Table         string
	SparseAsDense replicate.SparseAsDense
}

// lyingSchedule is a schedule whose String does not tell it from another.
type lyingSchedule float64

func (s lyingSchedule) Rate(int64) float64 { return float64(s) }
func (lyingSchedule) String() string       { return "MySchedule" }

func (s rankSetup) optimizer() optimizers.Optimizer {
	switch s.Opt {
	case "sgd2":
		return optimizers.SGD(0.2)
	case "momentum":
		return optimizers.Momentum(0.1, 0.9)
	case "adam":
		return optimizers.Adam(0.1)
	case "lying":
		return optimizers.SGD(0, optimizers.LearningRateSchedule(lyingSchedule(0.3)))
	case "lying2":
		return optimizers.SGD(0, optimizers.LearningRateSchedule(lyingSchedule(0.4)))
	}
	return optimizers.SGD(0.1)
}

func (s rankSetup) dtype() tensor.Dtype {
	if s.Float32 {
		return tensor.Float32
	}
	return tensor.Float64
}

// model is a small network of 3 inputs with a mean squared error and a
// mean metric.
func (s rankSetup) model() model.Fn {
	prefix, hidden := cmpOr(s.Prefix, "dense"), cmpOr(s.Hidden, 4)
	return func(sc *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
		dt := s.dtype()
		var opts []towers.VarOption
		if s.Frozen {
			opts = append(opts, towers.NotTrainable())
		}
		w := sc.MustVariable(prefix+"/kernel", dt, tensor.Shape{3, hidden}, towers.GlorotUniform())
		b := sc.MustVariable(prefix+"/bias", dt, tensor.Shape{hidden}, towers.Constant(0.1), opts...)
		h := G.Must(G.Tanh(G.Must(G.BroadcastAdd(G.Must(G.Mul(f["x"], w)), b, nil, []byte{0}))))
		if s.Deeper {
			w2 := sc.MustVariable("deeper/kernel", dt, tensor.Shape{hidden, hidden}, towers.GlorotUniform())
			h = G.Must(G.Tanh(G.Must(G.Mul(h, w2))))
		}
		out := sc.MustVariable("out/kernel", dt, tensor.Shape{hidden, 1}, towers.GlorotUniform())
		y := G.Must(G.Mul(h, out))
		var table *G.Node
		if s.Table != "" {
			table = sc.MustVariable("table", dt, tensor.Shape{5, 1}, towers.GlorotUniform())
			emb, err := layers.EmbeddingLookup(sc, table, f["ids"])
			if err != nil {
				return nil, err
			}
			y = G.Must(G.Add(y, emb))
		}
		spec := &model.Spec{Predictions: map[string]*G.Node{"y": y}}
		if mode == model.Predict {
			return spec, nil
		}
		diff := G.Must(G.Sub(y, l["y"]))
		spec.Loss = G.Must(G.Mean(G.Must(G.Square(diff))))
		if s.Table == "tied" {
			spec.Loss = G.Must(G.Add(spec.Loss, G.Must(G.Sum(G.Must(G.Square(table))))))
		}
		spec.EvalMetrics = map[string]metrics.Bound{"mae": metrics.Mean(G.Must(G.Abs(diff)))}
		return spec, nil
	}
}

func cmpOr[T comparable](v, or T) T {
	var zero T
	if v == zero {
		return or
	}
	return v
}

func (s rankSetup) config(comm collective.Comm) replicate.Config {
	return replicate.Config{Devices: towers.CPUs(cmpOr(s.Towers, 1)), Optimizer: s.optimizer(), Reduction: s.Reduction, Processes: comm,
		Averaging: replicate.Averaging{Every: s.Every}, BucketBytes: cmpOr(s.Bucket, 256), Clip: s.Clip, SparseAsDense: s.SparseAsDense}
}

// batch is rank's batch: its own rows of a fixed task.
func (s rankSetup) batch(rank int) sharding.Batch {
	rows := cmpOr(s.Rows, 6)
	x, y := mlpData(rows, s.dtype(), uint64(rank+1))
	if s.Table != "" {
		ids := make([]int64, rows)
		for r := range ids {
			ids[r] = int64(r+2*rank) % 5
		}
		x["ids"] = tensor.New(tensor.WithShape(rows), tensor.WithBacking(ids))
	}
	return sharding.Batch{Features: x, Labels: y}
}

// rankOutcome is what one process of these tests ends with.
type rankOutcome struct {
	Err     string
	Step    int64 // the global step it ended at
	Weights map[string][]float64
	Metrics map[string]float64
}

// asProcess does what the estimator's Train (steps > 0) or Evaluate
// (steps = 0) does as process comm.Rank(), each with its own seed: take
// rank 0's variables, build the towers, take them again, run the steps,
// then leave.
func asProcess(ctx context.Context, comm collective.Comm, s rankSetup, steps int) rankOutcome {
	e, err := replicate.NewEngine(replicate.ModelFn(s.model(), s.config(comm)), replicate.EngineConfig{Seed: uint64(10 + comm.Rank())})
	if err != nil {
		return rankOutcome{Err: err.Error()}
	}
	defer e.Close()
	batch := s.batch(comm.Rank())
	var out rankOutcome
	e.Open()
	err = func() error {
		if steps == 0 {
			// What a restored checkpoint gives the estimator: variables
			// on rank 0 for the others to take.
			if err := e.Build(model.Eval, batch); err != nil {
				return err
			}
		}
		if err := e.SyncFromRoot(ctx); err != nil {
			return err
		}
		if steps == 0 {
			if _, err := e.EvalStep(ctx, batch); err != nil {
				return err
			}
			if err := e.ReduceMetrics(ctx, nil); err != nil {
				return err
			}
			var err error
			out.Metrics, err = e.Metrics()
			return err
		}
		if err := e.Build(model.Train, batch); err != nil {
			return err
		}
		if err := e.SyncFromRoot(ctx); err != nil {
			return err
		}
		for range steps {
			if _, err := e.TrainStep(ctx, batch, replicate.StepHooks{}); err != nil {
				return err
			}
		}
		return nil
	}()
	if lerr := e.Leave(ctx, err); err == nil {
		err = lerr
	}
	out.Step = e.Step()
	if err != nil {
		out.Err = err.Error()
		return out
	}
	out.Weights = map[string][]float64{}
	for name, w := range e.Store().Weights() {
		if out.Weights[name], err = numeric.SliceFloat64s(w.Data()); err != nil {
			return rankOutcome{Err: err.Error()}
		}
	}
	return out
}

// mismatchCase is one way for processes to build differently, or alike.
type mismatchCase struct {
	name  string
	ranks []rankSetup
	steps int // 0: evaluate
	// want is what every rank's error names — the ranks and the first
	// item that differs — or nil when the processes build alike.
	want []string
}

var mismatchCases = []mismatchCase{
	{"alike, with other rows and towers", []rankSetup{{}, {Rows: 3, Towers: 2}}, 3, nil},
	{"alike, evaluating", []rankSetup{{}, {Rows: 3}}, 0, nil},
	{"other variable names", []rankSetup{{}, {Prefix: "hidden"}}, 3,
		[]string{"rank 1 builds a different train model than rank 0", `rank 1 has variable "hidden/kernel" float64 (3, 4) trainable where rank 0 has variable "dense/kernel" float64 (3, 4) trainable`}},
	{"other shapes", []rankSetup{{}, {Hidden: 5}}, 3,
		[]string{`rank 1 has variable "dense/kernel" float64 (3, 5) trainable where rank 0 has variable "dense/kernel" float64 (3, 4) trainable`}},
	{"other dtypes", []rankSetup{{}, {Float32: true}}, 3,
		[]string{`rank 1 has variable "dense/kernel" float32 (3, 4) trainable where rank 0 has variable "dense/kernel" float64 (3, 4) trainable`}},
	{"other trainability", []rankSetup{{Frozen: true}, {}}, 3,
		[]string{`rank 1 has variable "dense/bias" float64 (4) trainable where rank 0 has variable "dense/bias" float64 (4) not trainable`}},
	{"more variables (MLP against CNN)", []rankSetup{{}, {Deeper: true}}, 3,
		[]string{`rank 1 has variable "deeper/kernel" float64 (4, 4) trainable where rank 0 has variable "out/kernel"`}},
	{"another learning rate", []rankSetup{{}, {Opt: "sgd2"}}, 3,
		[]string{"rank 1 has train op 0: optimizer SGD(name=SGD,lr=0.2) where rank 0 has train op 0: optimizer SGD(name=SGD,lr=0.1)"}},
	{"Momentum against Adam", []rankSetup{{Opt: "momentum"}, {Opt: "adam"}}, 3,
		[]string{"rank 1 has train op 0: optimizer Adam(", "where rank 0 has train op 0: optimizer Momentum("}},
	{"schedules that describe themselves alike", []rankSetup{{Opt: "lying"}, {Opt: "lying2"}}, 3,
		[]string{"rank 1 has train op 0: learning rates at steps [0 1 10 100 1000 10000 100000 1000000]: 0.4 0.4", "where rank 0 has train op 0: learning rates at steps [0 1 10 100 1000 10000 100000 1000000]: 0.3 0.3"}},
	{"other clipping", []rankSetup{{}, {Clip: model.Clip{GlobalNorm: 1}}}, 3,
		[]string{"rank 1 has train op 0: clips by global norm 1, by value 0 where rank 0 has"}},
	{"another loss reduction", []rankSetup{{}, {Reduction: replicate.Sum}}, 3,
		[]string{"rank 1 has loss reduction SUM where rank 0 has loss reduction BATCH_MEAN"}},
	{"weight averaging on one rank", []rankSetup{{}, {Every: 2}}, 3,
		[]string{"rank 1 has weights averaged every 2 steps, slots too: false where rank 0 has gradients all-reduced in buckets of 256 bytes"}},
	{"other buckets", []rankSetup{{}, {Bucket: 512}}, 3,
		[]string{"rank 1 has gradients all-reduced in buckets of 512 bytes where rank 0 has gradients all-reduced in buckets of 256 bytes"}},
	{"alike, with a table", []rankSetup{{Table: "sparse"}, {Table: "sparse", Rows: 3, Towers: 2}}, 3, nil},
	{"other SparseAsDense", []rankSetup{{Table: "sparse"}, {Table: "sparse", SparseAsDense: replicate.SparseAsDenseAlways}}, 3,
		[]string{"rank 1 has sparse gradients across processes by SparseAsDenseAlways where rank 0 has sparse gradients across processes by SparseAsDenseAuto"}},
	{"a table also read densely on one rank", []rankSetup{{Table: "sparse"}, {Table: "tied"}}, 3,
		[]string{`rank 1 has gradients all-reduced in buckets of 256 bytes where rank 0 has train op 0: sparse gradients of "table"`}},
	{"the third rank differs", []rankSetup{{}, {}, {Opt: "adam"}}, 3,
		[]string{"rank 2 builds a different train model than rank 0", "rank 2 has train op 0: optimizer Adam("}},
	{"evaluating other variables", []rankSetup{{}, {Prefix: "hidden"}}, 0,
		[]string{"rank 1 builds a different eval model than rank 0", `rank 1 has variable "hidden/kernel"`}},
}

// TestProcessesMustBuildTheSameModel: processes that build different
// models (variables, optimizers, loss reduction, cross-process training)
// all stop with a ModelMismatchError naming the first difference and the
// ranks — before the first step, and before the metrics of an evaluation
// are summed — instead of training on to different results; processes
// that differ only in rows and towers train alike.
func TestProcessesMustBuildTheSameModel(t *testing.T) {
	for _, tc := range mismatchCases {
		t.Run(tc.name, func(t *testing.T) {
			comms := collective.Local(len(tc.ranks))
			got := make([]rankOutcome, len(tc.ranks))
			var wg sync.WaitGroup
			for r := range tc.ranks {
				wg.Go(func() { got[r] = asProcess(context.Background(), comms[r], tc.ranks[r], tc.steps) })
			}
			wg.Wait()
			checkMismatch(t, tc, got)
		})
	}
}

// checkMismatch checks each rank's outcome of tc.
func checkMismatch(t *testing.T, tc mismatchCase, got []rankOutcome) {
	t.Helper()
	for r, g := range got {
		if tc.want == nil {
			if g.Err != "" {
				t.Fatalf("rank %d: %s", r, g.Err)
			}
			if d := cmp.Diff(got[0], g, approxFloats); d != "" {
				t.Errorf("rank %d ended other than rank 0 (-rank 0 +rank %d):\n%s", r, r, d)
			}
			continue
		}
		wanterr.Mentions(t, errorString(g.Err), tc.want...)
		if g.Step != 0 {
			t.Errorf("rank %d stopped at step %d, want 0: before the first step", r, g.Step)
		}
	}
}

// errorString makes a recorded error message an error again (nil for "").
func errorString(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}

var approxFloats = cmp.Comparer(func(a, b float64) bool {
	return a == b || (a-b) < 1e-12 && (b-a) < 1e-12
})

// TestModelMismatchAtANewBuild: a build that differs is caught at the
// step that first runs it, whenever that is — here a batch of another size
// at step 2, for which rank 1's model function picks Adam — with the same
// ModelMismatchError on every rank, before any update of that step.
func TestModelMismatchAtANewBuild(t *testing.T) {
	comms := collective.Local(2)
	errs := make([]error, 2)
	steps := make([]int64, 2)
	var wg sync.WaitGroup
	for r := range comms {
		wg.Go(func() {
			var s rankSetup
			base := s.model()
			fn := func(sc *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
				spec, err := base(sc, mode, f, l, p)
				if err == nil && mode == model.Train {
					opt := optimizers.SGD(0.1)
					if r == 1 && f["x"].Shape()[0] == 3 {
						opt = optimizers.Adam(0.1)
					}
					spec.TrainOps = []model.TrainOp{{Optimizer: opt}}
				}
				return spec, err
			}
			cfg := s.config(comms[r])
			cfg.Optimizer = nil
			e, err := replicate.NewEngine(replicate.ModelFn(fn, cfg), replicate.EngineConfig{})
			if err != nil {
				errs[r] = err
				return
			}
			defer e.Close()
			for _, rows := range []int{6, 6, 3} {
				s.Rows = rows
				if _, errs[r] = e.TrainStep(context.Background(), s.batch(r), replicate.StepHooks{}); errs[r] != nil {
					break
				}
			}
			steps[r] = e.Step()
		})
	}
	wg.Wait()
	for r, err := range errs {
		me, ok := errors.AsType[*replicate.ModelMismatchError](err)
		if !ok {
			t.Fatalf("rank %d: %v, want a ModelMismatchError", r, err)
		}
		want := &replicate.ModelMismatchError{Mode: model.Train, Rank: 1, Ref: 0,
			Got:  "train op 0: optimizer Adam(name=Adam,lr=0.1,beta1=0.9,beta2=0.999,eps=1e-08)",
			Want: "train op 0: optimizer SGD(name=SGD,lr=0.1)"}
		if d := cmp.Diff(want, me); d != "" {
			t.Errorf("rank %d (-want +got):\n%s", r, d)
		}
		if steps[r] != 2 {
			t.Errorf("rank %d stopped at step %d, want 2", r, steps[r])
		}
	}
}
