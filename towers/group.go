package towers

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// ErrGroupAborted is wrapped by the error AllSum returns once the group
// has been aborted: another tower failed, or the step was cancelled.
var ErrGroupAborted = errors.New("towers: group aborted")

// Group is a rendezvous of the towers of one build, for ops that need a
// statistic over the whole batch rather than their shard (a synchronized
// batch normalization's mean and variance, and their gradients): every
// tower hands in its part and gets back the sum over all towers.
//
// A Group is used in rounds: in each round every tower of the build calls
// AllSum once, and all get the same sum, added in tower order, so the
// result does not depend on which tower arrives first. The engine that
// runs the towers resets the build's groups before each run and aborts
// them when a tower fails, so that no tower waits for ever for one that
// will not come.
type Group struct {
	key string
	n   int

	mu      sync.Mutex
	cond    *sync.Cond
	parts   [][]float64
	arrived int
	round   atomic.Uint64 // written under mu; read without it while spinning
	aborted atomic.Bool
	sum     []float64
	err     error
	weights []float64
	idle    []func() bool // idle[i]: tower i's work for its waits; nil: none
	board   *Board        // the build's: other towers' work to help with
}

// Group returns the build's group called key: the same *Group on every
// tower of the build (tower 0 makes it). Ops use one key per rendezvous
// ("bn1/moments", "bn1/moments_grad"). Call it while building the graph,
// as model code and layer constructors run, not from an op's Do: the
// engine finds the groups to reset and abort before the towers run.
func (s *Scope) Group(key string) *Group {
	first := s.tower0()
	for _, g := range first.groups {
		if g.key == key {
			return g
		}
	}
	g := &Group{key: key, n: s.count, parts: make([][]float64, s.count), idle: make([]func() bool, s.count), board: s.Board()}
	g.cond = sync.NewCond(&g.mu)
	first.groups = append(first.groups, g)
	return g
}

// groupList returns the groups of the build the scope belongs to, in the
// order they were made. The engine reads it on every step
// (internal/scopes.Groups): it is the scope's own slice, not a copy, and
// must not be changed.
func (s *Scope) groupList() []*Group { return s.tower0().groups }

// Key returns the group's key.
func (g *Group) Key() string { return g.key }

// Towers returns the number of towers that take part in each round.
func (g *Group) Towers() int { return g.n }

// AllSum hands in tower's part and returns, once every tower has handed
// in its own of the same length, their elementwise sum, added in tower
// order. The result is shared by all towers and valid until the group's
// next round: read it, do not write it. part must not change until AllSum
// returns. With one tower it returns part itself.
func (g *Group) AllSum(tower int, part []float64) ([]float64, error) {
	if g.n == 1 {
		return part, nil
	}
	if tower < 0 || tower >= g.n {
		return nil, fmt.Errorf("towers: group %q: tower %d of %d", g.key, tower, g.n)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return nil, g.err
	}
	if g.parts[tower] != nil {
		return nil, fmt.Errorf("towers: group %q: tower %d handed in twice in one round", g.key, tower)
	}
	round := g.round.Load()
	idle := g.idle[tower]
	g.parts[tower] = part
	g.arrived++
	if g.arrived == g.n {
		if err := g.add(); err != nil {
			g.abortLocked(err)
			return nil, g.err
		}
		clear(g.parts)
		g.arrived = 0
		g.round.Add(1)
		g.cond.Broadcast()
		return g.sum, nil
	}
	// The others are computing the same op on their shards and arrive
	// within microseconds: do this tower's idle work while there is some,
	// and help with the work the others have posted (Board), then spin
	// for them before parking, since a parked goroutine waits for the Go
	// scheduler, behind BLAS calls holding the cores, for up to
	// milliseconds.
	g.spin(tower, round, idle)
	for g.round.Load() == round && g.err == nil {
		g.cond.Wait()
	}
	if g.round.Load() == round {
		return nil, g.err
	}
	return g.sum, nil
}

