package mnist_test

import (
	"testing"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/mnist/mnist"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// TestLearnsSyntheticBF16: in bfloat16 mixed precision
// (replicate.Config.Precision; float32 where this build or CPU lacks it)
// the CNN learns the synthetic data set as TestLearnsSynthetic asks of it
// in float32: from chance to above 0.9 accuracy and a quarter of the loss
// in 200 steps of 50 on two towers. A loose learning threshold: the
// accuracy against float32's is measured, not asserted
// (docs/performance.md).
func TestLearnsSyntheticBF16(t *testing.T) {
	trainSet, testSet := mnist.Synthetic(1000, 1), mnist.Synthetic(500, 2)
	net := smallCNN
	est, err := estimator.New(replicate.ModelFn(net.Model, replicate.Config{Devices: towers.CPUs(2), Optimizer: optimizers.Momentum(0.05, 0.9), Precision: towers.BFloat16}),
		estimator.RunConfig{Seed: 1, LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { est.Close() })
	before := evaluate(t, est, net, testSet)
	trainOn(t, est, net, trainSet, 200)
	after := evaluate(t, est, net, testSet)
	t.Logf("before %v, after %v", before, after)
	if after["accuracy"] < 0.9 || after["loss"] > before["loss"]/4 {
		t.Errorf("after 200 steps accuracy %.3f and loss %.3f (%.3f before), want above 0.9 and below a quarter", after["accuracy"], after["loss"], before["loss"])
	}
}
