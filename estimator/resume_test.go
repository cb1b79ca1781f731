package estimator_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// Exact resume: training 2K steps in one run must give bit-identical
// variables, optimizer slots and global step to training K steps in one
// process, which exits, and K more in a new process on the same model
// directory. The first half runs in a child process: the test binary
// re-executed with -test.run=^TestResumeHelper$ and the run described by
// the environment variables below.
const (
	resumeDirEnv    = "TOWERFLOW_RESUME_DIR"
	resumeOptEnv    = "TOWERFLOW_RESUME_OPT"
	resumeTowersEnv = "TOWERFLOW_RESUME_TOWERS"
	resumeStepsEnv  = "TOWERFLOW_RESUME_STEPS"
	// resumeFilesEnv, when set, is the list of TFRecord files (separated
	// by the OS's path list separator) the run trains on, through
	// filePipeline, rather than resumeInput.
	resumeFilesEnv = "TOWERFLOW_RESUME_FILES"
)

// resumeOptimizer makes the optimizer named by params["opt"].
func resumeOptimizer(p model.Params) (optimizers.Optimizer, error) {
	switch name, _ := p["opt"].(string); name {
	case "SGD":
		return optimizers.SGD(0.1), nil
	case "Momentum":
		return optimizers.Momentum(0.1, 0.9), nil
	case "Adam":
		return optimizers.Adam(0.05), nil
	default:
		return nil, fmt.Errorf("unknown optimizer %q", name)
	}
}

// mlpResumeModel is a small float64 network, y = tanh(x·W1 + b1)·W2 + b2,
// with randomly initialised weights, a mean squared error loss and a train
// op whose optimizer params["opt"] names.
func mlpResumeModel(t *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
	w1 := t.MustVariable("hidden/w", tensor.Float64, tensor.Shape{3, 4}, towers.GlorotUniform())
	b1 := t.MustVariable("hidden/b", tensor.Float64, tensor.Shape{4}, towers.RandomUniform(-0.1, 0.1))
	w2 := t.MustVariable("out/w", tensor.Float64, tensor.Shape{4, 1}, towers.GlorotUniform())
	b2 := t.MustVariable("out/b", tensor.Float64, nil, towers.RandomUniform(-0.1, 0.1))
	h := G.Must(G.Tanh(G.Must(G.BroadcastAdd(G.Must(G.Mul(f["x"], w1)), b1, nil, []byte{0}))))
	y := G.Must(G.Add(G.Must(G.Mul(h, w2)), b2))
	spec := &model.Spec{Predictions: map[string]*G.Node{"y": y}}
	if mode == model.Predict {
		return spec, nil
	}
	spec.Loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(y, l["y"]))))))
	opt, err := resumeOptimizer(p)
	if err != nil {
		return nil, err
	}
	spec.TrainOps = []model.TrainOp{{Optimizer: opt}}
	return spec, nil
}

// resumeModel is mlpResumeModel on one device (towers == 1) or replicated
// over that many CPU towers with BatchMean.
func resumeModel(towersN int) *replicate.Model {
	if towersN == 1 {
		return replicate.ModelFn(mlpResumeModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}})
	}
	return replicated(mlpResumeModel, towersN)
}

// resumeInput is 7 examples in shuffled batches of 4 (the last of an
// epoch 3; uneven shards on 2 and 3 towers), forever: what a step sees
// depends on where a run started, which a resumed Train gives it.
func resumeInput() (estimator.InputFn, error) {
	const n = 7
	x, y := make([]float64, 3*n), make([]float64, n)
	for i := range n {
		for j := range 3 {
			x[3*i+j] = float64((5*i+3*j)%7)/3 - 1
		}
		y[i] = 0.5*x[3*i] - 0.25*x[3*i+1]*x[3*i+2] + 0.1
	}
	return estimator.FromTensors(
		map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(n, 3), tensor.WithBacking(x))},
		map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(n, 1), tensor.WithBacking(y))},
		estimator.TensorInput{BatchSize: 4, Epochs: estimator.Forever, Shuffle: true, Seed: 9})
}

func newResumeEstimator(dir, opt string, towersN int) (*estimator.Estimator, error) {
	return estimator.New(resumeModel(towersN), estimator.RunConfig{
		ModelDir: dir, Seed: 3, LogEvery: -1, Params: model.Params{"opt": opt},
		Logger: slog.New(slog.DiscardHandler),
	})
}

// trainSteps trains est for steps more steps on resumeInput.
func trainSteps(est *estimator.Estimator, steps int64) error {
	in, err := resumeInput()
	if err != nil {
		return err
	}
	return est.Train(context.Background(), in, estimator.Steps(steps))
}

// varState is one variable exactly: dtype, shape and data.
type varState struct {
	Dtype string
	Shape []int
	Data  any
}