// spin runs idle until it reports no more work, then, while the round has
// not ended, helps with the other towers' posted work and spins for up to
// spinFor after the last piece it helped with. It is called and returns
// with g.mu held and releases it meanwhile, taking it back however it
// returns (a panic in idle leaves AllSum's deferred unlock a held mutex).
func (g *Group) spin(tower int, round uint64, idle func() bool) {
	g.mu.Unlock()
	defer g.mu.Lock()
	start := time.Now()
	for i := 0; g.round.Load() == round && !g.aborted.Load(); i++ {
		if idle != nil {
			if idle() {
				start, i = time.Now(), 0
				continue
			}
			idle = nil // nothing more for this wait
		}
		if g.board.help(tower) {
			start, i = time.Now(), 0
			continue
		}
		if i%64 == 63 && time.Since(start) > spinFor {
			return
		}
		runtime.Gosched()
	}
}

// spinFor is how long AllSum spins for the other towers before parking.
const spinFor = 200 * time.Microsecond

// add sums the parts into g.sum, in tower order.
func (g *Group) add() error {
	n := len(g.parts[0])
	for i, p := range g.parts {
		if len(p) != n {
			return fmt.Errorf("towers: group %q: tower %d handed in %d values, tower 0 %d", g.key, i, len(p), n)
		}
	}
	if cap(g.sum) < n {
		g.sum = make([]float64, n)
	}
	g.sum = g.sum[:n]
	copy(g.sum, g.parts[0])
	for _, p := range g.parts[1:] {
		for j, v := range p {
			g.sum[j] += v
		}
	}
	return nil
}

// Abort makes every waiting and later AllSum return an error wrapping
// ErrGroupAborted and cause, until Reset.
func (g *Group) Abort(cause error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		g.abortLocked(cause)
	}
}

func (g *Group) abortLocked(cause error) {
	g.err = fmt.Errorf("%w: group %q: %w", ErrGroupAborted, g.key, cause)
	g.aborted.Store(true)
	g.cond.Broadcast()
}

// Reset starts a fresh round with no tower arrived and no abort: the
// engine calls it before each run of the towers.
func (g *Group) Reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.parts)
	g.arrived = 0
	g.err = nil
	g.aborted.Store(false)
	g.round.Add(1)
}

// Movable is implemented by ops (gorgonia.Op) that a tower may run later
// in a step than their place in its graph's order, when Movable reports
// true: ops whose value depends on their arguments alone (and on state
// that ops run before them left, unchanged until the next step), that
// change nothing another op reads, and that do not meet the other towers
// in a Group. A tower waiting in a group runs the movable ops whose values
// nothing but movable ops read (a convolution's kernel gradient, say)
// instead of waiting (Group.SetIdle). An op that does not implement it
// runs in graph order.
type Movable interface {
	Movable() bool
}

// SetIdle gives tower's waits work: while the tower waits in AllSum for
// the others, AllSum calls fn, on the tower's goroutine and holding no
// lock, until the round completes or fn reports that it had nothing to
// run. fn runs one piece of the tower's own work that needs nothing from
// the group (the engine hands it the tower's gradient ops that no other
// op reads, so a tower that arrives first computes them instead of
// waiting); it must not panic. nil removes it.
func (g *Group) SetIdle(tower int, fn func() bool) error {
	if tower < 0 || tower >= g.n {
		return fmt.Errorf("towers: group %q: tower %d of %d", g.key, tower, g.n)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.idle[tower] = fn
	return nil
}

// SetWeights sets the loss weight of every tower for the following runs:
// the factor the engine multiplies tower i's loss and gradients by
// (replicate's loss reduction). An op whose gradient mixes the towers'
// rows, as a synchronized batch normalization's does, needs them to
// give each tower the gradient of the combined loss.
func (g *Group) SetWeights(w []float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.weights = append(g.weights[:0], w...)
}

// Weight returns tower's loss weight: 1 until SetWeights.
func (g *Group) Weight(tower int) float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if tower < len(g.weights) {
		return g.weights[tower]
	}
	return 1
}
