package weightavg_test

import (
	"fmt"
	"testing"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/examples/mnist/mnist"
	"github.com/towerflow/towerflow/examples/weightavg/weightavg"
)

// BenchmarkComputeSteps: two workers of the MNIST MLP (784-128-10, batch
// 50 each) averaging every K steps; an op is a round of K steps, and
// ms/step is each worker's time per local step, the average's share
// included (the driver evaluates once, at the end).
func BenchmarkComputeSteps(b *testing.B) {
	task, err := weightavg.MNIST(mnist.MLP{}, mnist.Synthetic(5000, 1), mnist.Synthetic(500, 2), weightavg.TaskConfig{Batch: 50, Towers: 1})
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range []int64{1, 10, 100} {
		b.Run(fmt.Sprint("K=", k), func(b *testing.B) {
			cfg := weightavg.Config{ComputeSteps: k, Rounds: b.N, EvalEvery: 1 << 62, Seed: 1}
			rep, err := weightavg.Run(b.Context(), task, cfg, collective.Local(2))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(1000/rep.StepsPerSec(), "ms/step")
		})
	}
}