func stateOf(t *testing.T, v *tensor.Dense) varState {
	t.Helper()
	data, err := numeric.Slice(v)
	if err != nil {
		t.Fatal(err)
	}
	return varState{v.Dtype().String(), slices.Clone([]int(v.Shape())), numeric.Copy(data)}
}

// snapshot returns every variable of est, slots and global step included.
func snapshot(t *testing.T, est *estimator.Estimator) map[string]varState {
	t.Helper()
	out := map[string]varState{}
	for _, name := range est.VariableNames() {
		v, err := est.VariableValue(name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = stateOf(t, v)
	}
	return out
}

// checkpointState returns every variable of the checkpoint r.
func checkpointState(t *testing.T, r *checkpoint.Reader) map[string]varState {
	t.Helper()
	out := map[string]varState{}
	for _, name := range r.Names() {
		v, err := r.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = stateOf(t, v)
	}
	return out
}

// TestResumeHelper is the child process of TestExactResume: it trains the
// run its environment describes and exits. It does nothing in a normal test
// run.
func TestResumeHelper(t *testing.T) {
	dir := os.Getenv(resumeDirEnv)
	if dir == "" {
		t.Skip("helper process for TestExactResume")
	}
	towersN, err := strconv.Atoi(os.Getenv(resumeTowersEnv))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := strconv.ParseInt(os.Getenv(resumeStepsEnv), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	est, err := newResumeEstimator(dir, os.Getenv(resumeOptEnv), towersN)
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	train := trainSteps
	if files := os.Getenv(resumeFilesEnv); files != "" {
		train = func(est *estimator.Estimator, steps int64) error {
			return trainFileSteps(est, filepath.SplitList(files), steps)
		}
	}
	if err := train(est, steps); err != nil {
		t.Fatal(err)
	}
	if got := est.GlobalStep(); got != steps {
		t.Fatalf("child: global step %d, want %d", got, steps)
	}
}

func TestExactResume(t *testing.T) {
	const k = 3
	tests := []struct {
		opt       string
		towers    int
		wantSlots []string // besides the model's variables and the global step
	}{
		{"SGD", 1, nil},
		{"SGD", 2, nil},
		{"SGD", 3, nil},
		{"Momentum", 1, []string{"hidden/w/Momentum/momentum", "hidden/b/Momentum/momentum", "out/w/Momentum/momentum", "out/b/Momentum/momentum"}},
		{"Momentum", 2, []string{"hidden/w/Momentum/momentum", "hidden/b/Momentum/momentum", "out/w/Momentum/momentum", "out/b/Momentum/momentum"}},
		{"Momentum", 3, []string{"hidden/w/Momentum/momentum", "hidden/b/Momentum/momentum", "out/w/Momentum/momentum", "out/b/Momentum/momentum"}},
		{"Adam", 1, []string{"Adam/iterations", "hidden/w/Adam/m", "hidden/w/Adam/v", "hidden/b/Adam/m", "hidden/b/Adam/v", "out/w/Adam/m", "out/w/Adam/v", "out/b/Adam/m", "out/b/Adam/v"}},
		{"Adam", 2, []string{"Adam/iterations", "hidden/w/Adam/m", "hidden/w/Adam/v", "hidden/b/Adam/m", "hidden/b/Adam/v", "out/w/Adam/m", "out/w/Adam/v", "out/b/Adam/m", "out/b/Adam/v"}},
		{"Adam", 3, []string{"Adam/iterations", "hidden/w/Adam/m", "hidden/w/Adam/v", "hidden/b/Adam/m", "hidden/b/Adam/v", "out/w/Adam/m", "out/w/Adam/v", "out/b/Adam/m", "out/b/Adam/v"}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%d towers", tc.opt, tc.towers), func(t *testing.T) {
			t.Parallel()
			// The reference: 2K steps in this process, in one Estimator,
			// with its own model directory.
			ref, err := newResumeEstimator(t.TempDir(), tc.opt, tc.towers)
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			if err := trainSteps(ref, k); err != nil {
				t.Fatal(err)
			}
			atK := snapshot(t, ref)
			if err := trainSteps(ref, k); err != nil {
				t.Fatal(err)
			}
			at2K := snapshot(t, ref)
			// 2K steps in one call: the same (the second call above went on
			// with the batches where the first stopped).
			one, err := newResumeEstimator(t.TempDir(), tc.opt, tc.towers)
			if err != nil {
				t.Fatal(err)
			}
			defer one.Close()
			if err := trainSteps(one, 2*k); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(at2K, snapshot(t, one), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("K+K steps differ from 2K steps in one call (-K+K +2K):\n%s", diff)
			}
			wantNames := append([]string{model.GlobalStepName, "hidden/w", "hidden/b", "out/w", "out/b"}, tc.wantSlots...)
			if diff := cmp.Diff(slices.Sorted(slices.Values(wantNames)), slices.Sorted(slices.Values(ref.VariableNames()))); diff != "" {
				t.Errorf("variables of the reference run (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(varState{"int64", []int{}, []int64{2 * k}}, at2K[model.GlobalStepName], cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("reference global step (-want +got):\n%s", diff)
			}

			// The first K steps in a child process.
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestResumeHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(),
				resumeDirEnv+"="+dir, resumeOptEnv+"="+tc.opt,
				resumeTowersEnv+"="+strconv.Itoa(tc.towers), resumeStepsEnv+"="+strconv.Itoa(k))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("child process: %v\n%s", err, out)
			}
			r, err := checkpoint.Read(dir)
			if err != nil {
				t.Fatal(err)
			}
			if r.Step() != k {
				t.Errorf("child's checkpoint step %d, want %d", r.Step(), k)
			}
			if diff := cmp.Diff(atK, checkpointState(t, r), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("child's checkpoint differs from K steps in this process (-here +child):\n%s", diff)
			}

			// K more steps in a fresh Estimator on the child's directory.
			est, err := newResumeEstimator(dir, tc.opt, tc.towers)
			if err != nil {
				t.Fatal(err)
			}
			defer est.Close()
			if err := trainSteps(est, k); err != nil {
				t.Fatal(err)
			}
			if got := est.GlobalStep(); got != 2*k {
				t.Errorf("resumed global step %d, want %d", got, 2*k)
			}
			if diff := cmp.Diff(at2K, snapshot(t, est), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("K+K steps across processes differ from 2K steps in one run (-one run +resumed):\n%s", diff)
			}
		})
	}
}

