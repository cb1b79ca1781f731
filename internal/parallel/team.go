package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// SpinFor is how long an idle worker of the team keeps checking for new
// work, yielding its processor between checks, before it parks. A
// training step with several towers hands the team work every few hundred
// microseconds (the towers, then the gradient sums, then the update); a
// worker still spinning takes the next piece at once, where waking a
// parked goroutine waits on the Go scheduler, which can take milliseconds
// when the other processors are inside long BLAS (cgo) calls.
//
// Workers spin only while jobs come that often: when the last job came
// more than SpinFor after the one before (one tower, whose step is one
// job every few milliseconds), they park at once and leave the processor
// to whatever else runs, BLAS threads of its own among them.
const SpinFor = 500 * time.Microsecond

// team is a set of goroutines, started once, that run the pieces of one
// job at a time alongside the goroutine that hands them the job.
type team struct {
	busy    sync.Mutex // held by the goroutine whose job the team runs
	workers []*worker  // grown under busy

	gen     atomic.Uint64 // job number; a change means a new job
	job     func(i int)   // the current job: every worker calls it once, with its index
	pending atomic.Int64  // workers yet to return from job
	done    chan struct{} // receives when pending reaches 0 while the owner parks
	waiting atomic.Bool   // the owner is parked on done
	spin    atomic.Int64  // how long workers spin for the next job, in ns
	lastEnd time.Time     // when the last job ended; under busy
}

type worker struct {
	index  int           // the index of fn this worker runs: its place in workers, plus 1
	wake   chan struct{} // cap 1
	parked atomic.Bool
}

var shared = &team{done: make(chan struct{}, 1)}

// grow starts workers until there are n. The caller holds busy.
func (t *team) grow(n int) {
	for len(t.workers) < n {
		w := &worker{index: len(t.workers) + 1, wake: make(chan struct{}, 1)}
		t.workers = append(t.workers, w)
		go t.loop(w, t.gen.Load())
	}
}

// loop runs each job once, waiting for the next by spinning, then parking.
func (t *team) loop(w *worker, seen uint64) {
	for {
		seen = t.await(w, seen)
		t.job(w.index)
		if t.pending.Add(-1) == 0 && t.waiting.Load() {
			select {
			case t.done <- struct{}{}:
			default:
			}
		}
	}
}

// await returns the number of the next job after seen.
func (t *team) await(w *worker, seen uint64) uint64 {
	start := time.Now()
	for i := 0; ; i++ {
		if g := t.gen.Load(); g != seen {
			return g
		}
		if spin := time.Duration(t.spin.Load()); spin == 0 || (i%64 == 63 && time.Since(start) > spin) {
			w.parked.Store(true)
			if g := t.gen.Load(); g != seen { // a job posted before parked was seen
				w.parked.Store(false)
				return g
			}
			<-w.wake
			w.parked.Store(false)
			start, i = time.Now(), 0
			continue
		}
		runtime.Gosched()
	}
}

// run calls fn(0) on this goroutine and fn(1..n-1) on n-1 workers, all
// at once, and returns when every call has returned. Index i always runs
// on the same worker (the i-th), so that work handed out by index each
// job, a tower or a share of the elements, stays on one goroutine, and
// mostly on one core, from job to job. It reports false,
// having called nothing, when the team is running another job (a nested or
// concurrent call) or n < 2.
func (t *team) run(n int, fn func(i int)) bool {
	if n < 2 || !t.busy.TryLock() {
		return false
	}
	defer t.busy.Unlock()
	now := time.Now()
	if now.Sub(t.lastEnd) < SpinFor {
		t.spin.Store(int64(SpinFor))
	} else {
		t.spin.Store(0)
	}
	defer func() { t.lastEnd = time.Now() }()
	t.grow(n - 1)
	// Every worker sees the job; those beyond n-1 (the team grew for an
	// earlier, larger job) return at once.
	t.job = func(i int) {
		if i < n {
			fn(i)
		}
	}
	t.pending.Store(int64(len(t.workers)))
	t.gen.Add(1)
	for _, w := range t.workers {
		if w.parked.Load() {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
	fn(0)
	t.wait()
	t.job = nil
	return true
}

// wait returns once every worker has returned from the current job.
func (t *team) wait() {
	start := time.Now()
	for i := 0; t.pending.Load() > 0; i++ {
		if i%64 == 63 && time.Since(start) > SpinFor {
			t.waiting.Store(true)
			for t.pending.Load() > 0 {
				<-t.done
			}
			t.waiting.Store(false)
			select { // a token sent after the last check
			case <-t.done:
			default:
			}
			return
		}
		runtime.Gosched()
	}
}
