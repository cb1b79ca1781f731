package cifar_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/towerflow/towerflow/internal/vartest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/cifar10/cifar"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// colourData is a small learnable set: images of side pixels whose class
// (of 10) sets a bright channel and the position of a bright square, over
// noise.
func colourData(rows, side int, seed uint64) (map[string]*tensor.Dense, map[string]*tensor.Dense) {
	r := rand.New(rand.NewPCG(seed, 3))
	xs, ys := make([]float32, rows*3*side*side), make([]int64, rows)
	for i := range rows {
		c := r.IntN(cifar.Classes)
		ys[i] = int64(c)
		img := xs[i*3*side*side : (i+1)*3*side*side]
		for j := range img {
			img[j] = float32(r.NormFloat64() * 0.3)
		}
		ch, quad := c%3, c/3
		for y := range side / 2 {
			for x := range side / 2 {
				oy, ox := (quad%2)*side/2, (quad/2)*side/2
				img[ch*side*side+(oy+y)*side+ox+x] += 1.5
			}
		}
	}
	return map[string]*tensor.Dense{cifar.ImageKey: numeric.Over(tensor.Shape{rows, 3, side, side}, xs)},
		map[string]*tensor.Dense{cifar.LabelKey: numeric.Over(tensor.Shape{rows}, ys)}
}

func newEstimator(t *testing.T, format layers.Format, depth, nTowers int, dir string) *estimator.Estimator {
	t.Helper()
	net := cifar.ResNet{Depth: depth, Format: format}
	// The rate drops tenfold after step 3: the resume test crosses it.
	mdl := replicate.ModelFn(net.Model, replicate.Config{Devices: towers.CPUs(nTowers), Optimizer: cifar.Optimizer(0.05, 3, 1000)})
	est, err := estimator.New(mdl, estimator.RunConfig{Seed: 11, LogEvery: -1, ModelDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { est.Close() })
	return est
}

func train(t *testing.T, est *estimator.Estimator, feats, labels map[string]*tensor.Dense, batch int, steps int64) {
	t.Helper()
	in, err := estimator.FromTensors(feats, labels, estimator.TensorInput{BatchSize: batch, Epochs: estimator.Forever})
	if err != nil {
		t.Fatal(err)
	}
	if err := est.Train(context.Background(), in, estimator.Steps(steps)); err != nil {
		t.Fatal(err)
	}
}

// evaluate returns est's metrics on the examples, batch at a time.
func evaluate(t *testing.T, est *estimator.Estimator, feats, labels map[string]*tensor.Dense, batch int) map[string]float64 {
	t.Helper()
	in, err := estimator.FromTensors(feats, labels, estimator.TensorInput{BatchSize: batch})
	if err != nil {
		t.Fatal(err)
	}
	m, err := est.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestResNetParameters: ResNet-N has the trainable parameters of He et
// al.'s CIFAR network with projection shortcuts, as counted by PyTorch for
// bench/torch_resnet.py's identical network (kernels, batch norm γ and β,
// the dense layer); and a depth that is not 6n + 2 is an error.
func TestResNetParameters(t *testing.T) {
	tests := []struct {
		depth int
		want  int
	}{{8, 78042}, {20, 272474}, {32, 466906}, {56, 855770}}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.depth), func(t *testing.T) {
			feats, labels := colourData(2, 32, 1)
			net := cifar.ResNet{Depth: tc.depth}
			e, err := replicate.NewEngine(replicate.ModelFn(net.Model, replicate.Config{Devices: towers.CPUs(1), Optimizer: cifar.Optimizer(0.1)}), replicate.EngineConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if err := e.Build(model.Train, sharding.Batch{Features: feats, Labels: labels}); err != nil {
				t.Fatal(err)
			}
			got := 0
			for _, name := range e.Store().Names() {
				v, err := e.Store().Lookup(name)
				if err != nil {
					t.Fatal(err)
				}
				if v.Trainable() {
					got += v.Size()
				}
			}
			if got != tc.want {
				t.Errorf("ResNet-%d has %d trainable parameters, want %d", tc.depth, got, tc.want)
			}
			// A block's variables are created in the order of its ops (a
			// store's flat layout and checkpoint manifest follow it): a
			// projection shortcut's after the second normalization's.
			names, shortcuts := e.Store().Names(), 0
			for i, name := range names {
				block, ok := strings.CutSuffix(name, "/shortcut/kernel")
				if !ok {
					continue
				}
				shortcuts++
				if want := block + "/conv2/bn/moving_variance"; i == 0 || names[i-1] != want {
					t.Errorf("%s follows %q, want %q", name, names[max(i-1, 0)], want)
				}
			}
			if shortcuts != 2 {
				t.Errorf("%d projection shortcuts, want 2 in %q", shortcuts, names)
			}
		})
	}
	if _, err := (cifar.ResNet{Depth: 21}).Blocks(); err == nil {
		t.Error("depth 21: no error")
	}
}

