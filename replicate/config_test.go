package replicate_test

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// linearWB trains the linear example's model as a new user would, with
// SGD 0.5 and no reduction named, for 20 steps of 99 rows (uneven shards),
// and returns w and b.
func linearWB(t *testing.T, cfg replicate.Config) [2]float64 {
	t.Helper()
	cfg.Optimizer = optimizers.SGD(0.5)
	est, err := estimator.New(replicate.ModelFn(linreg.Model, cfg), estimator.RunConfig{Seed: 1, LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	features, labels := linreg.Data(990, 1)
	in, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 99, Epochs: estimator.Forever, Shuffle: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := est.Train(context.Background(), in, estimator.Steps(20)); err != nil {
		t.Fatal(err)
	}
	var out [2]float64
	for i, name := range []string{"w", "b"} {
		v, err := est.VariableValue(name)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = v.Data().(float64)
	}
	return out
}

// TestDefaultReductionDoesNotDependOnTheMachine: with the zero Config's
// reduction, the linear model trains to the same w and b on 1, 2 and 4 CPU
// towers (what one tower per core gives on a 1-, 2- or 4-core machine).
// SUM, TensorFlow's default, does not: its steps grow with the towers.
func TestDefaultReductionDoesNotDependOnTheMachine(t *testing.T) {
	one := linearWB(t, replicate.Config{Devices: towers.CPUs(1)})
	for _, tc := range []struct {
		name string
		cfg  replicate.Config
		same bool
	}{
		{"default, 2 towers", replicate.Config{Devices: towers.CPUs(2)}, true},
		{"default, 4 towers", replicate.Config{Devices: towers.CPUs(4)}, true},
		{"BATCH_MEAN named, 4 towers", replicate.Config{Devices: towers.CPUs(4), Reduction: replicate.BatchMean}, true},
		{"SUM, 2 towers", replicate.Config{Devices: towers.CPUs(2), Reduction: replicate.Sum}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := linearWB(t, tc.cfg)
			diff := cmp.Diff(one, got, cmpopts.EquateApprox(0, 1e-9))
			if tc.same && diff != "" {
				t.Errorf("w, b differ from one tower's (-1 tower +%s):\n%s", tc.name, diff)
			}
			if !tc.same && diff == "" {
				t.Errorf("w, b = %v, the same as one tower's: the test cannot tell reductions apart", got)
			}
		})
	}
}

// TestDeviceErrors: devices that cannot be honoured are errors naming the
// device and why, when the Estimator is made.
func TestDeviceErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		devices []towers.Device
		want    []string
	}{
		{"a GPU in a build without a GPU backend", []towers.Device{towers.GPU(0)}, []string{"/device:GPU:0", "no GPU backend"}},
		{"a GPU among CPUs", []towers.Device{towers.CPU(0), towers.GPU(1)}, []string{"/device:GPU:1", "no GPU backend"}},
		{"no devices", []towers.Device{}, []string{"no devices"}},
		{"a device twice", []towers.Device{towers.CPU(1), towers.CPU(1)}, []string{"/device:CPU:1", "twice"}},
		{"a negative index", []towers.Device{{Kind: towers.CPUKind, Index: -1}}, []string{"negative index"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := estimator.New(replicate.ModelFn(linreg.Model, replicate.Config{Devices: tc.devices}), estimator.RunConfig{})
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}

// TestMoreCPUTowersThanCores: more CPU towers than cores train (tests
// use it), and the engine says so once through the caller's logger, not
// once per step or build.
func TestMoreCPUTowersThanCores(t *testing.T) {
	cores := runtime.GOMAXPROCS(0)
	for _, tc := range []struct {
		name   string
		towers int
		logged int
	}{
		{"one per core", cores, 0},
		{"one more than cores", cores + 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			est, err := estimator.New(replicate.ModelFn(linreg.Model, replicate.Config{Devices: towers.CPUs(tc.towers), Optimizer: optimizers.SGD(0.5)}),
				estimator.RunConfig{LogEvery: -1, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer est.Close()
			features, labels := linreg.Data(2*tc.towers+1, 1)
			for _, rows := range []int{tc.towers, tc.towers + 1} { // two input signatures, two builds
				in, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: rows})
				if err != nil {
					t.Fatal(err)
				}
				if err := est.Train(context.Background(), in, estimator.Steps(2)); err != nil {
					t.Fatal(err)
				}
			}
			if got := strings.Count(buf.String(), "more CPU towers than cores"); got != tc.logged {
				t.Errorf("logged %d times, want %d:\n%s", got, tc.logged, buf.String())
			}
		})
	}
}
