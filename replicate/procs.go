package replicate

import (
	"github.com/towerflow/towerflow/internal/parallel"
	"github.com/towerflow/towerflow/towers"
)

// HoldProcessors keeps one Go processor more than the cores for a training
// or evaluation run, until release is called, when the engine's CPU towers hold every
// core in cgo kernels (the openblas and dnnl builds): Go's runtime
// otherwise takes the processors of long cgo calls and hands them to other
// threads, which preempt the kernels (docs/performance.md). It raises
// GOMAXPROCS by one while any engine holds it and sets it back after the
// last release; the GOMAXPROCS environment variable, when set, is left to
// stand. Work that the engine spreads over the cores (the default towers
// of towers.LocalDevices, the gradient sums and the update) keeps to the
// cores meanwhile. The estimator's Train and Evaluate call it for their
// runs; a caller driving TrainStep itself may. Predict does not: serving
// predicts a request at a time, and each raise and restore stops the
// world.
func (e *Engine) HoldProcessors() (release func()) {
	cpus := 0
	for _, d := range e.cfg.Devices {
		if d.Kind == towers.CPUKind {
			cpus++
		}
	}
	return parallel.HoldSpareProcessor(e.log, cpus, parallel.ForeignKernels)
}