// TestResNetTowersEqualOneDevice: a ResNet (batch norm synchronized over
// the towers, momentum, weight decay) trains on N towers, uneven shards
// included, as on one device, to float32's precision; and so in either
// order of its activations, NCHW or NHWC.
func TestResNetTowersEqualOneDevice(t *testing.T) {
	feats, labels := colourData(10, 8, 2)
	one := newEstimator(t, layers.NCHW, 8, 1, "")
	train(t, one, feats, labels, 10, 3)
	want := vartest.Variables(t, one)
	for _, tc := range []struct {
		format layers.Format
		towers int
	}{{layers.NCHW, 2}, {layers.NCHW, 3}, {layers.NHWC, 1}, {layers.NHWC, 2}, {layers.NHWC, 3}} {
		t.Run(fmt.Sprintf("%v/towers%d", tc.format, tc.towers), func(t *testing.T) {
			est := newEstimator(t, tc.format, 8, tc.towers, "")
			train(t, est, feats, labels, 10, 3)
			if diff := cmp.Diff(want, vartest.Variables(t, est), cmpopts.EquateApprox(1e-4, 1e-5)); diff != "" {
				t.Errorf("%v on %d towers differs from NCHW on one device (-one +towers):\n%s", tc.format, tc.towers, diff)
			}
		})
	}
}

// TestResNetResumesExactly: K steps, a checkpoint, a new estimator on the
// model directory and K more give, bit for bit, what 2K steps in one run
// give: weights, batch norm's moving statistics, momentum slots, global
// step.
func TestResNetResumesExactly(t *testing.T) {
	const k = 2
	feats, labels := colourData(6, 8, 3)
	ref := newEstimator(t, layers.NCHW, 8, 2, t.TempDir())
	train(t, ref, feats, labels, 6, 2*k)
	dir := t.TempDir()
	first := newEstimator(t, layers.NCHW, 8, 2, dir)
	train(t, first, feats, labels, 6, k)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := newEstimator(t, layers.NCHW, 8, 2, dir)
	train(t, second, feats, labels, 6, k)
	want, got := vartest.Variables(t, ref), vartest.Variables(t, second)
	if got[model.GlobalStepName][0] != 2*k {
		t.Errorf("global step %v, want %d", got[model.GlobalStepName], 2*k)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resumed run differs from an uninterrupted one (-uninterrupted +resumed):\n%s", diff)
	}
}

// TestResNetCheckpointAcrossFormats: a checkpoint written by the network
// in one order restores into the network in the other, which then
// evaluates as the first does (the variables are the same in both orders:
// convolution kernels, batch norm's, the dense layer after the global
// pooling).
func TestResNetCheckpointAcrossFormats(t *testing.T) {
	feats, labels := colourData(12, 8, 6)
	for _, tc := range []struct{ from, to layers.Format }{{layers.NCHW, layers.NHWC}, {layers.NHWC, layers.NCHW}} {
		t.Run(fmt.Sprintf("%v to %v", tc.from, tc.to), func(t *testing.T) {
			dir := t.TempDir()
			first := newEstimator(t, tc.from, 8, 1, dir)
			train(t, first, feats, labels, 6, 3)
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			want := evaluate(t, newEstimator(t, tc.from, 8, 1, dir), feats, labels, 12)
			got := evaluate(t, newEstimator(t, tc.to, 8, 1, dir), feats, labels, 12)
			if want["global_step"] != 3 {
				t.Errorf("evaluated at step %v, want the checkpoint's 3", want["global_step"])
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateApprox(1e-5, 1e-6)); diff != "" {
				t.Errorf("%v restored into %v evaluates otherwise (-%v +%v):\n%s", tc.from, tc.to, tc.from, tc.to, diff)
			}
		})
	}
}
