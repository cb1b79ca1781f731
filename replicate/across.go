package replicate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/model"
)

// Training across processes. Every process runs the same collectives in
// the same order; a process that fails, or stops, must still tell the
// others, or they would wait for it for ever. So every collective phase
// starts with a small all-reduce, the header, in which each rank reports
// its status (and what the phase needs: rows, towers, loss); a rank that
// failed or stopped joins the others' next header with that status
// (Engine.Leave) and every rank then stops, with an error naming it.
// After a header in which every rank is well, the phase's payload
// (gradient buckets, a broadcast, metric states) runs unconditionally.

// PeerError is returned on every process when one process of the group
// failed or stopped, or when the others waited for one longer than
// Config.PeerTimeout: the run cannot go on without it.
type PeerError struct {
	// Rank is the process that stopped (the lowest, when several did); -1
	// after a timeout, which does not say which process kept the others
	// waiting.
	Rank int
	// Failed: it failed (its own error is in its own log and return
	// value), or a timeout passed; otherwise it stopped cleanly — its
	// input ended or it reached its step limit — and the others stop with
	// it.
	Failed bool
	// Timeout, when not zero, is the Config.PeerTimeout that passed while
	// this process waited in a collective for the others: one of them
	// stopped or hung, or the network went silent. The group is then
	// broken (an MPI collective cannot be taken back): the process should
	// exit.
	Timeout time.Duration

	err error // the collective's own error, after a timeout
}

func (e *PeerError) Error() string {
	switch {
	case e.Timeout != 0:
		return fmt.Sprintf("a process did not take part in a collective for %v (it stopped or hangs, or the network went silent), so every process stops (replicate.Config.PeerTimeout): %v", e.Timeout, e.err)
	case e.Failed:
		return fmt.Sprintf("process rank %d failed, so every process stops (rank %d's own error says why)", e.Rank, e.Rank)
	}
	return fmt.Sprintf("process rank %d stopped (its input ended or it reached its step limit), so every process stops", e.Rank)
}

// Unwrap returns the collective's error after a timeout (which wraps
// context.DeadlineExceeded), else nil.
func (e *PeerError) Unwrap() error { return e.err }

// A rank's status in a header.
const (
	statusOK = iota
	statusStopped
	statusFailed
)

// The header's fixed fields; then one status per rank, one auxiliary
// number per rank, and one hash per rank of its build (ranks.go).
const (
	hRows = iota
	hTowers
	hLossRows
	hLossTowers
	hLoss
	hFixed
)

// bound is the context of a collective phase: ctx's values without its
// cancellation, and a deadline Config.PeerTimeout away (none when it is
// negative). A phase is never left half way because the caller's context
// is cancelled — the other ranks would wait in it for ever, and an MPI
// collective cannot be taken back — so a cancelled run stops at its next
// step, after telling the others (Leave). Only a rank that waits longer
// than the timeout gives up, breaking the group (see broke).
func (x *across) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if x.timeout <= 0 {
		return context.WithCancel(context.WithoutCancel(ctx))
	}
	return context.WithTimeout(context.WithoutCancel(ctx), x.timeout)
}

// broke is the error of a failed collective, which broke the group: nobody
// waits for this rank any more. A collective cut short by the phase's
// deadline (see bound) becomes a PeerError with the timeout.
func (x *across) broke(err error) error {
	x.open = false
	if x.timeout > 0 && errors.Is(err, context.DeadlineExceeded) {
		return &PeerError{Rank: -1, Failed: true, Timeout: x.timeout, err: err}
	}
	return err
}

// across is an engine's side of training across processes.
type across struct {
	comm   collective.Comm
	avg    Averaging
	fusion collective.Fusion
	header []float64
	segs   []collective.Segment
	// timeout bounds a phase of collectives (Config.PeerTimeout); 0: none.
	timeout time.Duration
	// built is the description of the latest build of each mode.
	built map[model.Mode]*description
	// open: a run is under way in which the other ranks expect this one
	// at their next header; Leave closes it.
	open bool
}

// header is what a phase's header sums over the ranks.
type header struct {
	rows, towers, lossRows, lossTowers, loss float64
}

func newAcross(cfg Config) *across {
	if cfg.Processes == nil || cfg.Processes.Size() < 2 {
		return nil
	}
	n := cfg.Processes.Size()
	return &across{comm: cfg.Processes, avg: cfg.Averaging, fusion: collective.Fusion{BucketBytes: cfg.BucketBytes}, header: make([]float64, hFixed+3*n), timeout: cfg.peerTimeout(), built: map[model.Mode]*description{}}
}

