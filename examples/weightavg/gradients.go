package main

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/examples/weightavg/weightavg"
	"github.com/towerflow/towerflow/runner"
)

// fillGradients puts the gradient mode's defaults — the Ray page's
// program — into the flags left 0 and refuses the weight mode's own.
func (o *options) fillGradients() error {
	if o.data != "" || o.ModelDir != "" || o.net != defaults.net || o.computeSteps != defaults.computeSteps || o.optimizer != defaults.optimizer {
		return fmt.Errorf("-mode gradients trains the linear model with SGD on its own data: -data, -model_dir, -model, -compute_steps and -optimizer belong to -mode weights")
	}
	var c runner.Check
	c.Add(o.Check())
	c.Int("workers", int64(o.workers), 0, maxWorkers)
	c.Int("steps", o.steps, 0, runner.NoLimit)
	c.Int("batch", int64(o.batch), 0, runner.NoLimit)
	c.Float("lr", o.lr, 0, math.Inf(1))
	c.Int("eval_every", o.evalEvery, 0, runner.NoLimit)
	return c.Err()
}

// trainGradients runs the gradient mode on the workers of comms, printing
// on out (when this process runs the driver), and returns the driver's
// report (nil in the other processes).
func trainGradients(ctx context.Context, o options, comms []collective.Comm, out io.Writer) (*weightavg.GradientReport, error) {
	return weightavg.RunGradients(ctx, weightavg.GradientConfig{
		Iterations: int(o.steps), Batch: o.batch, LR: o.lr, PrintEvery: int(o.evalEvery),
		Towers: o.Towers, Seed: o.seed, Out: out,
	}, comms)
}
