package estimator

import (
	"context"
	"errors"
	"fmt"

	"github.com/towerflow/towerflow/replicate"
)

// Training across processes (replicate.Config.Processes): every process
// runs the same Estimator calls on its own part of the data. Train and
// Evaluate start by taking rank 0's variables; a Train step all-reduces
// gradients (or, with averaging, the weights every few steps); Evaluate
// all-reduces the metric states, so every process returns the metrics of
// the whole evaluation; Predict stays in its process. Every process must
// build the model rank 0 builds (replicate.Config.Processes says what is
// compared): Train and Evaluate stop on every process with a
// replicate.ModelMismatchError naming the first difference otherwise —
// Train before its first step, Evaluate before it sums the metrics.
// Rank 0 alone reads and writes the model directory and exports. A
// process that fails or stops tells the others at their next collective,
// and they stop too: with an error naming it when it failed, cleanly when
// it stopped (its input ended first). One that is stopped or hangs, or
// whose network goes silent, makes the others stop with a
// replicate.PeerError once replicate.Config.PeerTimeout has passed in a
// collective.

// peerStopped reports whether err is another process stopping cleanly.
func peerStopped(err error) bool {
	pe, ok := errors.AsType[*replicate.PeerError](err)
	return ok && !pe.Failed
}

// peerEnd turns another process's clean stop into a clean end of this
// run; any other error stays.
func (e *Estimator) peerEnd(err error) error {
	if peerStopped(err) {
		e.log.Info("another process stopped; stopping with it", "cause", err)
		return nil
	}
	return err
}

// leave ends a run across processes (see replicate.Engine.Leave): the
// others learn that this one stopped, or failed with err.
func (e *Estimator) leave(ctx context.Context, what string, err error) error {
	if lerr := e.eng.Leave(ctx, err); lerr != nil && err == nil {
		return fmt.Errorf("%s: tell the other processes: %w", what, lerr)
	}
	return err
}

// Rank returns the Estimator's process among those it trains with, and
// their number: 0 and 1 alone.
func (e *Estimator) Rank() (rank, processes int) { return e.rank, e.procs }
