package estimator_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// namedModel is y = x·w, w a [4, 1] variable named name, with a squared
// error loss and a mean absolute error metric.
func namedModel(name string) model.Fn {
	return func(s *towers.Scope, mode model.Mode, f model.Features, l model.Labels, _ model.Params) (*model.Spec, error) {
		w := s.MustVariable(name, tensor.Float64, tensor.Shape{4, 1}, towers.GlorotUniform())
		y := G.Must(G.Mul(f["x"], w))
		spec := &model.Spec{Predictions: map[string]*G.Node{"y": y}}
		if mode == model.Predict {
			return spec, nil
		}
		diff := G.Must(G.Sub(y, l["y"]))
		spec.Loss = G.Must(G.Mean(G.Must(G.Square(diff))))
		spec.EvalMetrics = map[string]metrics.Bound{"mae": metrics.Mean(G.Must(G.Abs(diff)))}
		return spec, nil
	}
}

// rankModel is what one process of TestProcessesBuildDifferentModels
// builds.
type rankModel struct {
	variable string
	opt      string // sgd, sgd2 (another rate), momentum, adam; "": none
}

// differentModels are ways for two processes to build other models, or
// the same one.
var differentModels = []struct {
	name     string
	ranks    [2]rankModel
	evaluate bool     // else train 3 steps
	want     []string // what every rank's error says; nil: no error
}{
	{"alike", [2]rankModel{{"w", "momentum"}, {"w", "momentum"}}, false, nil},
	{"Momentum and Adam", [2]rankModel{{"w", "momentum"}, {"w", "adam"}}, false,
		[]string{"train: ", "rank 1 builds a different train model than rank 0", "rank 1 has train op 0: optimizer Adam(", "where rank 0 has train op 0: optimizer Momentum("}},
	{"other learning rates", [2]rankModel{{"w", "sgd"}, {"w", "sgd2"}}, false,
		[]string{"rank 1 has train op 0: optimizer SGD(name=SGD,lr=0.1) where rank 0 has train op 0: optimizer SGD(name=SGD,lr=0.05)"}},
	{"other variable names", [2]rankModel{{"w", "sgd"}, {"v", "sgd"}}, false,
		[]string{`rank 1 has variable "v" float64 (4, 1) trainable where rank 0 has variable "w" float64 (4, 1) trainable`}},
	{"evaluating other variable names", [2]rankModel{{"w", ""}, {"v", ""}}, true,
		[]string{"evaluate: ", "rank 1 builds a different eval model than rank 0", `rank 1 has variable "v"`, `where rank 0 has variable "w"`}},
}

// modelAsRank runs rm as process comm.Rank() of comm: Train, or Evaluate.
// It returns the error and the global step the process ended at.
func modelAsRank(comm collective.Comm, rm rankModel, evaluate bool) (int64, error) {
	var opt optimizers.Optimizer
	switch rm.opt {
	case "sgd":
		opt = optimizers.SGD(0.05)
	case "sgd2":
		opt = optimizers.SGD(0.1)
	case "momentum", "adam":
		opt = acrossOptimizer(rm.opt)
	}
	cfg := replicate.Config{Devices: cpuDevices(1), Optimizer: opt, Processes: comm}
	est, err := estimator.New(replicate.ModelFn(namedModel(rm.variable), cfg), estimator.RunConfig{Seed: uint64(comm.Rank() + 1), LogEvery: -1})
	if err != nil {
		return 0, err
	}
	defer est.Close()
	features, labels := mlpData(32, tensor.Float64)
	in, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 8, Epochs: estimator.Forever, Processes: comm.Size(), Rank: comm.Rank()})
	if err != nil {
		return 0, err
	}
	if evaluate {
		_, err = est.Evaluate(context.Background(), in, estimator.EvalSteps(2))
	} else {
		err = est.Train(context.Background(), in, estimator.Steps(3))
	}
	return est.GlobalStep(), err
}

// checkDifferentModels checks every rank's error and global step.
func checkDifferentModels(t *testing.T, evaluate bool, want []string, errs []error, steps []int64) {
	t.Helper()
	for r, err := range errs {
		wantStep := int64(0)
		if want == nil {
			if err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
			if !evaluate {
				wantStep = 3
			}
		} else {
			wanterr.Mentions(t, err, want...)
		}
		if d := cmp.Diff(wantStep, steps[r]); d != "" {
			t.Errorf("rank %d: global step (-want +got):\n%s", r, d)
		}
	}
}

// TestProcessesBuildDifferentModels: processes whose models differ (an
// optimizer, a learning rate, a variable's name) stop, every one of them,
// with an error naming the first difference and the ranks — Train before
// its first step, Evaluate before it reports metrics — instead of training
// on to different variables or reporting one blended loss.
func TestProcessesBuildDifferentModels(t *testing.T) {
	for _, tc := range differentModels {
		t.Run(tc.name, func(t *testing.T) {
			comms := collective.Local(2)
			errs := make([]error, 2)
			steps := make([]int64, 2)
			var wg sync.WaitGroup
			for r, rm := range tc.ranks {
				wg.Go(func() { steps[r], errs[r] = modelAsRank(comms[r], rm, tc.evaluate) })
			}
			wg.Wait()
			checkDifferentModels(t, tc.evaluate, tc.want, errs, steps)
			for r, err := range errs {
				if _, ok := errors.AsType[*replicate.ModelMismatchError](err); tc.want != nil && !ok {
					t.Errorf("rank %d: %v is no ModelMismatchError", r, err)
				}
			}
		})
	}
}
