package mnist_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/mnist/mnist"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// smallCNN is a CNN small enough for tests.
var smallCNN = mnist.CNN{Filters: [2]int{4, 8}, Hidden: 32}

// newEstimator returns an Estimator of net on n towers with momentum.
func newEstimator(t *testing.T, net mnist.Net, n int) *estimator.Estimator {
	t.Helper()
	m := replicate.ModelFn(net.Model, replicate.Config{Devices: towers.CPUs(n), Optimizer: optimizers.Momentum(0.05, 0.9)})
	est, err := estimator.New(m, estimator.RunConfig{Seed: 1, LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { est.Close() })
	return est
}

// trainOn trains est for steps batches of 50 from s, shuffled with seed 1.
func trainOn(t *testing.T, est *estimator.Estimator, net mnist.Net, s *mnist.Set, steps int64) {
	t.Helper()
	in, err := estimator.FromTensors(s.Features(net.Layout()), s.LabelTensors(), estimator.TensorInput{BatchSize: 50, Epochs: estimator.Forever, Shuffle: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := est.Train(context.Background(), in, estimator.Steps(steps)); err != nil {
		t.Fatal(err)
	}
}

func evaluate(t *testing.T, est *estimator.Estimator, net mnist.Net, s *mnist.Set) map[string]float64 {
	t.Helper()
	in, err := estimator.FromTensors(s.Features(net.Layout()), s.LabelTensors(), estimator.TensorInput{BatchSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	scores, err := est.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return scores
}

// TestLearnsSynthetic: a short run on the synthetic data set (1000
// examples, 200 steps of 50 on two towers) takes the accuracy on a test set
// of other examples from chance to well above it, and the loss down.
func TestLearnsSynthetic(t *testing.T) {
	trainSet, testSet := mnist.Synthetic(1000, 1), mnist.Synthetic(500, 2)
	for _, tc := range []struct {
		name string
		net  mnist.Net
	}{{"mlp", mnist.MLP{}}, {"cnn", smallCNN}} {
		t.Run(tc.name, func(t *testing.T) {
			est := newEstimator(t, tc.net, 2)
			before := evaluate(t, est, tc.net, testSet)
			trainOn(t, est, tc.net, trainSet, 200)
			after := evaluate(t, est, tc.net, testSet)
			t.Logf("before %v, after %v", before, after)
			if before["accuracy"] > 0.3 {
				t.Errorf("accuracy %.3f before training, want about chance (0.1)", before["accuracy"])
			}
			if after["accuracy"] < 0.9 || after["loss"] > before["loss"]/4 {
				t.Errorf("after 200 steps accuracy %.3f and loss %.3f (%.3f before), want above 0.9 and below a quarter", after["accuracy"], after["loss"], before["loss"])
			}
		})
	}
}

// TestTowersTrainAlike: with the batch-weighted loss, 3 towers train the
// model as one device does (to float32 rounding).
func TestTowersTrainAlike(t *testing.T) {
	trainSet := mnist.Synthetic(300, 1)
	for _, tc := range []struct {
		name string
		net  mnist.Net
	}{{"mlp", mnist.MLP{Hidden: 16}}, {"cnn", smallCNN}} {
		t.Run(tc.name, func(t *testing.T) {
			var vars [2]map[string][]float32
			for i, n := range []int{1, 3} {
				est := newEstimator(t, tc.net, n)
				trainOn(t, est, tc.net, trainSet, 5)
				vars[i] = map[string][]float32{}
				for _, name := range []string{"logits/kernel", "logits/bias"} {
					v, err := est.VariableValue(name)
					if err != nil {
						t.Fatal(err)
					}
					vars[i][name] = v.Data().([]float32)
				}
			}
			if diff := cmp.Diff(vars[0], vars[1], cmpopts.EquateApprox(0, 1e-5)); diff != "" {
				t.Errorf("3 towers differ from one (-one +three):\n%s", diff)
			}
		})
	}
}

// TestPredictions: the classes are the most probable digits, each row of
// probabilities sums to 1, and classify's outputs are the class and its
// probability.
func TestPredictions(t *testing.T) {
	net := mnist.MLP{Hidden: 32}
	est := newEstimator(t, net, 2)
	trainOn(t, est, net, mnist.Synthetic(500, 1), 50)
	s := mnist.Synthetic(7, 9)
	in, err := estimator.FromTensors(s.Features(net.Layout()), nil, estimator.TensorInput{BatchSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for out, err := range est.PredictBatches(context.Background(), in) {
		if err != nil {
			t.Fatal(err)
		}
		probs := out.Predictions["probabilities"]
		classes := out.Predictions["classes"].Data().([]int64)
		n := len(classes)
		if diff := cmp.Diff([][]int{{n, mnist.Classes}, {n}}, [][]int{probs.Shape(), out.Predictions["classes"].Shape()}); diff != "" {
			t.Fatalf("shapes of probabilities and classes (-want +got):\n%s", diff)
		}
		p := probs.Data().([]float32)
		wantClasses, wantTop, sums, ones := make([]int64, n), make([]float32, n), make([]float64, n), make([]float64, n)
		for i := range n {
			ones[i] = 1
			row := p[i*mnist.Classes : (i+1)*mnist.Classes]
			for j, v := range row {
				sums[i] += float64(v)
				if v > row[wantClasses[i]] {
					wantClasses[i] = int64(j)
				}
			}
			wantTop[i] = row[wantClasses[i]]
		}
		if diff := cmp.Diff(wantClasses, classes); diff != "" {
			t.Errorf("classes are not the most probable (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(ones, sums, cmpopts.EquateApprox(0, 1e-5)); diff != "" {
			t.Errorf("rows of probabilities do not sum to 1:\n%s", diff)
		}
		classify := out.ExportOutputs[model.DefaultServingSignature]
		if diff := cmp.Diff(map[string]any{"classes": classes, "scores": wantTop}, map[string]any{"classes": classify["classes"].Data(), "scores": classify["scores"].Data()}); diff != "" {
			t.Errorf("classify outputs (-want +got):\n%s", diff)
		}
		predict := out.ExportOutputs[mnist.PredictSignature]
		if diff := cmp.Diff(map[string]any{"classes": classes, "probabilities": p}, map[string]any{"classes": predict["classes"].Data(), "probabilities": predict["probabilities"].Data()}); diff != "" {
			t.Errorf("predict outputs (-want +got):\n%s", diff)
		}
		rows += n
	}
	if rows != 7 {
		t.Errorf("%d predictions, want 7", rows)
	}
}

func TestModelErrors(t *testing.T) {
	s := mnist.Synthetic(4, 1)
	flat, nchw, labels := s.Features(mnist.Flat), s.Features(mnist.NCHW), s.LabelTensors()
	f64 := map[string]*tensor.Dense{mnist.ImageKey: tensor.New(tensor.WithShape(4, 784), tensor.WithBacking(make([]float64, 4*784)))}
	tiny := map[string]*tensor.Dense{mnist.ImageKey: tensor.New(tensor.WithShape(4, 1, 3, 8), tensor.WithBacking(make([]float32, 4*24)))}
	other := map[string]*tensor.Dense{"x": labels[mnist.LabelKey]}
	tests := []struct {
		name           string
		net            mnist.Net
		features, labs map[string]*tensor.Dense
		want           []string
	}{
		{"no image", mnist.MLP{}, other, labels, []string{`feature "image" is not in the batch`}},
		{"no label", mnist.MLP{}, flat, other, []string{`label "label" is not in the batch`}},
		{"NCHW images to the MLP", mnist.MLP{}, nchw, labels, []string{`MLP: feature "image" is float32 of shape (4, 1, 28, 28), want float32 images in the flat layout (2 dimensions)`}},
		{"flat images to the CNN", smallCNN, flat, labels, []string{`CNN: feature "image" is float32 of shape (4, 784), want float32 images in the NCHW layout (4 dimensions)`}},
		{"float64 images", mnist.MLP{}, f64, labels, []string{`MLP: feature "image" is float64`}},
		{"tiny images", smallCNN, tiny, labels, []string{"CNN: images of shape (4, 1, 3, 8), want (N, 1, H, W) with H and W at least 4"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est := newEstimator(t, tc.net, 1)
			in, err := estimator.FromTensors(tc.features, tc.labs, estimator.TensorInput{BatchSize: 4})
			if err != nil {
				t.Fatal(err)
			}
			err = est.Train(context.Background(), in, estimator.Steps(1))
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}

func TestLayouts(t *testing.T) {
	if (mnist.MLP{}).Layout() != mnist.Flat || (mnist.CNN{}).Layout() != mnist.NCHW {
		t.Error("MLP takes flat images and CNN NCHW ones")
	}
}

// TestParams: Params counts the elements of the variables the model
// function makes.
func TestParams(t *testing.T) {
	for _, net := range []mnist.Net{mnist.MLP{Hidden: 16}, smallCNN, mnist.CNN{Filters: [2]int{3, 5}}} {
		est := newEstimator(t, net, 1)
		s := mnist.Synthetic(4, 1)
		in, err := estimator.FromTensors(s.Features(net.Layout()), s.LabelTensors(), estimator.TensorInput{BatchSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		if err := est.Train(context.Background(), in, estimator.Steps(1)); err != nil {
			t.Fatal(err)
		}
		var got float64
		for _, name := range est.VariableNames() {
			if !strings.HasSuffix(name, "/kernel") && !strings.HasSuffix(name, "/bias") {
				continue // the global step, the optimizer's slots
			}
			v, err := est.VariableValue(name)
			if err != nil {
				t.Fatal(err)
			}
			got += float64(v.Shape().TotalSize())
		}
		if want := net.Params(28, 28); got != want {
			t.Errorf("%T%+v: the variables have %v elements, Params says %v", net, net, got, want)
		}
	}
}
