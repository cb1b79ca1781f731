package estimator_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/replicate"
)

// writeMLPFiles writes mlpModel's regression task as TFRecord files, file
// f holding counts[f] records.
func writeMLPFiles(t *testing.T, counts []int) []string {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	var files []string
	for f, n := range counts {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("part-%d.tfrecord", f))
		w, err := dataset.CreateRecords(path, "")
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			x := []float32{float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64())}
			y := x[0] - 2*x[1] + 0.5*x[2]*x[3]
			if err := w.WriteExample(dataset.Example{"x": {Floats: x}, "y": {Floats: []float32{y}}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
	}
	return files
}

// sharedFilesResult is what one process ends a run with.
type sharedFilesResult struct {
	Step    int64
	Weights map[string][]float64
	Err     error
}

// trainSharedFiles trains mlpModel on files shared by file between two
// processes, each Train call of a fresh Estimator (as a restarted job
// makes) for steps[i] more steps (0: until the input ends), and returns
// each process's end.
func trainSharedFiles(files []string, dirs []string, steps ...int64) []sharedFilesResult {
	out := make([]sharedFilesResult, 2)
	for _, n := range steps {
		comms := collective.Local(2)
		var wg sync.WaitGroup
		for r := range 2 {
			wg.Go(func() {
				defer comms[r].Close()
				out[r] = trainSharedFilesRank(comms[r], files, dirs[r], n)
			})
		}
		wg.Wait()
		for _, res := range out {
			if res.Err != nil {
				return out
			}
		}
	}
	return out
}

func trainSharedFilesRank(comm collective.Comm, files []string, dir string, steps int64) sharedFilesResult {
	cfg := replicate.Config{Devices: cpuDevices(1), Optimizer: acrossOptimizer("adam"), Processes: comm}
	est, err := estimator.New(replicate.ModelFn(mlpModel(tensor.Float64, false), cfg), estimator.RunConfig{Seed: uint64(comm.Rank() + 1), LogEvery: -1, ModelDir: dir})
	if err != nil {
		return sharedFilesResult{Err: err}
	}
	defer est.Close()
	in, err := dataset.Pipeline{
		Files: files,
		Spec: map[string]dataset.FeatureSpec{
			"x": {Dtype: tensor.Float64, Shape: []int{4}},
			"y": {Dtype: tensor.Float64, Shape: []int{1}, Label: true},
		},
		BatchSize: 4, Epochs: 3, ShuffleBuffer: 5, Seed: 2, CycleLength: 2,
		Processes: comm.Size(), Rank: comm.Rank(), Sharing: dataset.ShareFiles,
	}.Input()
	if err != nil {
		return sharedFilesResult{Err: err}
	}
	var opts []estimator.TrainOption
	if steps > 0 {
		opts = append(opts, estimator.Steps(steps))
	}
	if err := est.Train(context.Background(), in, opts...); err != nil {
		return sharedFilesResult{Err: fmt.Errorf("rank %d: %w", comm.Rank(), err)}
	}
	res := sharedFilesResult{Step: est.GlobalStep(), Weights: map[string][]float64{}}
	for _, v := range est.Store().Variables() {
		if d, ok := v.Data().([]float64); ok {
			res.Weights[v.Name()] = d
		}
	}
	return res
}

// TestProcessesShareFiles: two processes sharing files of unequal record
// counts by file take the same steps every epoch, end their input
// together, and a job stopped and restarted from its checkpoint ends with
// the variables of an uninterrupted one.
func TestProcessesShareFiles(t *testing.T) {
	// Shares of 14 and 13 records, batches of 2 each: 7 steps an epoch.
	files := writeMLPFiles(t, []int{9, 4, 6, 1, 7})
	const wantSteps = 3 * 7
	straight := trainSharedFiles(files, []string{t.TempDir(), t.TempDir()}, 0)
	resumed := trainSharedFiles(files, []string{t.TempDir(), t.TempDir()}, 8, 0)
	for r := range 2 {
		for _, res := range []sharedFilesResult{straight[r], resumed[r]} {
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if res.Step != wantSteps {
				t.Errorf("rank %d ended at step %d, want %d", r, res.Step, wantSteps)
			}
		}
		if d := cmp.Diff(straight[r].Weights, resumed[r].Weights); d != "" {
			t.Errorf("rank %d: restarted at step 8, the variables differ from an uninterrupted run (-want +got):\n%s", r, d)
		}
	}
}