// writeResumeFiles writes two TFRecord files of 13 and 10 records, "x" three
// floats and "y" one, as resumeInput's rows; it returns their paths.
func writeResumeFiles(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	i := 0
	for f, n := range []int{13, 10} {
		path := filepath.Join(dir, fmt.Sprintf("part-%d.tfrecord", f))
		w, err := dataset.CreateRecords(path, dataset.CompressionOf(path))
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			x := make([]float32, 3)
			for j := range x {
				x[j] = float32((5*i+3*j)%7)/4 - 0.75
			}
			y := 0.5*x[0] - 0.25*x[1]*x[2] + 0.1
			if err := w.WriteExample(dataset.Example{"x": {Floats: x}, "y": {Floats: []float32{y}}}); err != nil {
				t.Fatal(err)
			}
			i++
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	return paths
}

// filePipeline reads files shuffled, in batches of 4 (the 23 records make
// 6 a epoch, the last of 3 rows), forever.
func filePipeline(files []string) (estimator.InputFn, error) {
	return dataset.Pipeline{
		Files: files,
		Spec: map[string]dataset.FeatureSpec{
			"x": {Dtype: tensor.Float64, Shape: []int{3}},
			"y": {Dtype: tensor.Float64, Shape: []int{1}, Label: true},
		},
		BatchSize: 4, Epochs: estimator.Forever, ShuffleBuffer: 6, Seed: 5, CycleLength: 2, Workers: 2,
	}.Input()
}

// trainFileSteps trains est for steps more steps on filePipeline.
func trainFileSteps(est *estimator.Estimator, files []string, steps int64) error {
	in, err := filePipeline(files)
	if err != nil {
		return err
	}
	return est.Train(context.Background(), in, estimator.Steps(steps))
}

// Exact resume from files: K steps in a child process and K more in a new
// Estimator on its model directory give the variables of 2K steps in one
// call: the resumed input goes on at the batch where the child stopped,
// in the epoch's shuffled order (2K steps cross an epoch's end).
func TestExactResumeFromFiles(t *testing.T) {
	const k = 5
	files := writeResumeFiles(t)
	tests := []struct {
		opt    string
		towers int
	}{
		{"SGD", 1},
		{"Momentum", 2},
		{"Adam", 3},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%d towers", tc.opt, tc.towers), func(t *testing.T) {
			ref, err := newResumeEstimator(t.TempDir(), tc.opt, tc.towers)
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			if err := trainFileSteps(ref, files, 2*k); err != nil {
				t.Fatal(err)
			}
			want := snapshot(t, ref)

			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestResumeHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(),
				resumeDirEnv+"="+dir, resumeOptEnv+"="+tc.opt, resumeFilesEnv+"="+strings.Join(files, string(filepath.ListSeparator)),
				resumeTowersEnv+"="+strconv.Itoa(tc.towers), resumeStepsEnv+"="+strconv.Itoa(k))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("child process: %v\n%s", err, out)
			}
			est, err := newResumeEstimator(dir, tc.opt, tc.towers)
			if err != nil {
				t.Fatal(err)
			}
			defer est.Close()
			if err := trainFileSteps(est, files, k); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, snapshot(t, est), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("K+K steps across processes differ from 2K steps in one run (-one run +resumed):\n%s", diff)
			}
		})
	}
}