// exchange runs a header: this rank reports its status, its part h, an
// auxiliary number and the hash of its build of mode (d, nil: none); it
// returns the sums, or a PeerError when a rank failed or stopped, or a
// ModelMismatchError when ranks built differently, and the auxiliary
// numbers by rank.
func (x *across) exchange(ctx context.Context, status int, h header, aux float64, mode model.Mode, d *description) (header, []float64, error) {
	n := x.comm.Size()
	buf := x.header
	clear(buf)
	buf[hRows], buf[hTowers], buf[hLossRows], buf[hLossTowers], buf[hLoss] = h.rows, h.towers, h.lossRows, h.lossTowers, h.loss
	buf[hFixed+x.comm.Rank()] = float64(status)
	buf[hFixed+n+x.comm.Rank()] = aux
	if d != nil {
		buf[hFixed+2*n+x.comm.Rank()] = d.hash
	}
	if err := x.comm.AllReduceFloat64(ctx, buf); err != nil {
		err = x.broke(err)
		if _, ok := errors.AsType[*PeerError](err); ok {
			return header{}, nil, err
		}
		return header{}, nil, fmt.Errorf("across processes: %w", err)
	}
	g := header{buf[hRows], buf[hTowers], buf[hLossRows], buf[hLossTowers], buf[hLoss]}
	stopped := -1
	for r := range n {
		switch int(buf[hFixed+r]) {
		case statusFailed:
			x.open = false
			return g, nil, &PeerError{Rank: r, Failed: true}
		case statusStopped:
			if stopped < 0 {
				stopped = r
			}
		}
	}
	if stopped >= 0 {
		x.open = false
		return g, nil, &PeerError{Rank: stopped}
	}
	if err := x.sameBuild(ctx, buf[hFixed+2*n:], mode, d); err != nil {
		return g, nil, err
	}
	return g, buf[hFixed+n : hFixed+2*n], nil
}

// Processes returns the number of processes the engine trains with (1
// without Config.Processes) and this one's rank among them.
func (e *Engine) Processes() (size, rank int) {
	if e.x == nil {
		return 1, 0
	}
	return e.x.comm.Size(), e.x.comm.Rank()
}

// Open starts a run that the other processes run with this one (a Train or
// an Evaluate): until Leave, this rank owes the others its status at their
// next header. It does nothing without processes.
func (e *Engine) Open() {
	if e.x != nil {
		e.x.open = true
	}
}

// Leave ends a run opened with Open. Unless every rank already knows the
// run is over (a header reported a failed or stopped rank, or the run's
// last collective finished it), it joins the others' next header with this
// rank's status — failed when cause is not nil, else stopped — so that
// they stop too instead of waiting for it. It waits at most
// Config.PeerTimeout, whatever ctx says (a cancelled run must still tell
// the others; see bound); a PeerError from that header is not an error
// here, unless the timeout passed.
func (e *Engine) Leave(ctx context.Context, cause error) error {
	if e.x == nil || !e.x.open {
		return nil
	}
	e.x.open = false
	status := statusStopped
	if cause != nil {
		status = statusFailed
	}
	ctx, cancel := e.x.bound(ctx)
	defer cancel()
	_, _, err := e.x.exchange(ctx, status, header{}, 0, model.Train, nil)
	if pe, ok := errors.AsType[*PeerError](err); ok && pe.Timeout == 0 {
		return nil
	}
	return err
}

// processScale is this process's factor on its tower-reduced loss and
// gradients so that summing over processes gives the reduction over every
// tower of every process: its share of the rows (BatchMean), of the towers
// (Mean), or 1 (Sum).
func processScale(r LossReduction, local, global header) float64 {
	switch r {
	case BatchMean:
		return local.rows / global.rows
	case Mean:
		return local.towers / global.towers
	}
	return 1
}

// globalLoss is the loss reduced over every tower of every process, from
// the header's sums.
func globalLoss(r LossReduction, g header) float64 {
	switch r {
	case BatchMean:
		return g.lossRows / g.rows
	case Mean:
		return g.lossTowers / g.towers
	}
	return g.loss
}

// allReduce sums the segments over the processes in one fused all-reduce.
func (x *across) allReduce(ctx context.Context, segs []collective.Segment) error {
	if err := x.fusion.AllReduce(ctx, x.comm, segs); err != nil {
		return x.broke(err)
	}
	return nil
}
